#!/usr/bin/env python3
"""Cache-simulation speed: the run-level stack-distance engine against the code it replaced, in the same run.

Workloads, on the kv-cache-tester corpus of ``scripts/bench_import.py`` (the 19 shipped samples replicated to
``--traces`` files; imported once to Parquet):

- ``simulate``: ``agentprof cachesim`` with an HBM and a CPU tier (LMCache's 256-token chunks, sessions
  interleaved on their timestamps);
- ``sweep lru`` / ``sweep provider``: the two capacity sweeps ``agentprof report`` runs;
- ``replay lru``: the replay's HBM prefix cache at the trace's 64-token blocks, with a capacity below the
  conversations' working sets (so the LRU runs).

"Before" is the code at ``--baseline`` (default: the commit this work started from), extracted with
``git archive`` and run in a child process on the same Parquet file; "after" is this checkout, run the same
way. Each side is timed after the trace is loaded and its call table built (both sides memoize nothing across
workloads). Block accesses = 2 × chunks per workload (every chunk is looked up and stored once). Results are
compared for equality. If the ``libcachesim`` package is installed, its LRU (driven per request through its
Python API: ``find`` without update for lookups, ``get`` for stores, deepest chunk first) runs ``replay lru``
too, and its hits are compared. ``--report`` also times ``agentprof report`` end to end, before and after.

    .venv/bin/python scripts/bench_cachesim.py                 # 700 traces (the old code needs minutes)
    .venv/bin/python scripts/bench_cachesim.py --traces 70     # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
BASE_COMMIT = "f698c65"
MODEL = "kimi-k2.5"

# The child: one side's timings on one Parquet file, printed as one JSON line. It uses only functions that
# exist with the same meaning before and after (``simulate``, ``capacity_sweep``, ``_leading_hits_lru``).
CHILD = r"""
import json, sys, time
import numpy as np
from agentprof.importers import load_any
from agentprof.analysis.calls import model_calls
from agentprof.analysis.cachesim import Tier, capacity_sweep, simulate, _workload
from agentprof.replay.cachepolicy import _leading_hits_lru
path, model, which = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
tr = load_any([path])
cb = model_calls(tr)
keys = cb.prefix_keys()
w = _workload(tr, 256, False, 0)
out = {"chunks_256": int(w.keys.size), "blocks_64": int(keys.size)}
def timed(name, fn, accesses):
    t = time.perf_counter(); r = fn(); dt = time.perf_counter() - t
    out[name] = {"s": dt, "accesses": accesses}
    return r
n256 = int(w.keys.size)
if "simulate" in which:
    r = timed("simulate", lambda: simulate(tr, model, [Tier("hbm", 20 * 2**30), Tier("cpu", 200 * 2**30)]), 2 * n256)
    out["simulate"]["hits"] = r.per_call["hit_tokens"].to_list()
    out["simulate"]["tiers"] = r.tiers
if "sweep_lru" in which:
    r = timed("sweep_lru", lambda: capacity_sweep(tr, model), 2 * n256)
    out["sweep_lru"]["points"] = [p["hit_rate"] for p in r.points]
    out["sweep_lru"]["c90"] = r.capacity_at_target_chunks
if "sweep_provider" in which:
    r = timed("sweep_provider", lambda: capacity_sweep(tr, model, provider=True, ttl_s=300.0), 2 * n256)
    out["sweep_provider"]["points"] = [p["hit_rate"] for p in r.points]
    out["sweep_provider"]["c90"] = r.capacity_at_target_chunks
if "replay_lru" in which:
    lengths = np.diff(cb.offsets)
    cap = float(np.percentile(lengths[lengths > 0], 90)) * 2
    out["replay_cap_blocks"] = cap
    r = timed("replay_lru", lambda: _leading_hits_lru(keys, cb.offsets, [cap])[0], 2 * int(keys.size))
    out["replay_lru"]["hits_sum"] = int(r.sum())
    out["replay_lru"]["hits_digest"] = int((r.astype(np.int64) * np.arange(1, r.size + 1)).sum())
out["maxrss_mb"] = __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

LIBCACHESIM = r"""
import json, sys, time
import numpy as np
import libcachesim as lcs
from agentprof.importers import load_any
from agentprof.analysis.calls import model_calls
tr = load_any([sys.argv[1]])
cb = model_calls(tr)
keys = cb.prefix_keys().view(np.uint64).tolist()  # libCacheSim ids are unsigned
offs = cb.offsets.tolist()
cap = float(sys.argv[2])
cache = lcs.LRU(cache_size=int(cap))
req = lcs.Request()
req.obj_size = 1
hits = []
t = time.perf_counter()
for i in range(len(offs) - 1):
    ks = keys[offs[i]:offs[i + 1]]
    h = 0
    for k in ks:  # lookup: leading run, no reordering
        req.obj_id = k
        if cache.find(req, False) is None:
            break
        h += 1
    hits.append(h)
    for k in reversed(ks):  # store: deepest chunk first, chunk 0 ends most recently used
        req.obj_id = k
        cache.get(req)
dt = time.perf_counter() - t
r = np.array(hits, dtype=np.int64)
print(json.dumps({"s": dt, "accesses": 2 * len(keys), "hits_sum": int(r.sum()),
                  "hits_digest": int((r * np.arange(1, r.size + 1)).sum())}))
"""


def extract(ref: str, dst: Path) -> Path:
    """The package at ``ref`` (git archive) under ``dst``."""
    tar = dst / "src.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref, "agentprof"], stdout=f, check=True)
    with tarfile.open(tar) as t:
        t.extractall(dst, filter="data")
    return dst


def child(src: Path, code: str, *args: str, timeout: float = 3600) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    p = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                       timeout=timeout, cwd=tempfile.gettempdir())
    if p.returncode:
        raise SystemExit(f"child failed ({src}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def report_time(src: Path, folder: Path, out: Path) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", "import sys; from agentprof.cli import main; sys.exit(main())",
                        "report", str(folder), "-o", str(out)], env=env, capture_output=True, text=True,
                       cwd=out.parent)  # not this checkout: `-c` puts the working directory first on sys.path
    dt = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"report failed ({src}):\n{p.stderr[-3000:]}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return dt, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=700, help="kv-cache-tester files in the corpus")
    ap.add_argument("--dir", default="/tmp/agentprof-bench-cachesim", help="where the corpus is built")
    ap.add_argument("--baseline", default=BASE_COMMIT, help="git revision of the code to compare against")
    ap.add_argument("--only", default="simulate,sweep_lru,sweep_provider,replay_lru",
                    help="workloads, comma-separated ('' for none, e.g. with --report)")
    ap.add_argument("--report", action="store_true", help="also time `agentprof report` end to end, both sides")
    ap.add_argument("--json", action="store_true", help="print the raw figures")
    args = ap.parse_args()

    from bench_import import build_kvct

    base = Path(args.dir)
    folder = base / f"kvct-{args.traces}"
    parquet = base / f"kvct-{args.traces}.parquet"
    if not parquet.exists():
        build_kvct(folder, args.traces)
        subprocess.run([sys.executable, "-m", "agentprof.cli", "import", str(folder), "-o", str(parquet)],
                       check=True, capture_output=True, cwd=ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        old_src = extract(args.baseline, Path(tmp))
        new_src = ROOT
        print(f"corpus: {args.traces} kv-cache-tester traces ({parquet}); baseline {args.baseline}", flush=True)
        names = [x for x in args.only.split(",") if x]
        before = child(old_src, CHILD, str(parquet), MODEL, args.only) if names else {}
        after = child(new_src, CHILD, str(parquet), MODEL, args.only) if names else {}
        rows = []
        for name in names:
            b, a = before[name], after[name]
            same = {k: b[k] == a[k] for k in b if k not in ("s", "accesses")}
            rows.append((name, a["accesses"], b["s"], a["s"], all(same.values())))
        if names:
            print(f"chunks: {after['chunks_256']:,} of 256 tokens, {after['blocks_64']:,} blocks of 64 tokens")
        print(f"{'workload':<16} {'accesses':>12} {'before s':>9} {'after s':>8} {'before M/s':>10} "
              f"{'after M/s':>9} {'speed-up':>8}  same result")
        for name, acc, bs, as_, same in rows:
            print(f"{name:<16} {acc:>12,} {bs:>9.2f} {as_:>8.2f} {acc / bs / 1e6:>10.2f} {acc / as_ / 1e6:>9.2f} "
                  f"{bs / as_:>7.1f}×  {'yes' if same else 'NO'}")
        if names:
            print(f"peak RSS of the child: before {before['maxrss_mb']:.0f} MB, after {after['maxrss_mb']:.0f} MB")
        lcs_row = None
        if "replay_lru" in names:
            try:
                import libcachesim  # noqa: F401
            except ImportError:
                print("libcachesim not installed: its row is skipped (pip install libcachesim)")
            else:
                lcs_row = child(new_src, LIBCACHESIM, str(parquet), str(after["replay_cap_blocks"]))
                same = (lcs_row["hits_sum"], lcs_row["hits_digest"]) == (after["replay_lru"]["hits_sum"],
                                                                         after["replay_lru"]["hits_digest"])
                print(f"{'libcachesim LRU':<16} {lcs_row['accesses']:>12,} {'':>9} {lcs_row['s']:>8.2f} {'':>10} "
                      f"{lcs_row['accesses'] / lcs_row['s'] / 1e6:>9.2f} {'':>8}  "
                      f"{'yes' if same else 'NO'} (same hits as replay lru; one capacity per pass)")
        rep = None
        if args.report:
            if not folder.exists():
                build_kvct(folder, args.traces)
            rb = report_time(old_src, folder, Path(tmp) / "before.html")
            ra = report_time(new_src, folder, Path(tmp) / "after.html")
            rep = {"before_s": rb[0], "after_s": ra[0]}
            print(f"agentprof report on the {args.traces}-trace folder: before {rb[0]:.1f} s, after {ra[0]:.1f} s "
                  f"({rb[0] / ra[0]:.1f}×)")
        print(f"load average: {os.getloadavg()[0]:.1f}")
        if args.json:
            print(json.dumps({"before": {k: {kk: vv for kk, vv in v.items() if kk in ('s', 'accesses')}
                                         if isinstance(v, dict) else v for k, v in before.items()},
                              "after": {k: {kk: vv for kk, vv in v.items() if kk in ('s', 'accesses')}
                                        if isinstance(v, dict) else v for k, v in after.items()},
                              "libcachesim": lcs_row, "report": rep}))


if __name__ == "__main__":
    main()
