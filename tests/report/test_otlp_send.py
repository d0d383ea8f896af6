"""``agentprof export --to otlp``: an imported trace sent as OTLP protobuf to a loopback receiver (every span
with ``session.id`` and its OpenInference kind), over gRPC into ``agentprof collect`` (the same sessions and
calls come back), and the errors a user can meet (into a real Arize Phoenix: tests/test_phoenix.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentprof import semconv as sc
from agentprof.importers import load_any
from agentprof.trace.otlp import RECEIVER_ADDED

from ..capture.test_otlp import Collector
from ..capture.test_otlp_faults import refused_url

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "traces" / "samples" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def agentprof(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "agentprof", *args], capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.fixture(scope="module")
def sample():
    return load_any(SAMPLE)


def test_every_span_arrives_with_session_and_kind(sample):
    receiver = Collector()
    try:
        done = agentprof("export", str(SAMPLE), "--to", "otlp", "--endpoint", receiver.url)
        assert done.returncode == 0, done.stderr
        spans = receiver.spans()
    finally:
        receiver.httpd.shutdown()
    assert f"sent {sample.spans.height:,} spans" in done.stdout
    assert {p for p, _, _ in receiver.requests} == {"/v1/traces"}
    assert {h["content-type"] for _, h, _ in receiver.requests} == {"application/x-protobuf"}
    assert len(spans) == sample.spans.height
    want_session = {}
    for row in sample.spans.iter_rows(named=True):
        want_session[row["name"], row["start_ns"] or 0] = row["session_id"]
    kinds = {"agent": "AGENT", "model": "LLM", "tool": "TOOL"}
    for s in spans:
        a = {x.key: x.value for x in s.attributes}
        assert a["session.id"].string_value == a["gen_ai.conversation.id"].string_value
        assert a["session.id"].string_value == want_session[s.name, s.start_time_unix_nano]
        kind = a[sc.KIND].string_value
        assert a["openinference.span.kind"].string_value == kinds.get(kind, "CHAIN")
        assert RECEIVER_ADDED in a  # an import of these spans drops the added names again
    models = [s for s in spans if s.kind == 3]  # CLIENT
    assert len(models) == (sample.spans["kind"] == "model").sum()


def test_grpc_into_collect_gives_the_same_sessions_and_calls(tmp_path, sample):
    pytest.importorskip("grpc")
    from ..collect.test_cli import Collector as Collect

    c = Collect(tmp_path / "live")
    done = agentprof("export", str(SAMPLE), "--to", "otlp", "--endpoint", c.grpc, "--protocol", "grpc")
    assert done.returncode == 0, done.stderr
    c.stop()
    back = load_any(tmp_path / "live")
    for kind in ("model", "tool", "agent"):
        assert (back.spans["kind"] == kind).sum() == (sample.spans["kind"] == kind).sum()
    assert sorted(set(back.spans["session_id"])) == sorted(set(sample.spans["session_id"]))
    assert back.spans["input_tokens"].sum() == sample.spans["input_tokens"].sum()


def test_errors_are_one_line():
    done = agentprof("export", str(SAMPLE), "--to", "otlp")
    assert done.returncode == 2 and "--to otlp needs --endpoint URL" in done.stderr
    url = refused_url()
    done = agentprof("export", str(SAMPLE), "--to", "otlp", "--endpoint", url)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {url}/v1/traces: cannot send")
    assert "Traceback" not in done.stderr
    done = agentprof("export", str(SAMPLE), "--to", "perfetto")
    assert done.returncode == 2 and "needs -o/--output FILE" in done.stderr
