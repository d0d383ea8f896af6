#!/usr/bin/env python3
"""`agentprof analyze` on growing corpora: time and peak memory, one process against partitioned runs.

Corpora of ``--sizes`` gigabytes are built from the shipped kv-cache-tester samples as
``scripts/bench_import.py`` replicates them (copy *j* of a sample gets new ids and shifted hash ids). For each
size: ``analyze --json`` in one process (skipped above ``--single-max-gb``: it holds the whole corpus), streaming
in one process (``--batch-mb``), and ``--workers 2`` (a local Dask cluster). Peak memory is the largest sum of
RSS over the command's whole process tree (workers included), sampled every 0.2 s.

    .venv/bin/python scripts/bench_scale.py --sizes 1,2        # about 10 minutes on the 2-core VM
    .venv/bin/python scripts/bench_scale.py                    # 1, 2, 5 and 10 GB (about 23 GB of disk in /tmp)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
PER_TRACE_MB = 545 / 700  # the replicated samples' mean file size


def run(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) summed over the process tree, exit code."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    proc = psutil.Process(p.pid)
    peak = 0
    while p.poll() is None:
        try:
            tree = [proc, *proc.children(recursive=True)]
            peak = max(peak, sum(x.memory_info().rss for x in tree if x.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.2)
    dt = time.perf_counter() - t
    if p.returncode:
        print(p.stderr.read().decode()[-2000:], file=sys.stderr)
    return dt, peak / 2**20, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,2,5,10", help="corpus sizes in GB, comma-separated")
    ap.add_argument("--dir", default="/tmp/agentprof-bench-scale", help="where corpora are built")
    ap.add_argument("--batch-mb", type=float, default=256, help="streaming partition size")
    ap.add_argument("--single-max-gb", type=float, default=2, help="largest size also run in one process")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from bench_import import build_kvct

    rows = []
    cli = [sys.executable, "-m", "agentprof.cli", "analyze"]
    for gb in (float(x) for x in args.sizes.split(",")):
        n = max(1, round(gb * 1024 / PER_TRACE_MB))
        folder = Path(args.dir) / f"kvct-{n}"
        if not folder.exists():
            build_kvct(folder, n)
        size = sum(f.stat().st_size for f in folder.iterdir()) / 2**30
        modes = [("streaming", ["--batch-mb", str(args.batch_mb)]), ("--workers 2", ["--workers", "2"])]
        if gb <= args.single_max_gb:
            modes.insert(0, ("one process", []))
        for label, extra in modes:
            dt, peak, code = run([*cli, str(folder), "--json", *extra])
            rows.append({"gb": round(size, 2), "traces": n, "mode": label, "s": dt, "peak_mb": peak, "rc": code})
            print(f"{size:6.2f} GB {n:6d} traces  {label:<12} {dt:8.1f} s  peak {peak:8.0f} MB"
                  f"{'' if code == 0 else f'  FAILED ({code})'}", flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
