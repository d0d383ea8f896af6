"""Time ``agentprof collect``'s flush on ~10k GenAI spans arriving in batches (the OpenTelemetry SDK's spans,
encoded by its OTLP encoder and decoded as the receiver decodes them), and check that the files written after
many flushes equal those of one flush of everything and those of linking every record at once.

    PYTHONPATH=. .venv/bin/python scripts/bench_collect_flush.py [--sessions 40] [--calls 125] [--batches 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentprof.collect.decode import decode, items
from agentprof.collect.store import Store

S = 1_000_000_000


def genai_spans(sessions: int, calls: int) -> list:
    """``sessions`` invoke_agent spans, each over ``calls`` chat + execute_tool pairs, in the order they end."""
    mem = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
    tp.add_span_processor(SimpleSpanProcessor(mem))
    tr = tp.get_tracer("bench")
    t0 = time.time_ns() - 3600 * S
    for s in range(sessions):
        root = tr.start_span("invoke_agent planner", start_time=t0, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": f"session-{s}"})
        ctx = trace.set_span_in_context(root)
        t = t0 + S // 10
        for i in range(calls):
            c = tr.start_span("chat gpt-4o", context=ctx, start_time=t, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 1000 + 17 * i, "gen_ai.usage.output_tokens": 50})
            t += S
            c.end(end_time=t)
            x = tr.start_span("execute_tool grep", context=ctx, start_time=t, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"})
            t += S // 2
            x.end(end_time=t)
        root.end(end_time=t)
    tp.shutdown()
    return list(mem.get_finished_spans())


def requests(spans: list, per_request: int = 50) -> list[dict]:
    """The spans as OTLP trace requests of ``per_request`` spans, as the receiver decodes them."""
    out = []
    for i in range(0, len(spans), per_request):
        body = encode_spans(spans[i:i + per_request]).SerializeToString()
        out.append(decode("traces", body, "application/x-protobuf"))
    return out


def files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--calls", type=int, default=125)
    ap.add_argument("--batches", type=int, default=20)
    args = ap.parse_args()
    reqs = requests(genai_spans(args.sessions, args.calls))
    n_spans = sum(items(r, "traces") for r in reqs)
    # CPU seconds of this process (the flush runs here): wall time on a shared machine measures the neighbours
    with tempfile.TemporaryDirectory() as d:
        one = Store(Path(d) / "one")
        one.out.mkdir()
        for r in reqs:
            one.add("traces", r, items(r, "traces"))
        t = time.process_time()
        one.flush()
        at_once = time.process_time() - t
        many = Store(Path(d) / "many", started=one.started)
        many.out.mkdir()
        step = -(-len(reqs) // args.batches)
        times = []
        for i in range(0, len(reqs), step):
            for r in reqs[i:i + step]:
                many.add("traces", r, items(r, "traces"))
            t = time.process_time()
            many.flush()
            times.append(time.process_time() - t)
        whole = Store(Path(d) / "whole", started=one.started)
        whole.out.mkdir()
        whole._whole = True  # every record linked at once, as `agentprof import` does
        for r in reqs:
            whole.add("traces", r, items(r, "traces"))
        whole.flush()
        same = files(one.out) == files(many.out) == files(whole.out)
    print(f"{n_spans:,} spans in {len(reqs)} requests, {args.sessions} sessions")
    print(f"one flush of everything: {at_once:.2f} CPU-s")
    print(f"{len(times)} flushes as it arrives: {sum(times):.2f} CPU-s in all, last {times[-1]:.2f} CPU-s")
    print(f"files equal to one flush of everything and to linking all records at once: {same}")


if __name__ == "__main__":
    main()
