"""OTLP JSON: agentprof traces round-trip; spans from the official GenAI instrumentation, OpenLLMetry and
OpenInference (real instrumentors around the real openai SDK, talking to a loopback server) import."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from agentprof.importers import load_any
from agentprof.trace import JsonlTraceWriter, TraceMeta, read, write_jsonl
from agentprof.trace.otlp import to_otlp_json

from .importer_helpers import imported

USAGE = {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
         "prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens_details": {"reasoning_tokens": 10}}


def test_agentprof_traces_round_trip(tmp_path):
    """agentprof JSONL -> to_otlp_json -> import gives the same span table (and metadata)."""
    src = imported("claude-code")
    write_jsonl(src, tmp_path / "a.jsonl")
    a = read(tmp_path / "a.jsonl")
    (tmp_path / "a.otlp.jsonl").write_text(json.dumps(to_otlp_json(a)) + "\n")
    b = load_any(tmp_path / "a.otlp.jsonl")
    assert a.spans.height > 500 and b.spans.equals(a.spans)
    assert b.meta.source_format == "claude-code" and b.meta.tokenizer == a.meta.tokenizer
    assert [d.kind for d in b.diagnostics] == [d.kind for d in a.diagnostics]


def test_round_trip_keeps_non_hex_ids_and_missing_times(tmp_path):
    """Capture-style records with free-form ids and an unknown-timing span survive OTLP's hex ids and 0 times."""
    w = JsonlTraceWriter(tmp_path / "cap.jsonl")
    w.write_meta(TraceMeta(name="cap"))
    w.write({"record": "span", "trace_id": "run-1", "span_id": "root", "parent_id": None, "name": "invoke_agent demo",
             "kind": "agent", "start_ns": 0, "end_ns": 5_000, "status": "ok",
             "attributes": {"agentprof.session.id": "s1"}})
    w.write({"record": "span", "trace_id": "run-1", "span_id": "m1", "parent_id": "root", "name": "chat gpt-4o",
             "kind": "model", "start_ns": 10, "end_ns": 4_000, "status": "error", "error_type": "RateLimitError",
             "attributes": {"agentprof.session.id": "s1", "gen_ai.usage.input_tokens": 7, "gen_ai.request.stream": True,
                            "agentprof.prompt.block_hashes": [-5, 2**62], "gen_ai.response.time_to_first_chunk": 0.25,
                            "custom.list": ["a", "b"], "custom.map": {"k": 1}}})
    w.write({"record": "span", "trace_id": "run-1", "span_id": "t1", "parent_id": "root", "name": "execute_tool x",
             "kind": "tool", "start_ns": None, "end_ns": None, "status": "ok",
             "attributes": {"agentprof.session.id": "s1"}})
    w.close()
    a = read(tmp_path / "cap.jsonl")
    req = to_otlp_json(a)
    spans = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    (tmp_path / "cap.otlp.json").write_text(json.dumps(req, indent=2))  # a pretty-printed single request
    b = load_any(tmp_path / "cap.otlp.json")
    assert b.spans.equals(a.spans)


class _Chat(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server API)
        n = int(self.headers.get("content-length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        body = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000,
                           "model": req.get("model", "gpt-4o") + "-2024-08-06",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "done"}}],
                           "usage": USAGE}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def chat_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def _export(name, base_url, hex_ids):
    """One real chat call under an agent span, in a fresh interpreter; the spans as an OTLP JSON request."""
    for mod in ("openai", "google.protobuf", {"otel-genai": "opentelemetry.instrumentation.openai_v2",
                                              "openllmetry": "opentelemetry.instrumentation.openai",
                                              "openinference": "openinference.instrumentation.openai"}[name]):
        pytest.importorskip(mod)
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("otlp_emit.py")), name, base_url],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:  # the third-party instrumentation itself failed (e.g. incompatible wrapt)
        pytest.skip(f"{name} instrumentation unavailable: {out.stderr.strip().splitlines()[-1:]}")
    data = json.loads(out.stdout)
    req = data["request"]
    if hex_ids:  # the collector's file exporter writes hex ids; protobuf's JSON mapping writes base64
        for rs in req["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if sp.get(k):
                            sp[k] = base64.b64decode(sp[k]).hex()
    return req, data["attribute_keys"]


@pytest.mark.parametrize("name", ["otel-genai", "openllmetry", "openinference"])
def test_instrumentation_spans_import(tmp_path, chat_server, name):
    req, raw_keys = _export(name, chat_server, hex_ids=name != "openinference")
    p = tmp_path / "collector.jsonl"
    p.write_text(json.dumps(req) + "\n")
    tr = load_any(p)
    df = tr.spans
    model = df.filter(pl.col("kind") == "model")
    assert model.height == 1
    row = model.row(0, named=True)
    assert row["input_tokens"] == USAGE["prompt_tokens"] and row["output_tokens"] == USAGE["completion_tokens"]
    if any("cache_read" in k for k in raw_keys):  # only where the instrumentation records the cached tokens
        assert row["cache_read_tokens"] == USAGE["prompt_tokens_details"]["cached_tokens"]
    assert row["model"].startswith("gpt-4o")
    assert row["session_id"] == f"conv-{name}"
    agent = df.filter(pl.col("kind") == "agent")
    assert agent.height == 1 and agent.row(0, named=True)["session_id"] == f"conv-{name}"
    assert row["parent_id"] == agent.row(0, named=True)["span_id"]
    assert row["timing"] == "measured" and row["end_ns"] > row["start_ns"]


def test_spans_without_agent_or_session_get_a_derived_agent_span(tmp_path, chat_server):
    req, _ = _export("openllmetry", chat_server, hex_ids=True)
    for rs in req["resourceSpans"]:  # keep only the model span: no agent, no conversation id
        for ss in rs["scopeSpans"]:
            ss["spans"] = [s for s in ss["spans"] if s["name"] != "invoke_agent demo"]
            for s in ss["spans"]:
                s.pop("parentSpanId", None)
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps(req) + "\n")
    df = load_any(p).spans
    assert sorted(df.get_column("kind").to_list()) == ["agent", "model"]
    agent = df.filter(pl.col("kind") == "agent").row(0, named=True)
    assert agent["timing"] == "derived" and agent["session_id"] == agent["trace_id"]


def test_malformed_otlp_is_located(tmp_path):
    from agentprof.errors import TraceFormatError

    p = tmp_path / "bad.jsonl"
    p.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}\n')
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl:1: malformed OTLP request"):
        load_any(p, fmt="otlp-json")


FIXTURES = Path(__file__).parent / "fixtures_other"


def _otlp_spans(path: Path) -> list[dict]:
    req = json.loads(path.read_text())
    return [sp for rs in req["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]


def _attr(sp: dict, key: str):
    return next((kv["value"] for kv in sp["attributes"] if kv["key"] == key), None)


def test_run_span_with_summed_usage_is_not_a_model_call(tmp_path):
    # Synthetic fixture (fixtures_other/README.md): Pydantic AI puts the run's token totals on "agent run".
    path = FIXTURES / "pydantic-ai-agent-run.otlp.json"
    raw = _otlp_spans(path)
    chats = [sp for sp in raw if (_attr(sp, "gen_ai.operation.name") or {}).get("stringValue") == "chat"]
    tr = load_any(path)
    m = tr.spans.filter(pl.col("kind") == "model")
    assert m.height == len(chats) == 2
    assert m.get_column("input_tokens").sum() == sum(int(_attr(c, "gen_ai.usage.input_tokens")["intValue"])
                                                     for c in chats)
    run = tr.spans.filter(pl.col("name") == "agent run")
    assert run.get_column("kind").to_list() == ["agent"]
    tools = tr.spans.filter(pl.col("kind") == "tool")
    assert tools.get_column("name").to_list() == ["running tool"]
    # a span known only by its usage: a model call alone, a sum when model calls run below it
    spans = [dict(sp) for sp in raw]
    for sp in spans:
        if sp["name"] == "agent run":
            sp["name"] = "workflow"
    (tmp_path / "w.otlp.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    w = load_any(tmp_path / "w.otlp.json").spans
    assert w.filter(pl.col("name") == "workflow").get_column("kind").to_list() == ["orchestration"]
    assert w.filter(pl.col("kind") == "model").get_column("input_tokens").sum() == 300
    alone = [sp for sp in spans if sp["name"] == "workflow"]
    (tmp_path / "a.otlp.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": alone}]}]}))
    assert load_any(tmp_path / "a.otlp.json").spans.filter(pl.col("kind") == "model").height == 1
