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

from agentprof.collect.decode import decode, items
from agentprof.collect.store import Store

from .senders import send_claude_code_events, send_genai_spans

GENAI_CALLS = [(1.2, 0.3), (0.8, 0.5), (2.0, None)] * 2
CLAUDE_TURNS = [[(3.0, ("Bash", 1.5)), (1.0, ("Read", 0.25)), (2.5, None)], [(1.8, None)], [(0.7, ("Edit", 0.1))]]


@pytest.fixture(scope="module")
def requests() -> list[tuple[str, dict]]:
    """Spans (exported as they end: children first, the agent span naming the session last) and events, two
    per request, interleaved as two exporters would send them."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    send_genai_spans(spans, "genai-session", GENAI_CALLS)
    send_claude_code_events(logs, "claude-session", CLAUDE_TURNS)
    s, lg = list(spans.get_finished_spans()), list(logs.get_finished_logs())
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


def _store(out: Path, started: str | None = None) -> Store:
    out.mkdir()
    return Store(out, started=started) if started else Store(out)


def test_flushes_as_data_arrives_write_what_one_flush_of_everything_writes(tmp_path, requests):
    one = _store(tmp_path / "one")
    for signal, doc in requests:
        one.add(signal, doc, items(doc, signal))
    one.flush()
    whole = _files(one.out)
    assert len(whole) == 2  # the agent span's session and Claude Code's

    many = _store(tmp_path / "many", one.started)
    first: dict[str, bytes] = {}
    thirds = [requests[: len(requests) // 3], requests[len(requests) // 3: -2], requests[-2:]]
    for n, part in enumerate(thirds):
        for signal, doc in part:
            many.add(signal, doc, items(doc, signal))
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
