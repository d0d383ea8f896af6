#!/usr/bin/env python3
"""What a failing OTLP endpoint costs the agent: a fresh process runs a profile of N tool calls with the endpoint
unset, healthy (a loopback protobuf receiver), refusing connections, accepting and never answering, and
answering HTTP 500; prints the tool loop's time, the time leaving the profile took, a second profile's end, the
whole process's wall time and what reached stderr.

    .venv/bin/python scripts/bench_otlp_faults.py [--calls 4000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.capture.test_otlp import Collector  # noqa: E402  (loopback receivers shared with the tests)
from tests.capture.test_otlp_faults import AGENT, Failing, Hanging, refused_url  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=4000)
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="agentprof-otlp-faults-")
    for kind in ("unset", "healthy", "refused", "hanging", "http-500"):
        server = {"healthy": Collector, "hanging": Hanging, "http-500": Failing}.get(kind)
        srv = server() if server else None
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        if kind == "refused":
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = refused_url()
        elif srv is not None:
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = srv.url
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", AGENT, out, str(args.calls)], env=env, capture_output=True,
                              text=True, timeout=300)
        wall = time.perf_counter() - t0
        got = json.loads(done.stdout.strip().splitlines()[-1])
        lines = [x for x in done.stderr.strip().splitlines() if x]
        print(f"{kind:9s} loop {got['loop_s']:.2f} s ({1e6 * got['loop_s'] / args.calls:.0f} us/call), leaving the "
              f"profile {got['exit_s']:.2f} s, next profile's end {got['second_s']:.3f} s, process {wall:.2f} s, "
              f"stderr {len(lines)} line(s){': ' + lines[0][:110] if lines else ''}")
        if srv is not None:
            (getattr(srv, "close", None) or srv.httpd.shutdown)()


if __name__ == "__main__":
    main()
