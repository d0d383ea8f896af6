"""OTLP JSON files with log requests (the Collector file exporter's logs file): Claude Code's events become
model, tool and wait spans with normalized usage; odd ones are kept and counted; spans take a session from
their resource."""

from __future__ import annotations

import json

import pytest

from agentprof.importers import load_any

T0 = 1_780_000_000_000_000_000
S = 1_000_000_000


def _attr(k, v):
    return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}}


def _logs(records):
    return {"resourceLogs": [{"resource": {"attributes": [_attr("service.name", "claude-code")]},
                              "scopeLogs": [{"scope": {"name": "com.anthropic.claude_code.events"},
                                             "logRecords": records}]}]}


def _event(name, t, **attrs):
    return {"timeUnixNano": str(t), "body": {"stringValue": f"claude_code.{name}"},
            "attributes": [_attr("event.name", name), _attr("session.id", "cc-1")]
            + [_attr(k, v) for k, v in attrs.items()]}


def test_claude_code_events_file(tmp_path):
    recs = [_event("user_prompt", T0, prompt_length=5, prompt="SECRET"),
            _event("api_request", T0 + 3 * S, model="claude-opus-4-1", duration_ms=2500, input_tokens=4,
                   output_tokens=90, cache_read_tokens=9000, cache_creation_tokens=700, cost_usd="0.2"),
            _event("tool_result", T0 + 4 * S, tool_name="Edit", duration_ms=800, success="false"),
            _event("api_error", T0 + 5 * S, model="claude-opus-4-1", duration_ms=300, status_code=529,
                   error="Overloaded"),
            _event("api_request", T0 + 9 * S, model="claude-opus-4-1", duration_ms=1000, input_tokens=-3,
                   output_tokens=5),
            _event("user_prompt", T0 + 60 * S),
            _event("mcp_server_connection", T0 + 61 * S)]
    path = tmp_path / "logs.jsonl"
    path.write_text(json.dumps(_logs(recs)) + "\n")
    t = load_any(path)
    rows = sorted(t.spans.to_dicts(), key=lambda r: (r["start_ns"], r["kind"] != "agent"))
    by_kind = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r)
    ok, failed, odd = sorted(by_kind["model"], key=lambda r: r["start_ns"])
    assert (ok["start_ns"], ok["end_ns"]) == (T0 + S // 2, T0 + 3 * S)
    assert (ok["input_tokens"], ok["cache_read_tokens"], ok["cache_write_tokens"], ok["output_tokens"]) == \
        (9704, 9000, 700, 90)  # Anthropic's input excludes the cache: OTel's includes it
    assert ok["provider"] == "anthropic" and ok["model"] == "claude-opus-4-1" and ok["name"] == "chat claude-opus-4-1"
    assert failed["status"] == "error" and failed["error_type"] == "http 529"
    assert odd["input_tokens"] is None  # impossible usage dropped, reported
    assert any(d.kind == "impossible_usage" for d in t.diagnostics)
    (tool,) = by_kind["tool"]
    assert tool["status"] == "error" and tool["end_ns"] - tool["start_ns"] == 800_000_000
    (wait,) = by_kind["wait"]  # the first prompt starts the session; the second ends the user's turn
    assert (wait["start_ns"], wait["end_ns"]) == (T0 + 9 * S, T0 + 60 * S)
    assert json.loads(wait["attributes"])["agentprof.wait.reason"] == "user_turn"
    (agent,) = by_kind["agent"]
    assert {r["parent_id"] for r in rows if r["kind"] != "agent"} == {agent["span_id"]}
    assert set(t.spans["session_id"]) == {"cc-1"}
    assert [d.message for d in t.diagnostics if d.kind == "otlp_unmapped"] == [
        "1 log record(s) that are no known agent event kept as generic spans: claude_code.mcp_server_connection (1)"]
    assert not any("SECRET" in (a or "") for a in t.spans["attributes"].to_list())


def test_span_session_from_resource_and_metrics_counted(tmp_path):
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat gpt-4o", "startTimeUnixNano": str(T0),
            "endTimeUnixNano": str(T0 + S), "attributes": [_attr("gen_ai.operation.name", "chat")]}
    spans = {"resourceSpans": [{"resource": {"attributes": [_attr("session.id", "from-resource")]},
                                "scopeSpans": [{"spans": [span]}]}]}
    metrics = {"resourceMetrics": [{"scopeMetrics": [{"metrics": [
        {"name": "claude_code.token.usage", "sum": {"dataPoints": [{"asInt": "5"}, {"asInt": "7"}]}}]}]}]}
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(spans) + "\n" + json.dumps(metrics) + "\n")
    t = load_any(path)
    assert set(t.spans["session_id"]) == {"from-resource"}
    assert sorted(t.spans["kind"]) == ["agent", "model"]
    assert [d.message for d in t.diagnostics if d.kind == "otlp_metrics"] == [
        "2 metric data point(s) received and not used (the spans and events carry the calls)"]


MS = 1_000_000


def _codex(name, t, **attrs):
    """A Codex event as codex-rs/otel logs it (``event.name``, ``conversation.id``, values as strings)."""
    return {"timeUnixNano": str(t), "body": {"stringValue": name},
            "attributes": [_attr("event.name", name), _attr("conversation.id", "cx-1"), _attr("model", "gpt-5")]
            + [_attr(k, str(v)) for k, v in attrs.items()]}


def _usage(t):
    # core/src/client.rs reports the usage as its own response.completed event, after the transport's
    return _codex("codex.sse_event", t, **{"event.kind": "response.completed", "input_token_count": 5000,
                                           "cached_token_count": 4096, "output_token_count": 120,
                                           "reasoning_token_count": 64, "tool_token_count": 5184})


def _load_codex(tmp_path, recs):
    path = tmp_path / "codex-logs.jsonl"
    path.write_text(json.dumps(_logs(recs)) + "\n")
    t = load_any(path)
    calls = t.spans.filter(t.spans["kind"] == "model").sort("start_ns").to_dicts()
    return t, calls


def test_codex_websocket_events_are_model_calls(tmp_path):
    # the websocket transport (codex-api responses_websocket.rs): a handshake, the request frame sent
    # (duration_ms: the send), one websocket_event per message, a timing message; then the usage event
    recs = [_codex("codex.websocket_connect", T0 - 200 * MS, duration_ms=150, success="true", endpoint="/responses"),
            _codex("codex.websocket_request", T0, duration_ms=3, success="true"),
            _codex("codex.websocket_event", T0 + 100 * MS, **{"event.kind": "response.created", "duration_ms": 97}),
            _codex("codex.websocket_event", T0 + 900 * MS, **{"event.kind": "response.output_text.delta"}),
            _codex("codex.websocket_event", T0 + 2400 * MS, **{"event.kind": "response.completed"}),
            _usage(T0 + 2401 * MS),
            _codex("codex.websocket_event", T0 + 2500 * MS, **{"event.kind": "responsesapi.websocket_timing"}),
            _codex("codex.tool_result", T0 + 3600 * MS, tool_name="shell", duration_ms=1100, success="true"),
            _codex("codex.websocket_request", T0 + 4 * S, duration_ms=2, success="false",
                   **{"error.message": "failed to send websocket request"})]
    t, calls = _load_codex(tmp_path, recs)
    assert len(calls) == 2
    ok, failed = calls
    assert (ok["start_ns"], ok["end_ns"]) == (T0 - 3 * MS, T0 + 2401 * MS)
    assert (ok["input_tokens"], ok["cache_read_tokens"], ok["output_tokens"]) == (5000, 4096, 120)
    assert ok["status"] == "ok" and ok["ttft_s"] == pytest.approx(0.903)
    assert failed["status"] == "error" and failed["start_ns"] == T0 + 4 * S - 2 * MS
    (tool,) = t.spans.filter(t.spans["kind"] == "tool").to_dicts()
    assert tool["end_ns"] - tool["start_ns"] == 1100 * MS
    # the handshake and the timing message mean no call: kept and counted by name
    unmapped = " ".join(d.message for d in t.diagnostics if d.kind == "otlp_unmapped")
    assert "codex.websocket_connect (1)" in unmapped and "codex.websocket_event (1)" in unmapped


def test_codex_transport_completion_before_the_usage_is_one_call(tmp_path):
    # over HTTP the transport logs response.completed (no token counts) before the usage event: one call
    recs = [_codex("codex.api_request", T0, duration_ms=400, **{"http.response.status_code": 200}),
            _codex("codex.sse_event", T0 + 900 * MS, **{"event.kind": "response.output_text.delta"}),
            _codex("codex.sse_event", T0 + 2400 * MS, **{"event.kind": "response.completed", "duration_ms": 4}),
            _usage(T0 + 2401 * MS),
            _codex("codex.api_request", T0 + 5 * S, duration_ms=300, **{"http.response.status_code": 200})]
    _, calls = _load_codex(tmp_path, recs)
    assert len(calls) == 2
    first, second = calls
    assert first["end_ns"] == T0 + 2401 * MS and first["input_tokens"] == 5000
    assert "agentprof.incomplete" not in (first["attributes"] or "")
    assert second["input_tokens"] is None and second["start_ns"] == T0 + 5 * S - 300 * MS
