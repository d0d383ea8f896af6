"""Load: 100 threads and 100 asyncio tasks recording at once lose no span and never interleave two lines."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import agentprof

from .capture_helpers import load, of_kind

THREADS = TASKS = 100
PER = 30


@agentprof.tool
def sync_work(i):
    return agentprof.parse_json(f'{{"i": {i}}}')["i"]


@agentprof.tool
async def async_work(i):
    await asyncio.sleep(0)
    with agentprof.span("orchestration", "step"):
        return i


EXPECTED_SPANS = THREADS * PER * 2 + TASKS * PER * 2 + 1  # tool + parse per thread call, tool + step per task call


def run_load(out) -> agentprof.capture.Run:
    """THREADS threads and TASKS asyncio tasks recording PER calls each under one profile (also run by
    scripts/reliability.py)."""
    start = threading.Barrier(THREADS + 1)

    def worker():
        start.wait()
        for i in range(PER):
            sync_work(i)

    async def tasks():
        async def one():
            for i in range(PER):
                await async_work(i)

        await asyncio.gather(*(one() for _ in range(TASKS)))

    with agentprof.profile("load", out=out) as run:
        threads = [threading.Thread(target=worker) for _ in range(THREADS)]
        for t in threads:
            t.start()
        start.wait()
        asyncio.run(tasks())  # the event loop runs while the threads record
        for t in threads:
            t.join()
    return run


def test_threads_and_tasks_together(tmp_path):
    run = run_load(tmp_path)
    expected = EXPECTED_SPANS
    lines = Path(run.path).read_bytes().split(b"\n")
    assert lines[-1] == b""
    records = [json.loads(line) for line in lines[:-1]]  # every line is exactly one JSON object
    spans = [r for r in records if r["record"] == "span"]
    assert len(spans) == expected == run.spans
    assert len({r["span_id"] for r in spans}) == expected
    assert records[-1]["spans"] == expected
    _, rows = load(run.path)
    assert len(of_kind(rows, "tool")) == THREADS * PER + TASKS * PER
