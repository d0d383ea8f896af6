#!/usr/bin/env python3
"""Replay throughput: model calls replayed per second, against a per-call loop baseline run in the same process.

1. Vectorized replay (``agentprof.replay.replay``) of a synthetic agent corpus (sequential sessions of model
   call -> tool -> model call ...) on several systems with cache policy ``none``: calls replayed per second
   (per system and in total). Target: >= 100,000 model calls/s.
2. Baseline: the same cost model evaluated call by call in a Python loop (one ``call_times`` per call), the way
   a simulator that steps through calls would; the ratio is printed.
3. Prefix-cache replay of the real kv-cache-tester corpus (traces/samples/kv-cache-tester, ~2,000 64-token
   blocks per call): calls/s and prompt blocks/s, since prefix matching is per block.

Rounds are repeated and the median is reported.

    .venv/bin/python scripts/bench_replay.py [--calls 200000] [--systems 4] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from agentprof.catalog.hardware import load_catalog
from agentprof.replay import replay
from agentprof.replay.costmodel import call_times
from agentprof.replay.systems import resolve
from agentprof.trace import Trace, TraceMeta
from agentprof.trace.schema import conform

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ["h200+x86", "b200+x86", "gb200+grace", "jalapeno", "rubin+vera", "b200+vera"]
NS = 1_000_000_000


def synthetic(calls: int, per_session: int = 50, seed: int = 0) -> Trace:
    """Sessions of ``per_session`` model calls with a tool span after each; prompts grow like an agent's."""
    rng = np.random.default_rng(seed)
    n_sess = max(calls // per_session, 1)
    k = np.tile(np.arange(per_session), n_sess)
    sess = np.repeat(np.arange(n_sess), per_session)
    inp = (20_000 + 1_500 * k + rng.integers(0, 500, k.size)).astype(np.int64)
    out = rng.integers(50, 1_500, k.size).astype(np.int64)
    model_s = 2.0 + out / 60.0
    tool_s = rng.exponential(4.0, k.size)
    step = model_s + tool_s
    start = (np.cumsum(step) - step)  # global running time; reset per session below
    sess_start = start[sess * per_session]
    t0 = (start - sess_start) * NS
    m_start = t0.astype(np.int64)
    m_end = (t0 + model_s * NS).astype(np.int64)
    t_end = (t0 + step * NS).astype(np.int64)
    sid = [f"s{i}" for i in range(n_sess)]
    n = k.size
    models = pl.DataFrame({
        "trace_id": "bench", "span_id": [f"m{i}" for i in range(n)], "parent_id": [f"a{s}" for s in sess],
        "session_id": [sid[s] for s in sess], "kind": "model", "name": "chat gpt-oss-120b",
        "start_ns": m_start, "end_ns": m_end, "timing": "measured", "model": "gpt-oss-120b",
        "input_tokens": inp, "output_tokens": out, "status": "ok"})
    tools = pl.DataFrame({
        "trace_id": "bench", "span_id": [f"t{i}" for i in range(n)], "parent_id": [f"a{s}" for s in sess],
        "session_id": [sid[s] for s in sess], "kind": "tool", "name": "execute_tool bash",
        "start_ns": m_end, "end_ns": t_end, "timing": "measured", "status": "ok"})
    last = t_end.reshape(n_sess, per_session)[:, -1]
    agents = pl.DataFrame({
        "trace_id": "bench", "span_id": [f"a{s}" for s in range(n_sess)], "parent_id": None,
        "session_id": sid, "kind": "agent", "name": "invoke_agent bench", "start_ns": np.zeros(n_sess, np.int64),
        "end_ns": last, "timing": "measured", "status": "ok"})
    spans = pl.concat([conform(agents), conform(models), conform(tools)])
    return Trace(TraceMeta(source_format="agentprof", name="bench"), spans)


def median_time(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--systems", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loop-calls", type=int, default=3_000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    systems = SYSTEMS[: a.systems]
    out: dict[str, object] = {"calls": a.calls, "systems": systems}

    tr = synthetic(a.calls)
    calls = int((tr.spans["kind"] == "model").sum())
    t_vec = median_time(lambda: replay(tr, systems, cache_policy="none"), a.rounds)
    out["vectorized_s"] = t_vec
    out["vectorized_calls_per_s"] = calls / t_vec
    out["vectorized_call_systems_per_s"] = calls * len(systems) / t_vec

    # baseline: the same cost model called once per call in a Python loop (one system)
    cat = load_catalog()
    r = resolve(cat.system(systems[0]), cat.models["gpt-oss-120b"], cat)
    m = tr.spans.filter(pl.col("kind") == "model").head(a.loop_calls)
    inp = m["input_tokens"].to_numpy().astype(float)
    outt = m["output_tokens"].to_numpy().astype(float)

    def loop() -> None:
        for i in range(inp.size):
            call_times(r.dep, r.params, inp[i:i + 1], np.zeros(1), outt[i:i + 1])

    t_loop = median_time(loop, a.rounds)
    out["loop_calls_per_s"] = inp.size / t_loop
    out["speedup_vs_loop"] = out["vectorized_call_systems_per_s"] / out["loop_calls_per_s"]

    kv = ROOT / "traces" / "samples" / "kv-cache-tester"
    if kv.is_dir():
        from agentprof.importers import load_any

        base = load_any(str(kv))
        k_calls = int((base.spans["kind"] == "model").sum())
        blocks = int(base.spans.filter(pl.col("kind") == "model")["block_hashes"].list.len().sum())
        t_kv = median_time(lambda: replay(base, systems, cache_policy="prefix"), a.rounds)
        out["kvct_calls"] = k_calls
        out["kvct_blocks"] = blocks
        out["kvct_prefix_calls_per_s"] = k_calls / t_kv
        out["kvct_prefix_blocks_per_s"] = blocks / t_kv
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"synthetic corpus: {calls:,} model calls, {len(systems)} systems, cache policy none")
    print(f"  vectorized replay: {t_vec:.2f} s -> {out['vectorized_calls_per_s']:,.0f} calls/s "
          f"({out['vectorized_call_systems_per_s']:,.0f} call-systems/s)")
    print(f"  per-call loop baseline: {out['loop_calls_per_s']:,.0f} call-systems/s -> "
          f"vectorized is {out['speedup_vs_loop']:.0f}x faster")
    if "kvct_calls" in out:
        print(f"kv-cache-tester corpus: {out['kvct_calls']:,} calls, {out['kvct_blocks']:,} prompt blocks, "
              f"prefix cache: {out['kvct_prefix_calls_per_s']:,.0f} calls/s, "
              f"{out['kvct_prefix_blocks_per_s']:,.0f} blocks/s")


if __name__ == "__main__":
    sys.exit(main())
