"""Prefill attention efficiency per call against the one a run's mean sets, on each AgentX deployment: the runs'
per-request exports (``data/inferencex/agentx_requests.csv``; method: :func:`agentprof.replay.agentic.call_attn_eff`)
beside the mean-fitted ``[global.attn_eff_by_accelerator]`` of the shipped fit. A mean carries warm-ups and stalls
a single call does not; replays price single calls. Then the shipped model's engine time per call (the prefill
a replay prices, frontend left out) over the measured one, median, for calls with under 1K and with 10K or more
new tokens (calls alone in the server, new tokens known).

    python scripts/call_eta.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from agentprof.catalog.hardware import HardwareCatalog
from agentprof.replay.calibration import Fitted

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
    print("\n| hardware | calls | model / measured engine time: all | < 1K new tokens | >= 10K |")
    print("|---|---|---|---|---|")
    for hw, (n, ratios) in per_call_ratios(pl.read_csv(REQUESTS), load_agentic(DEFAULT_AGENTIC), fitted, cat).items():
        print(f"| {hw} | {n} | " + " | ".join("—" if r != r else f"{r:.2f}" for r in ratios) + " |")
    return 0


def per_call_ratios(requests: pl.DataFrame, points: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog
                    ) -> dict[str, tuple[int, list[float]]]:
    """Per hardware: (calls, medians of model / measured engine time over all, < 1K and >= 10K new tokens)."""
    import numpy as np

    from agentprof.catalog.kvcache import block_host_s_per_token
    from agentprof.replay.agentic import accelerator_of, calls_by_deployment, probe_deployment
    from agentprof.replay.costmodel import prefill_s

    out = {}
    for hw, tp, every in calls_by_deployment(requests):
        calls = every.filter(pl.col("alone") & pl.col("first_time") & (pl.col("new") > 0))
        got = probe_deployment(points, hw, fitted, cat, fitted.attn_eff_for(accelerator_of(hw, cat)), tp,
                               block_host=False)
        if got is None or calls.is_empty():
            continue
        row, acc, dep, p = got
        inp = calls["input_sequence_length"].cast(pl.Float64).to_numpy()
        new = np.minimum(calls["new"].cast(pl.Float64).to_numpy(), inp)
        # the recipe's per-block host time over each call's own prompt (deployed_points puts a row's mean in t_req)
        blocks = block_host_s_per_token(str(row["framework"]).lower(), dep.model.key, acc)[0] * inp
        r = (np.asarray(prefill_s(dep, p, new, inp - new)) + blocks) / calls["engine_s"].to_numpy()
        med = [float(np.median(r[m])) if m.any() else float("nan") for m in (new > 0, new < 1000, new >= 10000)]
        out[hw] = (len(r), med)
    return out


if __name__ == "__main__":
    sys.exit(main())
