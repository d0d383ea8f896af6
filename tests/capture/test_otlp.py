"""With OTEL_EXPORTER_OTLP_ENDPOINT set, spans also go to that endpoint (OTLP/HTTP protobuf), besides the file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import agentprof

from .capture_helpers import load, raw_records


class Collector:
    """A minimal OTLP/HTTP trace receiver on loopback."""

    def __init__(self):
        self.requests: list[tuple[str, dict, ExportTraceServiceRequest]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                owner.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, req))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()  # stops in 50 ms

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def wait_for(self, n, timeout=10.0):
        """Spans received once at least ``n`` arrived (profiles flush for 2 s; a loaded machine may need more)."""
        deadline = time.monotonic() + timeout
        while len(self.spans()) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.spans()

    def spans(self):
        out = []
        for _, _, req in self.requests:
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    out.extend(ss.spans)
        return out


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.httpd.shutdown()


@agentprof.tool
def fetch(url):
    return len(url)


def test_spans_reach_otlp_endpoint_and_file(tmp_path, collector, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=agents")
    with agentprof.profile("otlp", out=tmp_path) as run:
        for i in range(3):
            fetch(f"https://example.test/{i}")
    _, rows = load(run.path)
    spans = collector.wait_for(len(rows))
    assert sorted(s.name for s in spans) == sorted(r["name"] for r in rows)
    assert {bytes(s.span_id).hex() for s in spans} == {r["span_id"] for r in rows}
    path, headers, req = collector.requests[0]
    assert path == "/v1/traces" and headers.get("x-team") == "agents"
    assert headers["content-type"] == "application/x-protobuf"
    tool = next(s for s in spans if s.name == "execute_tool fetch")
    a = {x.key: x.value for x in tool.attributes}
    assert a["gen_ai.tool.name"].string_value == "fetch"
    assert a["agentprof.session.id"].string_value == run.session_id
    # and off again when the variable is gone
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    before = len(collector.spans())
    with agentprof.profile("no-otlp", out=tmp_path):
        fetch("x")
    assert len(collector.spans()) == before


def test_traces_endpoint_and_sdk_disabled(tmp_path, collector, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.url + "/custom/path")
    with agentprof.profile("traces-endpoint", out=tmp_path):
        fetch("y")
    collector.wait_for(2)
    assert collector.requests and collector.requests[-1][0] == "/custom/path"
    n = len(collector.requests)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    with agentprof.profile("disabled", out=tmp_path) as run:
        fetch("z")
    assert len(collector.requests) == n  # no export, but agentprof's own file is still written
    assert [r["kind"] for r in load(run.path)[1]] == ["agent", "tool"]


def test_resource_from_environment(tmp_path, collector):
    """In a fresh process: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES describe the exported spans."""
    env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_SERVICE_NAME="my-agent",
               OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
    code = f"import agentprof\nwith agentprof.profile('svc', out={str(tmp_path)!r}):\n    pass\n"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (_, _, req), = collector.requests
    resource = {a.key: a.value.string_value for a in req.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "my-agent" and resource["deployment.environment"] == "test"
    assert [s.name for s in collector.spans()] == ["invoke_agent svc"]


def test_exported_spans_carry_session_and_kind_for_receivers(tmp_path, collector, monkeypatch, server):
    """Receivers group by ``session.id`` / ``gen_ai.conversation.id`` and classify by ``openinference.span.kind``
    (a parse span has no GenAI operation to go by); the file keeps agentprof's own attributes only."""
    import openai

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    with agentprof.profile("receivers", out=tmp_path) as run:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        fetch("x")
        agentprof.parse_json('{"a": 1}', name="tool_args")
    _, rows = load(run.path)
    spans = collector.wait_for(len(rows))
    got = {s.name: {a.key: a.value for a in s.attributes} for s in spans}
    kinds = {n: a["openinference.span.kind"].string_value for n, a in got.items()}
    assert kinds == {"invoke_agent receivers": "AGENT", "chat gpt-4o": "LLM", "execute_tool fetch": "TOOL",
                     "tool_args": "CHAIN"}
    for a in got.values():
        assert a["session.id"].string_value == a["gen_ai.conversation.id"].string_value == run.session_id
    records = [r for r in raw_records(run.path) if r["record"] == "span"]
    model_attrs = next(r["attributes"] for r in records if r["kind"] == "model")
    assert got["chat gpt-4o"]["gen_ai.usage.input_tokens"].int_value == model_attrs["gen_ai.usage.input_tokens"] > 0
    assert all("session.id" not in r["attributes"] for r in records)  # the file format is unchanged
