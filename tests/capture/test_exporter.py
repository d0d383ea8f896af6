"""The span exporter and the OTel span -> agentprof record mapping."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Status, StatusCode

from agentprof import semconv as sc
from agentprof.capture import CaptureWarning
from agentprof.capture.exporter import JsonlSpanExporter, encode, span_record
from agentprof.trace.files import read
from agentprof.trace.meta import TraceMeta
from agentprof.trace.writer import JsonlTraceWriter


def make_spans():
    provider = TracerProvider(shutdown_on_exit=False)
    ended = []

    class Keep(SpanProcessor):
        def on_end(self, span):
            ended.append(span)

    provider.add_span_processor(Keep())
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={sc.KIND: "agent", sc.SESSION_ID: "s1"}):
        with tracer.start_as_current_span("chat m", attributes={
                sc.KIND: "model", sc.SESSION_ID: "s1", sc.USAGE_INPUT_TOKENS: 120,
                sc.USAGE_CACHE_READ_INPUT_TOKENS: 100, sc.PROMPT_BLOCK_HASHES: [1, -2, 3],
                sc.PROMPT_SEGMENTS: json.dumps([{"kind": "system", "role": "system", "tokens": 5, "hash": 9}]),
                sc.RESPONSE_TIME_TO_FIRST_CHUNK: 0.25, sc.REQUEST_STREAM: True, "custom.x": "y"}):
            pass
        with tracer.start_as_current_span("execute_tool t", attributes={sc.KIND: "tool", sc.SESSION_ID: "s1"}) as s:
            s.set_status(Status(StatusCode.ERROR))
            s.set_attribute(sc.ERROR_TYPE, "ValueError")
    return ended


def test_record_layout():
    model, tool, root = make_spans()
    rec = span_record(model)
    assert set(rec) == {"record", "trace_id", "span_id", "parent_id", "name", "kind", "start_ns", "end_ns",
                        "status", "error_type", "attributes"}
    assert rec["record"] == "span" and rec["kind"] == "model" and rec["status"] == "ok"
    assert rec["trace_id"] == f"{model.context.trace_id:032x}" and len(rec["span_id"]) == 16
    assert rec["parent_id"] == f"{root.context.span_id:016x}"
    assert rec["start_ns"] == model.start_time and rec["end_ns"] == model.end_time
    assert rec["attributes"]["custom.x"] == "y"
    assert span_record(root)["parent_id"] is None
    assert span_record(model, detach_parent=True)["parent_id"] is None
    t = span_record(tool)
    assert t["status"] == "error" and t["error_type"] == "ValueError"
    line = encode(rec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and json.loads(line) == json.loads(json.dumps(rec))


def test_exporter_in_a_standard_pipeline_roundtrips(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = JsonlTraceWriter(path)
    writer.write_meta(TraceMeta(name="pipeline"))
    exporter = JsonlSpanExporter(writer)
    assert exporter.export(make_spans()) is SpanExportResult.SUCCESS
    exporter.shutdown()
    trace = read(path)
    df = trace.spans
    assert df.height == 3 and set(df["session_id"]) == {"s1"}
    model = df.filter(df["kind"] == "model").to_dicts()[0]
    assert model["input_tokens"] == 120 and model["cache_read_tokens"] == 100
    assert model["block_hashes"] == [1, -2, 3] and model["ttft_s"] == 0.25 and model["stream"] is True
    assert model["segments"] == [{"kind": "system", "role": "system", "tokens": 5, "hash": 9}]
    assert json.loads(model["attributes"]) == {"custom.x": "y"}


def test_failed_write_warns_once_and_reports_failure(tmp_path, recwarn):
    writer = JsonlTraceWriter(tmp_path / "t.jsonl")
    exporter = JsonlSpanExporter(writer)
    writer.close()
    spans = make_spans()
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert exporter.failed and exporter.written == 0
    assert len([w for w in recwarn if issubclass(w.category, CaptureWarning)]) == 1
