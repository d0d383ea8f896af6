"""The collector's store: requests read once, flushed as they arrive, write the same session files as one flush
of everything (the OpenTelemetry SDK's spans and Claude Code-shaped events, encoded by its OTLP encoders and
decoded as the receiver decodes them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentprof.collect.decode import decode
from agentprof.collect.store import Store

from .senders import send_claude_code_events, send_genai_spans

GENAI_CALLS = [(1.2, 0.3), (0.8, 0.5), (2.0, None)] * 2
CLAUDE_TURNS = [[(3.0, ("Bash", 1.5)), (1.0, ("Read", 0.25)), (2.5, None)], [(1.8, None)], [(0.7, ("Edit", 0.1))]]


@pytest.fixture(scope="module")
def requests() -> list[tuple[str, dict]]:
    """Spans (exported as they end: children first, the agent span naming the session last) and events, two
    per request, interleaved as two exporters would send them."""
    spans, other, logs = InMemorySpanExporter(), InMemorySpanExporter(), InMemoryLogRecordExporter()
    send_genai_spans(spans, "genai-session", GENAI_CALLS)
    send_genai_spans(other, "genai-other", GENAI_CALLS[:2])  # an exporter ends with its provider
    send_claude_code_events(logs, "claude-session", CLAUDE_TURNS)
    s = list(spans.get_finished_spans()) + list(other.get_finished_spans())
    lg = list(logs.get_finished_logs())
    span_reqs = [("traces", decode("traces", encode_spans(s[i:i + 2]).SerializeToString(), None))
                 for i in range(0, len(s), 2)]
    log_reqs = [("logs", decode("logs", encode_logs(lg[i:i + 2]).SerializeToString(), None))
                for i in range(0, len(lg), 2)]
    out = []
    for i in range(max(len(span_reqs), len(log_reqs))):
        out += span_reqs[i:i + 1] + log_reqs[i:i + 1]
    return out


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


METRICS = {"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"name": "claude_code.cost.usage", "sum": {
    "dataPoints": [{"asDouble": 0.5, "timeUnixNano": "1"}]}}]}]}]}
NOT_OTLP = {"hello": "world"}


def _store(out: Path, started: str | None = None, whole: bool = False) -> Store:
    out.mkdir()
    store = Store(out, started=started) if started else Store(out)
    store._whole = whole  # every record linked at once, as `agentprof import` links them
    return store


def _linked_at_once(out: Path, started: str, reqs: list[tuple[str, dict]]) -> dict[str, bytes]:
    store = _store(out, started, whole=True)
    for signal, doc in reqs:
        store.add(signal, doc, 0)
    store.flush()
    return _files(store.out)


def test_flushes_as_data_arrives_write_what_linking_everything_writes(tmp_path, requests):
    # a metrics request and a request that is not OTLP arrive midway: every file's diagnostics name them
    reqs = requests[:4] + [("metrics", METRICS), ("traces", NOT_OTLP)] + requests[4:]
    one = _store(tmp_path / "one")
    for signal, doc in reqs:
        one.add(signal, doc, 0)
    one.flush()
    whole = _linked_at_once(tmp_path / "whole", one.started, reqs)
    assert len(whole) == 3 and _files(one.out) == whole  # two agent spans' sessions and Claude Code's
    assert all(b"otlp_metrics" in f and b"bad_line" in f for f in whole.values())

    many = _store(tmp_path / "many", one.started)
    first: dict[str, bytes] = {}
    thirds = [reqs[: len(reqs) // 3], reqs[len(reqs) // 3: -2], reqs[-2:]]
    for n, part in enumerate(thirds):
        for signal, doc in part:
            many.add(signal, doc, 0)
        many.flush()
        if n == 0:
            first = _files(many.out)
    # before the agent span arrived its calls made a session of their own trace: a file the later flush replaced
    assert set(first) != set(whole)
    assert _files(many.out) == whole
    # a flush with nothing new writes nothing
    mtimes = {p: p.stat().st_mtime_ns for p in many.out.glob("*.jsonl")}
    many.flush()
    assert {p: p.stat().st_mtime_ns for p in many.out.glob("*.jsonl")} == mtimes


def test_a_malformed_logs_request_links_everything_from_then_on(tmp_path, requests):
    # one bad logs request drops every event (as `agentprof import` does): decided over all data
    bad_logs = {"resourceLogs": "not a list"}
    reqs = requests[:5] + [("logs", bad_logs)] + requests[5:]
    many = _store(tmp_path / "many")
    for part in (reqs[:5], reqs[5:]):
        for signal, doc in part:
            many.add(signal, doc, 0)
        many.flush()
    assert _files(many.out) == _linked_at_once(tmp_path / "whole", many.started, reqs)
    assert not any(b"claude_code" in f for f in _files(many.out).values())
