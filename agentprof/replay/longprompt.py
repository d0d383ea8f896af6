"""Long prompts out of sample: a group's 1k1k grid swept at another prompt length against that sweep's measured
extremes (docs/DEVICE_MODEL.md §4, "Long prompts").

The 8k1k InferenceMAX points are not in the calibration data, only their sweeps' extremes (min median TPOT, min
median E2E, max throughput per GPU over all concurrencies and layouts). So each group's own 1k1k grid (its layouts
x concurrencies) is predicted at the long prompt and the same extremes are taken; the same extremes at 1k1k,
predicted against measured on that grid, are the reference, so a ratio that moves between the two is what the
longer prompt does to the model. Throughput per GPU is clients x 0.9 (ISL + OSL) / median E2E / GPUs (Little's law
with InferenceX's mean lengths, 0.9 x nominal).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from agentprof.catalog.hardware import HardwareCatalog
from agentprof.replay.calibration import Fitted
from agentprof.replay.fidelity import check
from agentprof.replay.points import from_run_artifacts

GROUP = ("model_prefix", "hardware", "framework", "precision", "spec_decoding")
"""The columns that name a group in the points and the anchors."""
EXTREMES = ("tpot", "e2e", "tput")


def _extremes(t: pl.DataFrame, side: str, isl: int, osl: int) -> dict[str, float]:
    """Min median TPOT, min median E2E and max throughput per GPU over a grid, ``pred`` or ``meas``."""
    tput = t["conc"].cast(pl.Float64) * 0.9 * (isl + osl) / t[f"{side}_e2e"] / t["gpus"]
    return {"tpot": float(t[f"{side}_tpot"].min()), "e2e": float(t[f"{side}_e2e"].min()), "tput": float(tput.max())}


def anchor_ratios(points: pl.DataFrame, anchors: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog,
                  isl: int = 8192, osl: int = 1024) -> pl.DataFrame:
    """Per anchor row (its group's measured ``min_median_tpot_s``, ``min_median_e2e_s``, ``max_tput_per_gpu_tok_s``
    at ``isl``/``osl``): predicted / measured of each extreme at 1k1k (``*_1k``, on the grid's own measurements) and
    at the long prompt (``*_long``), the predicted long-prompt throughput, the lowest TPOT's rise from 1k1k to the
    long prompt as measured and as predicted (``tpot_rise_*``) and the predicted TTFT at the grid's lowest
    concurrency. ``points`` as :func:`agentprof.replay.points.load_points` reads them; aggregated 1k1k rows of the
    run artifacts the anchors come from make the grid (a disaggregated sweep's layouts at another prompt length
    are its own, not the 1k1k ones; other runs' engine versions are not the anchors')."""
    rows: list[dict[str, Any]] = []
    points = from_run_artifacts(points)
    for a in anchors.iter_rows(named=True):
        grid = points.filter(pl.all_horizontal([pl.col(k) == a[k] for k in GROUP])
                             & (pl.col("isl") == 1024) & (pl.col("osl") == 1024) & ~pl.col("disagg"))
        if grid.is_empty():
            continue
        gpus = grid["num_gpus"].cast(pl.Float64)
        short = check(grid, fitted, cat).table.with_columns(gpus=gpus)
        long = check(grid.with_columns(pl.lit(isl).alias("isl"), pl.lit(osl).alias("osl")), fitted, cat
                     ).table.with_columns(gpus=gpus)
        m1, p1, pl_ = _extremes(short, "meas", 1024, 1024), _extremes(short, "pred", 1024, 1024), \
            _extremes(long, "pred", isl, osl)
        ml = {"tpot": a["min_median_tpot_s"], "e2e": a["min_median_e2e_s"], "tput": a["max_tput_per_gpu_tok_s"]}
        low = long.filter(pl.col("conc") == long["conc"].min())
        rows.append({**{k: a[k] for k in GROUP}, "grid_points": grid.height, "grid_tp": grid["tp"].n_unique(),
                     "grid_conc": f"{int(grid['conc'].min())}–{int(grid['conc'].max())}",
                     **{f"{m}_1k": p1[m] / m1[m] for m in EXTREMES}, **{f"{m}_long": pl_[m] / ml[m] for m in EXTREMES},
                     "pred_tput_long": pl_["tput"], "meas_tput_long": float(ml["tput"]),
                     # the lowest TPOT's rise from 1k1k to the long prompt (others' prompts hold the batch, and
                     # contexts are longer): measured (the anchor over the grid's own) and predicted
                     "tpot_rise_meas": float(ml["tpot"]) / m1["tpot"], "tpot_rise_pred": pl_["tpot"] / p1["tpot"],
                     "pred_ttft_long_lowest_conc_s": float(low["pred_ttft"].median())})
    return pl.DataFrame(rows)
