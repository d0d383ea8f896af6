#!/usr/bin/env python3
"""Benchmark ``agentprof demo``: the whole command as a child process (the README's main job after set-up), the
time of each of its phases, and what capture costs on this real agent run.

Baseline measured in the same run: the same demo agent against the same loopback server and latencies with no
profile and no tool wrappers (the bare agent). The ratio profiled / bare is the wall-time cost of capture on a
real (if small) agent run. Usage: .venv/bin/python scripts/bench_demo.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bare_run(latency) -> float:
    """The demo agent without agentprof: the same server, latencies, repository and SDK."""
    import openai

    from agentprof.demo import agent
    from agentprof.demo.agent_run import TASK
    from agentprof.demo.model_server import ModelServer
    from agentprof.demo.sample_repo import materialize
    from agentprof.demo.scripted_model import scripted_reply

    with tempfile.TemporaryDirectory() as tmp, \
            ModelServer(script=scripted_reply, latency=latency, absolute_pacing=True) as server:
        repo = materialize(Path(tmp) / "calc")
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="x", max_retries=0,
                               http_client=openai.DefaultHttpxClient(trust_env=False))
        t0 = time.perf_counter()
        agent.run(TASK, repo, client, latency.model)
        wall = time.perf_counter() - t0
        client.close()
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="agent runs per variant (default 5)")
    args = ap.parse_args()

    from agentprof.demo.agent_run import capture_agent_run
    from agentprof.demo.latency import DeviceLatency

    latency = DeviceLatency()
    bare, profiled = [], []
    with tempfile.TemporaryDirectory() as traces:
        for _ in range(args.repeat):  # interleaved so drift on a shared machine hits both alike
            bare.append(bare_run(latency))
            profiled.append(capture_agent_run(traces, latency).wall_s)
    b, p = statistics.median(bare), statistics.median(profiled)
    print(f"demo agent run, median of {args.repeat} each: bare {b:.3f} s, under agentprof.profile {p:.3f} s "
          f"-> ratio {p / b:.3f} (capture overhead {100 * (p / b - 1):+.1f} %)")

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "agentprof.cli", "demo", "--out", f"{tmp}/reports", "--traces",
                            f"{tmp}/traces"], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "COLUMNS": "250"})
        total = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(r.stderr)
        took = next((ln for ln in r.stdout.splitlines() if ln.startswith("took")), "")
        size = Path(tmp, "reports", "demo.html").stat().st_size
    print(f"agentprof demo as a child process: {total:.2f} s wall (interpreter start and imports included); "
          f"report {size / 1e3:.0f} kB")
    print(f"  its own breakdown: {took}")
    print(f"  ratio to the bare agent run: {total / b:.1f}x")


if __name__ == "__main__":
    main()
