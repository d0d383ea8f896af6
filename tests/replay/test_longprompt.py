"""The long-prompt check (docs/DEVICE_MODEL.md §4, "Long prompts"): the shipped fit, which saw only 1,024-token
prompts, against the measured extremes of InferenceMAX 8k1k sweeps."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from agentprof.replay.calibration import load_fitted
from agentprof.replay.longprompt import anchor_ratios

from .conftest import CAT, ROOT

ANCHORS = ROOT / "data" / "inferencex" / "long_prompt_anchors.csv"


@pytest.fixture(scope="module")
def ratios(points: pl.DataFrame) -> pl.DataFrame:
    a = pl.read_csv(ANCHORS).filter(pl.col("hardware").is_in(["h200", "mi300x"]))
    return anchor_ratios(points, a, load_fitted(), CAT)


def test_every_anchor_has_its_source_and_a_1k1k_grid(points: pl.DataFrame) -> None:
    a = pl.read_csv(ANCHORS)
    assert a["source"].str.contains("S4").all()
    for r in a.iter_rows(named=True):
        grid = points.filter((pl.col("model_prefix") == r["model_prefix"]) & (pl.col("hardware") == r["hardware"])
                             & (pl.col("framework") == r["framework"]) & (pl.col("osl") == 1024))
        assert grid.height > 0, r


def test_decode_dominated_extremes_hold_at_8k_prompts(ratios: pl.DataFrame) -> None:
    """Min TPOT and min E2E (lowest concurrency: the prefill is a small part) stay within 20 % at 8K prompts, as at
    1K; peak throughput, mostly prefill at 8k1k, is within the band the docs state (0.70-1.21x)."""
    assert ratios.height == 3  # h200 vLLM GPT-OSS, h200 SGLang DeepSeek, mi300x SGLang DeepSeek
    for c in ("tpot_1k", "e2e_1k", "tpot_long", "e2e_long"):
        assert ratios[c].is_between(0.8, 1.25).all(), ratios.select(c)
    assert ratios["tput_1k"].is_between(0.85, 1.2).all()
    assert ratios["tput_long"].is_between(0.68, 1.3).all()


def test_the_lowest_tpot_rises_with_the_prompt(ratios: pl.DataFrame) -> None:
    """An 8K prompt never lowers the lowest TPOT: others' prompts hold the batch longer and contexts are longer,
    measured (the anchor over its 1k1k grid) and predicted; the two rises are the extremes' ratios over one grid."""
    assert (ratios["tpot_rise_meas"] > 1.0).all() and (ratios["tpot_rise_pred"] > 1.0).all()
    np.testing.assert_allclose(ratios["tpot_rise_pred"] / ratios["tpot_rise_meas"],
                               ratios["tpot_long"] / ratios["tpot_1k"], rtol=1e-9)


def test_first_token_grows_with_the_prompt(points: pl.DataFrame, ratios: pl.DataFrame) -> None:
    """No constant hides prefill: at the lowest concurrency the predicted first token of an 8K prompt takes at
    least twice that of a 1K prompt on every anchor's grid (its FLOPs are 8x, its attention more; the request's
    fixed overheads, much of a 1K first token here, do not grow)."""
    from agentprof.replay.fidelity import check

    for r in ratios.iter_rows(named=True):
        grid = points.filter((pl.col("model_prefix") == r["model_prefix"]) & (pl.col("hardware") == r["hardware"])
                             & (pl.col("framework") == r["framework"]) & (pl.col("isl") == 1024)
                             & (pl.col("osl") == 1024) & ~pl.col("disagg"))
        low = grid.filter(pl.col("conc") == grid["conc"].min())
        short = float(check(low, load_fitted(), CAT).table["pred_ttft"].median())
        assert r["pred_ttft_long_lowest_conc_s"] >= 2 * short, (r["hardware"], short)
