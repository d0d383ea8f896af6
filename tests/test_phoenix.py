"""agentprof's spans in a real OTLP receiver, Arize Phoenix on loopback (from ``scripts/setup_phoenix.sh``'s
side environment), started once for both paths: a live capture (Phoenix groups the run's spans into its session
and classifies every one, json.loads parses included, with the model call's token counts) and an imported log
sent by ``agentprof export --to otlp`` (it shows the log's sessions). Skipped when that environment is absent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agentprof.demo.model_server import ModelServer
from agentprof.importers import load_any

from .report.test_otlp_send import SAMPLE, agentprof
from .side_envs import WAIT_S, side_env, wait_for

ROOT = Path(__file__).resolve().parents[1]
PHOENIX = Path(os.environ.get("PHOENIX_VENV", ROOT / ".venv-phoenix")) / "bin" / "phoenix"
pytestmark = [pytest.mark.slow, side_env, pytest.mark.timeout(WAIT_S + 300)]

AGENT = r"""
import json, sys
import openai
import agentprof

@agentprof.tool
def lookup(key):
    return key.upper()

client = openai.OpenAI(max_retries=0)
with agentprof.profile("phoenix-run", out=sys.argv[1], instrument_json=True) as run:
    for i in range(2):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": f"step {i}"}])
        lookup("k")
        json.loads('{"a": 1}')
print(run.session_id)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:  # loopback only
        return json.loads(r.read())


def _spans(phoenix: str) -> list[dict]:
    """Every span of Phoenix's default project, page by page."""
    out, cursor = [], ""
    while True:
        page = _get(phoenix + "/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
        out += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return out


def _span_ids(phoenix: str) -> set[str]:
    return {s["context"]["span_id"] for s in _spans(phoenix)}


def _session_ids(phoenix: str) -> set[str]:
    return {s["session_id"] for s in _get(phoenix + "/v1/projects/default/sessions")["data"]}


def _new_spans(phoenix: str, before: set[str], expected: int) -> list[dict]:
    """The spans Phoenix shows that were not there ``before`` (the other test's), once ``expected`` have arrived
    or 30 s have passed."""
    deadline = time.monotonic() + 30
    while True:
        spans = [s for s in _spans(phoenix) if s["context"]["span_id"] not in before]
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("phoenix")
    wait_for(PHOENIX.parents[1])
    if not PHOENIX.exists():
        pytest.skip("no Phoenix environment (scripts/setup_phoenix.sh)")
    port, grpc = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.update(PHOENIX_WORKING_DIR=str(tmp_path / "phoenix"), PHOENIX_PORT=str(port), PHOENIX_GRPC_PORT=str(grpc),
               PHOENIX_HOST="127.0.0.1", PHOENIX_TELEMETRY_ENABLED="false", DO_NOT_TRACK="1",
               # parts the tests do not use, off: the MCP server and the agent assistant (building them and their
               # OpenAPI schema took ~3 of the ~20 s of CPU a start costs) and fetching anything from the internet
               PHOENIX_ENABLE_MCP_SERVER="false", PHOENIX_DISABLE_AGENT_ASSISTANT="true",
               PHOENIX_ALLOW_EXTERNAL_RESOURCES="false")
    log = open(tmp_path / "phoenix.log", "wb")  # noqa: SIM115 - closed below, after the server
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("Phoenix did not start: " + (tmp_path / "phoenix.log").read_text()[-2000:])
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_phoenix_sees_sessions_kinds_and_tokens(tmp_path, phoenix):
    before, sessions_before = _span_ids(phoenix), _session_ids(phoenix)
    with ModelServer() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        # a busy Phoenix can take longer than the default flush cap to answer its first request: this test is
        # about what arrives, so the run may wait longer (test_otlp_faults covers the cap)
        env.update(OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY="test",
                   OTEL_EXPORTER_OTLP_ENDPOINT=phoenix, OTEL_SERVICE_NAME="agentprof-test", AGENTPROF_OTLP_FLUSH_S="10")
        done = subprocess.run([sys.executable, "-c", AGENT, str(tmp_path / "traces")], env=env, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    session_id = done.stdout.split()[-1]
    (trace_file,) = (tmp_path / "traces").glob("phoenix-run-*.jsonl")
    recorded = [r for r in map(json.loads, trace_file.read_text().splitlines()) if r.get("record") == "span"]

    spans = _new_spans(phoenix, before, len(recorded))
    assert sorted(s["name"] for s in spans) == sorted(r["name"] for r in recorded), done.stderr
    kinds = {s["name"]: s["span_kind"] for s in spans}
    assert kinds == {"invoke_agent phoenix-run": "AGENT", "chat gpt-4o": "LLM", "execute_tool lookup": "TOOL",
                     "json.loads": "CHAIN"}  # nothing UNKNOWN
    for s in spans:
        assert s["attributes"]["session.id"] == s["attributes"]["gen_ai.conversation.id"] == session_id
    calls = [r["attributes"] for r in recorded if r["kind"] == "model"]
    got = sorted(s["attributes"]["gen_ai.usage.input_tokens"] for s in spans if s["span_kind"] == "LLM")
    assert got == sorted(a["gen_ai.usage.input_tokens"] for a in calls) and min(got) > 0

    assert _session_ids(phoenix) - sessions_before == {session_id}


def test_export_of_an_imported_log_shows_its_sessions(phoenix):
    sample = load_any(SAMPLE)
    before, sessions_before = _span_ids(phoenix), _session_ids(phoenix)
    done = agentprof("export", str(SAMPLE), "--to", "otlp", "--endpoint", phoenix)
    assert done.returncode == 0, done.stderr
    spans = _new_spans(phoenix, before, sample.spans.height)
    assert len(spans) == sample.spans.height
    assert all(s["attributes"]["session.id"] for s in spans)
    assert "UNKNOWN" not in {s["span_kind"] for s in spans}
    # Phoenix lists a session per root span's session.id; a compaction segment's agent span nests in its
    # conversation's, so it is part of that session there
    roots = sample.spans.filter((sample.spans["kind"] == "agent") & sample.spans["parent_id"].is_null())
    assert sorted(_session_ids(phoenix) - sessions_before) == sorted(set(roots["session_id"])) != []
    by_session: dict[str, int] = {}
    for s in spans:
        by_session[s["attributes"]["session.id"]] = by_session.get(s["attributes"]["session.id"], 0) + 1
    assert by_session == dict(sample.spans.group_by("session_id").len().iter_rows())
