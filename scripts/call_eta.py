"""Prefill attention efficiency per call against the one a run's mean sets, on each AgentX deployment: the runs'
per-request exports (``data/inferencex/agentx_requests.csv``; method: :func:`agentprof.replay.agentic.call_attn_eff`)
beside the mean-fitted ``[global.attn_eff_by_accelerator]`` of the shipped fit. A mean carries warm-ups and stalls
a single call does not; replays price single calls.

    python scripts/call_eta.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = ROOT / "data/inferencex/agentx_requests.csv"


def main() -> int:
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.agentic import accelerator_of, call_attn_eff, load_agentic
    from agentprof.replay.calibration import DEFAULT_AGENTIC, load_fitted

    cat, fitted = load_catalog(), load_fitted()
    got = call_attn_eff(pl.read_csv(REQUESTS), load_agentic(DEFAULT_AGENTIC), fitted, cat)
    print("| hardware | TP | calls used / all | η per call | η from means | engine time mean / median |")
    print("|---|---|---|---|---|---|")
    for hw, r in got.items():
        mean_eta = fitted.attn_eff_for(accelerator_of(hw, cat))
        print(f"| {hw} | {r['tp']} | {r['calls']} / {r['calls_total']} | {r['eta_call']:.3f} | {mean_eta:.3f} | "
              f"{r['mean_engine_s']:.3f} / {r['median_engine_s']:.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
