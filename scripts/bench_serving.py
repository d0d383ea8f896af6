#!/usr/bin/env python3
"""Speed of the multi-session serving simulation on a kv-cache-tester-sized corpus, against the single-session
analytic replay of the same traces measured in the same run.

The corpus is the 19 shipped kv-cache-tester samples replicated to ``--traces`` files exactly as
scripts/bench_import.py builds it (copy *j* shifts every hash id by ``j * 100_003``, so copies share no cache
blocks). Timed: building the session plan (block ids, gaps), then one simulation at ``--concurrency`` on each
``--system``; baseline: ``agentprof.replay.replay`` at concurrency 1 (today's per-call analytic replay, no
contention) on the same system. Prints calls, simulated calls per second and the ratio.

    .venv/bin/python scripts/bench_serving.py                       # 700 traces, concurrency 50, h200+x86
    .venv/bin/python scripts/bench_serving.py --traces 70 --quick   # a smoke run
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=700)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--system", action="append", default=None)
    ap.add_argument("--cpu-tb", type=float, default=2.0, help="LMCache CPU tier (TB); 0 = HBM only")
    ap.add_argument("--dir", default="/tmp/agentprof-bench-serving")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    from bench_import import build_kvct

    from agentprof.catalog import resolve_model
    from agentprof.catalog.hardware import load_catalog
    from agentprof.importers import load_any
    from agentprof.replay import replay
    from agentprof.replay.serving import ServingConfig, build_plan, simulate
    from agentprof.replay.systems import resolve

    systems = a.system or ["h200+x86"]
    d = Path(a.dir) / f"kvct-{a.traces}"
    if not d.exists() or len(list(d.glob("*.json"))) != a.traces:
        build_kvct(d, a.traces)
    t0 = time.perf_counter()
    trace = load_any(str(d))
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan = build_plan(trace)
    t_plan = time.perf_counter() - t0
    cat = load_catalog()
    model, _ = resolve_model("claude-opus-4-1")
    print(f"corpus: {a.traces} traces, {plan.n_sessions} sessions, {plan.n_calls:,} calls, "
          f"{plan.node_ids.size:,} prompt blocks ({plan.n_nodes:,} distinct); import {t_load:.1f} s, "
          f"plan {t_plan:.2f} s")
    print("| system | concurrency | cache | baseline: analytic replay (s) | simulation (s) | plan + simulation (s) "
          "| simulated calls/s | ratio sim/baseline | TTFT p50 / p99 (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in systems:
        t0 = time.perf_counter()
        replay(trace, [key], concurrency=1)
        t_base = time.perf_counter() - t0
        r = resolve(cat.system(key), model, cat)
        cfg = ServingConfig(concurrency=a.concurrency, cpu_bytes=a.cpu_tb * 1e12)
        t0 = time.perf_counter()
        run = simulate(plan, r, cfg)
        t_sim = time.perf_counter() - t0
        sv = run.serving
        cache = f"HBM + CPU {a.cpu_tb:g} TB" if a.cpu_tb else "HBM"
        print(f"| {key} | {a.concurrency} | {cache} | {t_base:.1f} | {t_sim:.1f} | {t_plan + t_sim:.1f} | "
              f"{sv['calls'] / t_sim:,.0f} | {t_sim / t_base:.2f} | "
              f"{sv['ttft_s']['p50']:.2f} / {sv['ttft_s']['p99']:.1f} |")


if __name__ == "__main__":
    main()
