"""``agentprof collect`` as a real subprocess: the OpenTelemetry Python SDK's OTLP exporters send GenAI spans
(session A) and Claude Code-shaped events (session B); after SIGINT (or SIGTERM) the output folder holds one
trace per session, which ``analyze`` reads with every model and tool call and their measured time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agentprof.analysis import analyze
from agentprof.importers import load_any

from .senders import send_claude_code_events, send_genai_spans

ROOT = Path(__file__).resolve().parents[2]
GENAI_CALLS = [(1.2, 0.3), (0.8, 0.5), (2.0, None)]
CLAUDE_TURNS = [[(3.0, ("Bash", 1.5)), (1.0, ("Read", 0.25)), (2.5, None)], [(1.8, None)]]


class Collector:
    """``agentprof collect --port 0 --grpc-port 0`` in a subprocess, with the ports it printed."""

    def __init__(self, out: Path, grpc: bool = True) -> None:
        args = [sys.executable, "-m", "agentprof", "collect", "--port", "0", "--grpc-port", "0", "--out", str(out)]
        if not grpc:
            args.append("--no-grpc")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.http = self.grpc = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("listening http "):
                self.http = "http://" + line.split()[2]
            elif line.startswith("listening grpc "):
                self.grpc = line.split()[2]
            elif line.startswith("writing "):
                break
        assert self.http, self.proc.stderr.read() if self.proc.poll() is not None else "no port printed"

    def stop(self, sig: int = signal.SIGINT) -> str:
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        return out


def wait_for_files(out: Path, n: int, timeout: float = 15.0) -> list[Path]:
    deadline = time.monotonic() + timeout
    while True:
        files = sorted(out.glob("*.jsonl"))
        if len(files) >= n or time.monotonic() > deadline:
            return files
        time.sleep(0.1)


def check(out: Path, sent: list) -> None:
    """``analyze`` on the folder: one session per sender, every call, model and tool time within 5 %."""
    trace = load_any(out)
    a = analyze(trace).to_dict()
    assert a["sessions"] == len(sent)
    per = {s["session_id"]: s for s in a["per_session"]}
    spans = trace.spans
    for s in sent:
        row = per[s.session]
        mine = spans.filter(spans["session_id"] == s.session)
        assert row["model_calls"] == len(s.model_s)
        assert (mine["kind"] == "tool").sum() == len(s.tool_s)
        assert row["model_s"] == pytest.approx(sum(s.model_s), rel=0.05)
        assert row["tool_s"] == pytest.approx(sum(s.tool_s), rel=0.05)
        assert sorted(mine.filter(mine["kind"] == "model")["input_tokens"].to_list()) == sorted(s.input_tokens)
        assert row["wait_s"] == pytest.approx(sum(s.user_wait_s), rel=0.05, abs=1e-6)
        assert (mine["kind"] == "agent").sum() == 1


def test_http_spans_and_claude_code_events_become_two_sessions(tmp_path):
    from .senders import exporters

    out = tmp_path / "live"
    c = Collector(out)
    spans_x, logs_x = exporters(c.http, "http")
    a = send_genai_spans(spans_x, "session-A", GENAI_CALLS)
    b = send_claude_code_events(logs_x, "session-B", CLAUDE_TURNS)
    # written as data arrives, before the collector stops
    files = wait_for_files(out, 2)
    assert [f.name for f in files] == ["session-A.jsonl", "session-B.jsonl"]
    assert load_any(files[1]).spans.height > 0
    printed = c.stop(signal.SIGINT)
    assert "received 6 spans, 10 log records" in printed
    assert sorted(p.name for p in out.iterdir()) == ["session-A.jsonl", "session-B.jsonl"]  # no temporary left
    check(out, [a, b])
    raw = (out / "session-B.jsonl").read_text()
    assert "SECRET-PROMPT-TEXT" not in raw  # prompt text is not stored
    meta = json.loads(raw.splitlines()[0])
    assert [d["kind"] for d in meta["diagnostics"]] == ["otlp_unmapped"]  # the tool_decision events, counted
    assert "2 record(s)" in meta["diagnostics"][0]["message"]
    # the commands that read traces read these (report writes its page from the same folder)
    done = subprocess.run([sys.executable, "-m", "agentprof", "report", str(out), "-o", str(tmp_path / "r.html")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r.html").stat().st_size > 0


def test_grpc_path_and_sigterm(tmp_path):
    pytest.importorskip("grpc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    from .senders import exporters

    out = tmp_path / "live"
    c = Collector(out)
    assert c.grpc, "no gRPC port printed"
    spans_x, logs_x = exporters(c.grpc, "grpc")
    a = send_genai_spans(spans_x, "grpc-A", GENAI_CALLS[:2])
    b = send_claude_code_events(logs_x, "grpc-B", CLAUDE_TURNS[:1])
    printed = c.stop(signal.SIGTERM)  # the final flush writes what the writer had not yet written
    assert "received 5 spans, 7 log records" in printed
    check(out, [a, b])


CODEX = [("codex.api_request", 0.0, {"duration_ms": "400", "http.response.status_code": "200", "attempt": "1"}),
         ("codex.sse_event", 0.1, {"event.kind": "response.created", "duration_ms": "5"}),
         ("codex.sse_event", 0.9, {"event.kind": "response.output_text.delta", "duration_ms": "800"}),
         ("codex.sse_event", 2.4, {"event.kind": "response.completed", "input_token_count": "5000",
                                   "cached_token_count": "4096", "output_token_count": "120",
                                   "reasoning_token_count": "64"}),
         ("codex.tool_result", 3.6, {"tool_name": "shell", "call_id": "c1", "duration_ms": "1100", "success": "true",
                                     "arguments": "SECRET-ARGS", "output": "SECRET-OUTPUT"}),
         ("codex.user_prompt", 20.0, {"prompt_length": "9", "prompt": "[REDACTED]"}),
         ("codex.api_request", 20.5, {"duration_ms": "500", "http.response.status_code": "429"})]


def _codex_request(t0: int) -> dict:
    def attr(k, v):
        return {"key": k, "value": {"stringValue": v}}

    recs = [{"timeUnixNano": str(t0 + int(dt * 1e9)), "body": {"stringValue": name},
             "attributes": [attr("event.name", name), attr("conversation.id", "codex-conv"),
                            attr("model", "gpt-5-codex")] + [attr(k, v) for k, v in a.items()]}
            for name, dt, a in CODEX]
    return {"resourceLogs": [{"resource": {"attributes": [attr("service.name", "codex_cli_rs")]},
                              "scopeLogs": [{"scope": {"name": "codex"}, "logRecords": recs}]}]}


def _post(url: str, body: bytes, ctype: str) -> int:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:  # loopback only
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_codex_events_over_http_json_and_bad_requests(tmp_path):
    out = tmp_path / "live"
    c = Collector(out, grpc=False)
    t0 = time.time_ns() - 60 * 1_000_000_000
    assert _post(c.http + "/v1/logs", json.dumps(_codex_request(t0)).encode(), "application/json") == 200
    assert _post(c.http + "/v1/traces", b"\xff\xff not protobuf", "application/x-protobuf") == 400
    assert _post(c.http + "/v1/logs", b"{not json", "application/json") == 400
    assert _post(c.http + "/v1/other", b"", "application/x-protobuf") == 404
    assert _post(c.http + "/v1/traces", b"hello", "text/plain") == 415
    c.stop()
    trace = load_any(out)
    rows = {r["name"]: r for r in trace.spans.to_dicts()}
    call = trace.spans.filter(trace.spans["kind"] == "model").sort("start_ns").to_dicts()
    assert len(call) == 2
    ok, failed = call
    # the call spans its request and its events up to response.completed
    assert ok["start_ns"] == t0 - 400_000_000 and ok["end_ns"] == t0 + 2_400_000_000
    assert (ok["input_tokens"], ok["cache_read_tokens"], ok["output_tokens"], ok["reasoning_tokens"]) == \
        (5000, 4096, 120, 64)  # OpenAI's input already includes the cached tokens
    assert ok["ttft_s"] == pytest.approx(0.9 + 0.4)
    assert failed["status"] == "error" and failed["error_type"] == "http 429"
    tool = rows["execute_tool shell"]
    assert tool["end_ns"] - tool["start_ns"] == 1_100_000_000
    wait = rows["wait user_turn"]
    assert (wait["start_ns"], wait["end_ns"]) == (t0 + 3_600_000_000, t0 + 20_000_000_000)
    assert set(trace.spans["session_id"].to_list()) == {"codex-conv"}
    raw = next(out.glob("*.jsonl")).read_text()
    assert "SECRET-ARGS" not in raw and "SECRET-OUTPUT" not in raw
