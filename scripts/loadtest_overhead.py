"""How much a load test's own client adds to the TTFT it reports: the client's TTFT against the server's own
time to first byte, call by call, on the loopback prefix-caching server in its own process.

    PYTHONPATH=. .venv/bin/python scripts/loadtest_overhead.py [--concurrency 1,4,16] [--engines httpx,sdk]

Per engine and concurrency: client TTFT p50, server first byte p50, and the per-call difference (client − server)
at p50 and p90. Bundled kv-cache-tester sessions (~15-20K-token prompts), each cut to its first 3 calls, gaps
capped at 0.05 s, copies filling the slots; the server decodes at 1 ms per token (a fast GPU's pace), so at 16
sessions the client reads up to ~16,000 chunks a second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import httpx
import numpy as np

from agentprof.importers import load_any
from agentprof.loadtest import loadtest
from agentprof.loadtest.client import Endpoint

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [ROOT / "traces/samples/kv-cache-tester" / f"trace_{n}.json" for n in ("0062", "0121", "0610", "0726")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--engines", default="httpx,sdk")
    a = ap.parse_args()
    trace = load_any([str(p) for p in SAMPLES])
    proc = subprocess.Popen([sys.executable, "-m", "agentprof.demo.prefix_server", "--max-seconds", "900"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        url = json.loads(proc.stdout.readline())["url"]  # type: ignore[union-attr]
        root = url.removesuffix("/v1")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'engine':6} {'conc':>4} {'calls':>5} {'client TTFT p50':>15} {'server p50':>10} "
              f"{'overhead p50':>12} {'p90':>8}")
        for conc in (int(x) for x in a.concurrency.split(",")):
            for engine in a.engines.split(","):
                model = f"o-{uuid.uuid4().hex[:8]}"
                res = loadtest(trace, Endpoint(url, model, client=engine), concurrency=conc,
                               sessions=max(conc, 4), max_calls=3, cap_wait=0.05)
                log = [r for r in httpx.get(root + "/agentprof/served").json()["served"] if r["model"] == model]
                server = defaultdict(list)
                for r in log:
                    server[r["session"]].append(r["first_byte_s"])
                client = defaultdict(list)
                for rec in res.records.calls:
                    client[f"agentprof-loadtest-{rec.instance}"].append(rec.ttft_s)
                diff = np.array([c - s for k in client for c, s in zip(client[k], server[k], strict=True)])
                srv = np.array([x for v in server.values() for x in v])
                print(f"{engine:6} {conc:4d} {diff.size:5d} {res.measured['ttft_s']['p50'] * 1e3:12.1f} ms "
                      f"{np.median(srv) * 1e3:7.1f} ms {np.median(diff) * 1e3:9.1f} ms "
                      f"{np.percentile(diff, 90) * 1e3:5.1f} ms")
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
