"""Where an AgentX run's first-token time goes, measured by vLLM itself beside the model's parts.

``data/inferencex/agentx_server_metrics.csv`` holds each run's vLLM Prometheus histograms as AIPerf exported them
(``server_metrics_export.csv``): the mean time a request spent WAITING (``request_queue_time``), in its PREFILL
phase (``request_prefill_time``) and to its first token (``time_to_first_token``, from the server's arrival), so
the rest is the frontend and the engine's host work before scheduling. Each run is matched to its
``agentic_kimi_points.csv`` row (same hardware, TP, users and offload; the nearest mean prompt, within 3 %) and set
against :func:`agentprof.replay.agentic.predictions`' parts: the prefill queue, the prefill alone (its per-prefill
host time inside) and the frontend. Healthy rows only (hit rate >= 0.9), as the equations price them. Where
vLLM's phases start is the server build's: on the B200 runs at 1 user "the rest" is 0.02 s against 0.56 s at 8,
with the frontend's ~0.5 s (the per-request exports, ``scripts/frontend_time.py``) inside the prefill phase.

    python scripts/agentx_ttft_parts.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
METRICS = ROOT / "data/inferencex/agentx_server_metrics.csv"
POINTS = ROOT / "data/inferencex/agentic_kimi_points.csv"


def mean(metric: str) -> pl.Expr:
    return (pl.col(f"{metric}_sum") / pl.col(f"{metric}_count")).alias(metric)


def main() -> int:
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.agentic import HEALTHY_HIT, QUEUE_MATCH, load_agentic, predictions, workload_think_s
    from agentprof.replay.calibration import load_fitted

    m = pl.read_csv(METRICS)
    m = m.with_columns(mean("time_to_first_token_seconds"), mean("request_queue_time_seconds"),
                       mean("request_prefill_time_seconds"), mean("request_prompt_tokens"))
    pts = load_agentic(POINTS)
    fitted, cat = load_fitted(), load_catalog()
    think = workload_think_s(pts)
    print("| hw | tp | users | offload | prompt | hit | TTFT client | vLLM: queue / prefill / rest | "
          "model: queue / prefill / frontend |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in m.sort("hw", "tp", "conc", "offloading").iter_rows(named=True):
        cand = pts.filter((pl.col("hw") == r["hw"]) & (pl.col("tp") == r["tp"]) & (pl.col("conc") == r["conc"])
                          & (pl.col("offloading") == r["offloading"]) & pl.col("mean_input_tokens").is_not_null())
        if not cand.height:
            continue
        cand = cand.with_columns(d=(pl.col("mean_input_tokens") / r["request_prompt_tokens"] - 1.0).abs()).sort("d")
        row = cand.head(1)
        if float(row["d"][0]) > QUEUE_MATCH or float(row["server_gpu_cache_hit_rate"][0] or 0.0) < HEALTHY_HIT:
            continue
        pr = predictions(row, fitted, cat, fitted.attn_eff, fitted.attn_eff_by_accelerator, think_s=think,
                         max_conc=10**6)
        if not pr.height:
            continue
        q, pf = r["request_queue_time_seconds"], r["request_prefill_time_seconds"]
        rest = r["time_to_first_token_seconds"] - q - pf
        print(f"| {r['hw']} | {r['tp']} | {r['conc']} | {r['offloading']} | {r['request_prompt_tokens']:,.0f} | "
              f"{row['server_gpu_cache_hit_rate'][0]:.3f} | {row['mean_ttft'][0]:.2f} s | "
              f"{q:.2f} / {pf:.2f} / {rest:.2f} s | {pr['pred_queue'][0]:.2f} / {pr['pred_prefill'][0]:.2f} / "
              f"{pr['pred_frontend'][0]:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
