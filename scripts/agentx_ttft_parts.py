"""Where an AgentX run's first-token time goes, measured by vLLM itself beside the model's parts.

``data/inferencex/agentx_server_metrics.csv`` holds each run's vLLM Prometheus histograms as AIPerf exported them
(``server_metrics_export.csv``): the mean time a request spent WAITING (``request_queue_time``), in its PREFILL
phase (``request_prefill_time``) and to its first token (``time_to_first_token``, from the server's arrival), so
the rest is the frontend, the engine's host work and the engine step in progress when the request came: the
engine takes requests in between steps, and its queue starts there (docs/SOURCES.md [S70]). Each
``agentic_kimi_points.csv`` row carries its run's means (same hardware, TP, users and offload; mean prompt within
3 %: :func:`agentprof.replay.agentic.with_server_queue`), set against
:func:`agentprof.replay.agentic.predictions`' parts: the prefill queue, the prefill alone (its per-prefill host
time inside) and the frontend. Healthy rows only (hit rate >= 0.9), as the equations price them. Where vLLM's
phases start is the server build's: on the B200 runs at 1 user "the rest" is 0.02 s against 0.56 s at 8, with
the frontend's ~0.5 s (the per-request exports, ``scripts/frontend_time.py``) inside the prefill phase.

    python scripts/agentx_ttft_parts.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
METRICS = ROOT / "data/inferencex/agentx_server_metrics.csv"
POINTS = ROOT / "data/inferencex/agentic_kimi_points.csv"


def main() -> int:
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.agentic import HEALTHY_HIT, load_agentic, predictions, workload_think_s
    from agentprof.replay.calibration import load_fitted

    pts = load_agentic(POINTS, METRICS)
    fitted, cat = load_fitted(), load_catalog()
    think = workload_think_s(pts)
    print("| hw | tp | users | offload | prompt | hit | TTFT client | vLLM: queue / prefill / rest | "
          "model: queue / prefill / frontend |")
    print("|---|---|---|---|---|---|---|---|---|")
    split = pts.filter(pl.col("meas_queue").is_not_null() & pl.col("meas_prefill").is_not_null()
                       & pl.col("meas_server_ttft").is_not_null() & (pl.col("server_gpu_cache_hit_rate") >= HEALTHY_HIT))
    for r in split.sort("hw", "tp", "conc", "offloading").iter_rows(named=True):
        pr = predictions(pl.DataFrame([r]), fitted, cat, fitted.attn_eff, fitted.attn_eff_by_accelerator,
                         think_s=think, max_conc=10**6)
        if not pr.height:
            continue
        q, pf = r["meas_queue"], r["meas_prefill"]
        rest = r["meas_server_ttft"] - q - pf
        print(f"| {r['hw']} | {r['tp']} | {r['conc']} | {r['offloading']} | {r['mean_input_tokens']:,.0f} | "
              f"{r['server_gpu_cache_hit_rate']:.3f} | {r['mean_ttft']:.2f} s | "
              f"{q:.2f} / {pf:.2f} / {rest:.2f} s | {pr['pred_queue'][0]:.2f} / {pr['pred_prefill'][0]:.2f} / "
              f"{pr['pred_frontend'][0]:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
