#!/usr/bin/env python3
"""What recording each span's wait for a CPU costs (``agentprof.runq_ns``: the thread's schedstat read at the
span's start and end, Linux, no stack sampler).

In one profile, ``@agentprof.tool`` calls are timed in chunks of 20 with the reads on and off (the session's
``runq`` reader set or None), in the order off, on, on, off so a linear drift cancels; per tool, the median over
rounds of the per-call difference, and as a share of the call. Tools: an empty one (the span's own cost), 1 ms
of pure-Python work, a 1 ms sleep. Also: one read against one ``time.thread_time_ns()``, and the bytes a span's
line gains.

    .venv/bin/python scripts/bench_span_runq.py [--rounds 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agentprof  # noqa: E402
from agentprof.capture.schedstat import thread_runq_ns  # noqa: E402

CHUNK = 20


def spin_for(seconds: float) -> int:
    """Loop count of pure-Python work that takes about ``seconds`` (median of five timings)."""
    def run(n: int) -> float:
        t = time.perf_counter()
        x = 0
        for i in range(n):
            x += i * i
        return time.perf_counter() - t
    return int(100_000 * seconds / statistics.median(run(100_000) for _ in range(5)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if thread_runq_ns() < 0:
        print("no schedstat here (not Linux, or schedstats off): spans record no wait, nothing to measure")
        return 1
    n = spin_for(0.001)

    @agentprof.tool(name="empty")
    def empty() -> None:
        return None

    @agentprof.tool(name="work")
    def work() -> int:
        x = 0
        for i in range(n):
            x += i * i
        return x

    @agentprof.tool(name="nap")
    def nap() -> None:
        time.sleep(0.001)

    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, agentprof.profile("bench-runq", out=tmp) as run:
        sess = run._session
        reader = sess.runq

        def chunk(fn, on: bool) -> float:  # type: ignore[no-untyped-def]
            sess.runq = reader if on else None
            t = time.perf_counter()
            for _ in range(CHUNK):
                fn()
            return (time.perf_counter() - t) / CHUNK

        for name, fn in (("empty", empty), ("1 ms CPU-bound", work), ("1 ms sleep", nap)):
            for _ in range(3):
                chunk(fn, True)
            diffs, base = [], []
            for _ in range(args.rounds):
                off1, on1, on2, off2 = chunk(fn, False), chunk(fn, True), chunk(fn, True), chunk(fn, False)
                diffs.append((on1 + on2 - off1 - off2) / 2)
                base.append((off1 + off2) / 2)
            d, b = statistics.median(diffs), statistics.median(base)
            out[name] = {"us_per_call": d * 1e6, "call_us": b * 1e6, "share_pct": 100 * d / b}
        sess.runq = reader
        path = run.path
    read_ns = min(timeit.repeat(thread_runq_ns, number=20_000, repeat=5)) / 20_000 * 1e9
    clock_ns = min(timeit.repeat(time.thread_time_ns, number=20_000, repeat=5)) / 20_000 * 1e9
    extra = len(',"agentprof.runq_ns":0')
    res = {"tools": out, "read_ns": read_ns, "thread_time_ns": clock_ns, "bytes_per_span_min": extra,
           "trace": str(path)}
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"one schedstat read {read_ns:.0f} ns (thread_time_ns {clock_ns:.0f} ns); a span's line gains "
          f"{extra}+ bytes")
    for name, r in out.items():
        print(f"{name:16s} call {r['call_us']:8.1f} µs   reads on: {r['us_per_call']:+6.2f} µs "
              f"({r['share_pct']:+.2f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
