"""agentprof's lean span: the OpenTelemetry API behaviour the SDK span has, handed to processors and exporters
as a ``ReadableSpan``, and the pre-encoded tool line equal to the generic encoding."""

from __future__ import annotations

import json

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

import agentprof
from agentprof import semconv as sc
from agentprof.capture import provider
from agentprof.capture.exporter import encode_span, line_shape, span_record
from agentprof.capture.lean_span import LeanSpan

from .capture_helpers import load, raw_records


class _Keep(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span) -> None:
        self.ended.append(span)


def _lean(name="execute_tool t", attrs=None, parent=None, keep=None):
    provider.tracer()
    keep = keep or _Keep()
    sc_parent = parent.get_span_context() if parent is not None else None
    span_ctx = otel_trace.SpanContext(sc_parent.trace_id if sc_parent else 7, 1234 if parent is None else 5678,
                                      False, provider._FLAGS)
    span = LeanSpan(name, span_ctx, sc_parent, SpanKind.INTERNAL, dict(attrs or {}), 1000)
    span._processor = keep  # this span only (the class default is agentprof's processor)
    return span, keep


def test_api_behaviour_matches_the_sdk_span():
    span, keep = _lean(attrs={sc.KIND: "tool"})
    sdk = TracerProvider(shutdown_on_exit=False).get_tracer("t").start_span("x")
    for s in (span, sdk):
        s.set_attribute("a.int", 3)
        s.set_attribute("a.list", [1, 2])
        s.set_attribute("", 1)  # invalid key: dropped
        s.set_attributes({"a.str": "v", "a.bool": True})
        s.add_event("ev", {"k": 1})
        s.set_status(Status(StatusCode.ERROR, "bad"))
        s.set_status(StatusCode.UNSET)  # ignored
        s.update_name("renamed")
        s.record_exception(ValueError("boom"))
        assert s.is_recording()
    sdk.end()
    span.end()
    assert not span.is_recording() and keep.ended == [span]
    assert dict(span.attributes) == {sc.KIND: "tool", **dict(sdk.attributes)}
    assert span.name == sdk.name == "renamed"
    assert span.status.status_code is sdk.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events] == [e.name for e in sdk.events] == ["ev", "exception"]
    assert span.events[1].attributes["exception.type"] == sdk.events[1].attributes["exception.type"] == "ValueError"
    span.set_attribute("late", 1)  # after end: ignored, and the span is not handed over twice
    span.end()
    assert "late" not in span.attributes and keep.ended == [span]


def test_status_ok_is_final_and_exporters_read_it_like_any_readable_span():
    span, _ = _lean()
    span.set_status(StatusCode.OK)
    span.set_status(StatusCode.ERROR)
    assert span.status.status_code is StatusCode.OK
    exporter = InMemorySpanExporter()
    span._processor = SimpleSpanProcessor(exporter)
    span.end(end_time=5000)
    (got,) = exporter.get_finished_spans()
    assert got.start_time == 1000 and got.end_time == 5000 and got.parent is None
    assert got.resource is provider._tracer.resource and got.dropped_attributes == 0
    assert json.loads(got.to_json())["name"] == "execute_tool t"


def test_application_spans_nest_under_a_lean_span():
    app = TracerProvider(shutdown_on_exit=False).get_tracer("app")
    span, _ = _lean()
    with otel_trace.use_span(span, end_on_exit=False):
        child = app.start_span("app.child")
    assert child.parent.span_id == span.get_span_context().span_id
    assert child.context.trace_id == span.get_span_context().trace_id


def test_shaped_line_equals_the_generic_encoding():
    attrs = {sc.KIND: "tool", sc.SESSION_ID: "s" * 32, sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.TOOL_NAME: "t\u00e9\"x %d%s"}
    parent, _ = _lean("invoke_agent a", {sc.KIND: "agent"})
    for with_parent, runq in ((False, None), (True, None), (False, 1234), (True, 0)):
        span, _ = _lean("execute_tool 100%", attrs=attrs, parent=parent if with_parent else None)
        shape = span._shape = line_shape(span.name, attrs)
        assert shape is not None
        span._attributes[sc.CPU_NS] = 4321
        if runq is not None:  # the span's wait for a CPU: the template's second variant
            span._attributes[sc.RUNQ_NS] = runq
        span.end(end_time=9999)
        fast = encode_span(span)
        span._shape = None
        generic = encode_span(span)
        assert fast.endswith(b"\n") and fast.count(b"\n") == 1
        assert json.loads(fast) == json.loads(generic) == span_record(span)
        ctx = span.get_span_context()
        rest = (ctx.trace_id, ctx.span_id) + ((parent.get_span_context().span_id,) if with_parent else ()) \
            + (span.start_time, 9999)
        template = shape[(4 if runq is not None else 0) + (0 if with_parent else 1)]
        assert fast == template % ((4321,) + ((runq,) if runq is not None else ()) + rest)  # the template's line
        span._shape = line_shape(span.name, attrs)
        assert json.loads(encode_span(span, detach_parent=True))["parent_id"] is None



def test_shaped_line_with_per_span_integers_equals_the_generic_encoding():
    attrs = {sc.KIND: "parse", sc.SESSION_ID: "s" * 32, sc.PARSE_BYTES: 0}
    shape = line_shape("args", attrs, ints=(sc.PARSE_BYTES,))
    assert shape is not None and shape[3] == (sc.PARSE_BYTES,)
    assert line_shape("args", attrs, ints=(sc.KIND,)) is None  # per-span integers must come last
    parent, _ = _lean("invoke_agent a", {sc.KIND: "agent"})
    for size in (0, 7, 123456):
        span, _ = _lean("args", attrs={**attrs, sc.PARSE_BYTES: size}, parent=parent)
        span._shape = shape
        span._attributes[sc.CPU_NS] = 99
        span.end(end_time=5000)
        fast = encode_span(span)
        span._shape = None
        assert json.loads(fast) == json.loads(encode_span(span)) == span_record(span)
        assert json.loads(fast)["attributes"][sc.PARSE_BYTES] == size
    span, _ = _lean("args", attrs={**attrs, sc.PARSE_BYTES: "not an int"}, parent=parent)
    span._shape = shape
    span._attributes[sc.CPU_NS] = 1
    span.end(end_time=5000)
    assert json.loads(encode_span(span))["attributes"][sc.PARSE_BYTES] == "not an int"  # the general way


def test_a_changed_tool_span_falls_back_to_the_generic_line(tmp_path):
    @agentprof.tool
    def lookup(fail: bool) -> None:
        otel_trace.get_current_span().set_attribute("app.note", "from the tool")
        if fail:
            raise KeyError("x")

    with agentprof.profile("shape", out=tmp_path) as run:
        lookup(False)
        try:
            lookup(True)
        except KeyError:
            pass

        @agentprof.tool
        def plain() -> None:
            pass

        plain()
    load(run.path)  # valid trace
    lines = [r for r in raw_records(run.path) if r.get("kind") == "tool"]
    looked = [r for r in lines if r["name"] == "execute_tool lookup"]
    assert [r["attributes"]["app.note"] for r in looked] == ["from the tool"] * 2
    assert [r["status"] for r in looked] == ["ok", "error"] and looked[1]["error_type"] == "KeyError"
    (plain_line,) = [r for r in lines if r["name"] == "execute_tool plain"]
    (root,) = [r for r in raw_records(run.path) if r.get("kind") == "agent"]
    assert plain_line["attributes"][sc.CPU_NS] >= 0 and plain_line["parent_id"] == root["span_id"]
