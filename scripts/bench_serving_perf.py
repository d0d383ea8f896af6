#!/usr/bin/env python3
"""Issue 12's performance points, this checkout against ``--baseline`` (git archive of that revision), each
side in a fresh child process, interleaved, results checked equal:

1. ``serving``: the kv-cache-tester corpus of ``scripts/bench_import.py`` (``--traces``, default 700), its session
   plan and one simulation at concurrency 50 on h200+x86 with a 2 TB CPU tier (``scripts/bench_serving.py``);
2. ``sweep``: the report's default serving sweep (concurrency 1, 4, 16, 50 on h200+x86 and jalapeno,
   gpt-oss-120b) on one synthetic session of ``--calls`` model calls whose context grows by 500 tokens a call
   (``tests/report/test_chart_bounds.py`` runs it with 1,000);
3. ``report``: ``agentprof report`` end to end on the 700-trace corpus (``scripts/bench_report_kvct.py``), the
   pages compared apart from their time stamp.

Wall and CPU seconds (user + system of the child) are printed per run, then medians; the machine is shared, so
CPU seconds are the steadier figure.

    .venv/bin/python scripts/bench_serving_perf.py --baseline 74e23e8 --repeat 3
    .venv/bin/python scripts/bench_serving_perf.py --only sweep --calls 300 --repeat 1   # a quick look
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

SERVING = r"""
import hashlib, json, sys, time
import numpy as np
from agentprof.catalog import resolve_model
from agentprof.catalog.hardware import load_catalog
from agentprof.importers import load_any
from agentprof.replay.serving import ServingConfig, build_plan, simulate
from agentprof.replay.systems import resolve
trace = load_any(sys.argv[1])
c0 = time.process_time(); t = time.perf_counter()
plan = build_plan(trace)
t_plan, c_plan = time.perf_counter() - t, time.process_time() - c0
cat = load_catalog()
r = resolve(cat.system("h200+x86"), resolve_model("claude-opus-4-1")[0], cat)
c0 = time.process_time(); t = time.perf_counter()
run = simulate(plan, r, ServingConfig(concurrency=50, cpu_bytes=2e12))
t_sim, c_sim = time.perf_counter() - t, time.process_time() - c0
e = run.engine
h = hashlib.sha256()
for a in (e.req_call, e.issue_t, e.first_t, e.done_t, e.queue_s, e.hits, e.load_s):
    h.update(np.ascontiguousarray(a).tobytes())
h.update(json.dumps(run.serving, sort_keys=True, default=str).encode())
print(json.dumps({"plan_s": t_plan, "plan_cpu_s": c_plan, "sim_s": t_sim, "sim_cpu_s": c_sim,
                  "calls": plan.n_calls, "sessions": plan.n_sessions, "blocks": int(plan.node_ids.size),
                  "digest": h.hexdigest()}))
"""

SWEEP = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[2])
from report.report_support import synthetic_session
from agentprof.replay.serving.sweep import sweep
trace = synthetic_session(turns=int(sys.argv[1]), subagent=False)
c0 = time.process_time(); t = time.perf_counter()
out = sweep(trace, ["h200+x86", "jalapeno"], model="gpt-oss-120b")
dt, cpu = time.perf_counter() - t, time.process_time() - c0
print(json.dumps({"sweep_s": dt, "sweep_cpu_s": cpu,
                  "digest": hashlib.sha256(json.dumps(out, sort_keys=True, default=str).encode()).hexdigest()}))
"""


def run_child(src: Path, code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    p = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                       cwd=tempfile.gettempdir())
    if p.returncode:
        raise SystemExit(f"child failed ({src}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def report_run(src: Path, folder: Path, out: Path, extra_env: dict[str, str] | None = None) -> dict:
    """``agentprof report`` in a child: wall and CPU seconds (and the system part), and the page's digest
    without its time stamp."""
    env = dict(os.environ, PYTHONPATH=str(src), **(extra_env or {}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", "import sys; from agentprof.cli import main; sys.exit(main())",
                        "report", str(folder), "-o", str(out)], env=env, capture_output=True, text=True,
                       cwd=out.parent)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"report failed ({src}):\n{p.stderr[-3000:]}")
    page = re.sub(rb'"generated":"[^"]*"', b"", out.read_bytes())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"report_s": dt, "report_cpu_s": cpu, "report_sys_s": after.ru_stime - before.ru_stime,
            "digest": hashlib.sha256(page).hexdigest()}


def main() -> None:
    from bench_cachesim import extract
    from bench_import import build_kvct

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="git revision to compare against")
    ap.add_argument("--only", default="serving,sweep,report")
    ap.add_argument("--traces", type=int, default=700)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/agentprof-bench-serving")
    ap.add_argument("--hugepages-side", action="store_true",
                    help="report: also this checkout with numpy's huge-page advice forced on (NUMPY_MADVISE_HUGEPAGE=1), "
                         "to separate that setting (agentprof/hugepages.py) from the code changes")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    folder = Path(args.dir) / f"kvct-{args.traces}"
    if only & {"serving", "report"} and (not folder.exists() or len(list(folder.glob("*.json"))) != args.traces):
        build_kvct(folder, args.traces)
    print(f"machine load at start: {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[str, dict[str, list[dict]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "old").mkdir()
        old = extract(args.baseline, Path(tmp) / "old")
        sides = {"before": old, "after": ROOT}
        if args.hugepages_side:
            sides["after, huge pages on"] = ROOT
        for k in range(args.repeat):
            for name in ("serving", "sweep", "report"):
                if name not in only:
                    continue
                for side, src in sides.items():
                    if side not in ("before", "after") and name != "report":
                        continue
                    if name == "serving":
                        r = run_child(src, SERVING, str(folder))
                    elif name == "sweep":
                        r = run_child(src, SWEEP, str(args.calls), str(ROOT / "tests"))
                    else:
                        r = report_run(src, folder, Path(tmp) / f"{side.split(',')[0]}.html",
                                       {"NUMPY_MADVISE_HUGEPAGE": "1"} if "huge" in side else None)
                    r["load"] = os.getloadavg()[0]
                    results.setdefault(name, {}).setdefault(side, []).append(r)
                    shown = {x: (round(v, 2) if isinstance(v, float) else v) for x, v in r.items() if x != "digest"}
                    print(f"round {k + 1} {name} {side}: {shown}", flush=True)
    for name, by_side in results.items():
        same = {r["digest"] for rs in by_side.values() for r in rs}
        print(f"\n{name}: results {'EQUAL' if len(same) == 1 else 'DIFFER'} before/after")
        keys = [x for x in by_side["after"][0] if x.endswith("_s")]
        for x in keys:
            b = statistics.median(r[x] for r in by_side["before"])
            for side in [s for s in by_side if s != "before"]:
                a = statistics.median(r[x] for r in by_side[side])
                print(f"  {x}: before {b:.2f}, {side} {a:.2f} (median of {len(by_side[side])}; {b / a:.2f}x)")
        loads = [r["load"] for rs in by_side.values() for r in rs]
        print(f"  load average during: {min(loads):.1f}-{max(loads):.1f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
