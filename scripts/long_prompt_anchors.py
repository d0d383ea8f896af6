"""Long prompts, out of sample: the shipped fit (every calibration point has 1,024-token prompts) against the
InferenceMAX 8k1k reference figures of ``data/inferencex/long_prompt_anchors.csv`` (docs/DEVICE_MODEL.md §4,
"Long prompts"; the method is :mod:`agentprof.replay.longprompt`). About 40 s.

    python scripts/long_prompt_anchors.py [--markdown]
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
POINTS = ROOT / "data/inferencex/calibration_points.csv"
ANCHORS = ROOT / "data/inferencex/long_prompt_anchors.csv"


def main(argv: list[str]) -> int:
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.longprompt import EXTREMES, anchor_ratios
    from agentprof.replay.points import load_points

    t = anchor_ratios(load_points(POINTS), pl.read_csv(ANCHORS), load_fitted(), load_catalog())
    if "--markdown" in argv:
        print("| group | 1k1k grid (points) | min TPOT 1k1k / 8k1k | min E2E 1k1k / 8k1k | max tput/GPU 1k1k / 8k1k "
              "(8k1k predicted vs measured) | predicted TTFT at 8k1k, lowest conc |")
        print("|---|---|---|---|---|---|")
        for r in t.iter_rows(named=True):
            print(f"| {r['model_prefix']} {r['hardware']} {r['framework']} {r['precision']} | {r['grid_points']} "
                  f"({r['grid_tp']} tp, conc {r['grid_conc']}) | {r['tpot_1k']:.2f}× / {r['tpot_long']:.2f}× | "
                  f"{r['e2e_1k']:.2f}× / {r['e2e_long']:.2f}× | {r['tput_1k']:.2f}× / {r['tput_long']:.2f}× "
                  f"({r['pred_tput_long']:,.0f} vs {r['meas_tput_long']:,.0f}) | "
                  f"{r['pred_ttft_long_lowest_conc_s'] * 1e3:.0f} ms |")
    else:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=220, float_precision=3):
            print(t)
    print("lowest TPOT, 1k1k to 8k1k (measured / predicted rise): " + "; ".join(
        f"{r['model_prefix']} {r['hardware']} {r['framework']} {100 * (r['tpot_rise_meas'] - 1):+.0f} / "
        f"{100 * (r['tpot_rise_pred'] - 1):+.0f} %" for r in t.iter_rows(named=True)))
    for m in EXTREMES:
        r1, r8 = t[f"{m}_1k"], t[f"{m}_long"]
        print(f"{m}: predicted / measured, median 1k1k {r1.median():.3f} (range {r1.min():.2f}–{r1.max():.2f}), "
              f"8k1k {r8.median():.3f} (range {r8.min():.2f}–{r8.max():.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
