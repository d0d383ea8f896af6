"""The all-to-all's own fan-out constant (``a2a_ratio``): a data-parallel-attention step's collective latency
grows by ``kappa·a2a_ratio`` per unit of fan-out, a tensor-parallel one's by ``kappa``; the ratio is fitted only by
a group that measured a decode instance of the kind inside its scale-up domain (and by the hardware level, so that
the hardware's ``kappa`` is the all-reduce's), else held at 1."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import tomllib

from agentprof.replay import calibration
from agentprof.replay.calibration import (
    A2A,
    PRIOR_MEAN,
    _fixed_terms,
    _parse_fitted,
    fit,
    load_fitted,
    step_params,
    to_toml,
)
from agentprof.replay.points import PARAMS, fanout, fixed_overhead, point_features, predict

from .conftest import CAT


def test_the_ratio_scales_only_the_all_to_all() -> None:
    g = np.array([2.0, 4.0, 8.0])
    for dpa in (False, True):
        base = fixed_overhead(61, 20e-6, 1.0, g, dpa)
        scaled = fixed_overhead(61, 20e-6, 1.0, g, dpa, 3.0)
        if dpa:
            np.testing.assert_allclose(scaled, 61 * 20e-6 * (1.0 + 3.0 * fanout(g, True)))
        else:
            np.testing.assert_allclose(scaled, base)
    theta = np.array([20e-6, 1.0, 0.7, 0.33, 0.01, 1.0, 0.003, 1.0, 0.15, 3.0, 2.5])
    assert step_params(theta, 61, 8, dpa=True).t_fixed_s == pytest.approx(float(fixed_overhead(61, 20e-6, 1.0, 8, True, 2.5)))
    assert step_params(theta, 61, 8).t_fixed_s == pytest.approx(float(fixed_overhead(61, 20e-6, 1.0, 8, False)))


def _rows(layouts: list[tuple[int, bool]], hw: str = "b200", framework: str = "trt") -> pl.DataFrame:
    return pl.DataFrame([{"hardware": hw, "framework": framework, "model": "gpt-oss-120b", "precision": "fp4",
                          "isl": 1024, "osl": osl, "conc": c, "tp": tp, "ep": 1, "dp_attention": dpa, "disagg": False}
                         for tp, dpa in layouts for osl in (1024, 8192) for c in (32, 64, 128)])


def test_only_a_group_with_an_in_domain_all_to_all_decode_fits_the_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    tp_only = point_features(_rows([(2, False), (4, False)]), CAT)
    both = point_features(_rows([(2, False), (4, True)]), CAT)
    assert A2A in _fixed_terms(tp_only, "group")
    assert A2A not in _fixed_terms(both, "group")
    assert A2A not in _fixed_terms(both, "hardware")  # the hardware's kappa then describes the all-reduce alone
    assert A2A in _fixed_terms(both, "family")
    both.in_domain[:] = False  # an instance spanning nodes also waits for the scale-out network
    assert A2A in _fixed_terms(both, "group")
    monkeypatch.setattr(calibration, "SPLIT_A2A", False)
    assert A2A in _fixed_terms(point_features(_rows([(2, False), (4, True)]), CAT), "group")


def test_the_fit_recovers_two_constants_that_one_kappa_cannot_fit() -> None:
    # points synthesized with an all-to-all four times as steep as the all-reduce: with the split the group
    # moves the ratio well away from its prior (1; the priors hold it short of 4) and fits both kinds far better
    # than one kappa can
    df = _rows([(1, False), (2, False), (4, False), (8, False), (2, True), (4, True), (8, True)])
    truth = np.array([25e-6, 0.8, 0.75, 0.3, 0.03, 1.0, 0.004, 1.0, 0.17, 3.0, 4.0])
    f = point_features(df, CAT)
    ttft, tpot, e2e = predict(f, np.tile(truth, (len(f), 1)))
    df = df.with_columns(pl.Series("median_ttft_s", ttft), pl.Series("median_tpot_s", tpot),
                         pl.Series("median_e2el_s", e2e))
    fitted = fit(df, CAT)
    g = fitted.entries["group"]["b200/trt/gpt-oss-120b/fp4/none"]
    assert 2.0 < g.param("a2a_ratio") < 6.0
    def group_tpot_error(fitted_: calibration.Fitted) -> float:  # every layout from its group's terms
        theta = fitted_.entries["group"]["b200/trt/gpt-oss-120b/fp4/none"].theta
        return float(np.median(np.abs(predict(f, np.tile(theta, (len(f), 1)))[1] / tpot - 1.0)))

    split = group_tpot_error(fitted)
    old = calibration.SPLIT_A2A
    calibration.SPLIT_A2A = False
    try:
        one = group_tpot_error(fit(df, CAT))
    finally:
        calibration.SPLIT_A2A = old
    assert split < one / 2


def test_a_fitted_file_from_before_the_split_loads_with_one_constant() -> None:
    text = to_toml(load_fitted())
    old = "\n".join(line for line in text.splitlines() if not line.startswith("a2a_ratio ="))
    back = _parse_fitted(tomllib.loads(old), "old.toml")
    e = next(iter(back.entries["group"].values()))
    assert len(e.theta) == len(PARAMS) and e.param("a2a_ratio") == 1.0


def test_the_hardware_level_fits_the_ratio_and_a_group_without_the_kind_keeps_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # one hardware, two groups: TRT-LLM measured both kinds (the all-to-all four times as steep), vLLM only the
    # all-reduce. With the ratio pinned at 1 on the hardware level, the hardware's kappa (every group's prior)
    # is a compromise the all-to-all pulls up; fitted there, the hardware carries a ratio well above 1, vLLM,
    # which measured no all-to-all, keeps 1 rather than the hardware's, and both groups fit their points better
    truth = np.array([25e-6, 0.8, 0.75, 0.3, 0.03, 1.0, 0.004, 1.0, 0.17, 3.0, 4.0])
    df = pl.concat([_rows([(1, False), (2, False), (2, True), (4, True), (8, True)]),
                    _rows([(1, False), (2, False), (4, False), (8, False)], framework="vllm")])
    f = point_features(df, CAT)
    ttft, tpot, e2e = predict(f, np.tile(truth, (len(f), 1)))
    df = df.with_columns(pl.Series("median_ttft_s", ttft), pl.Series("median_tpot_s", tpot),
                         pl.Series("median_e2el_s", e2e))
    split = fit(df, CAT)
    assert split.entries["group"]["b200/vllm/gpt-oss-120b/fp4/none"].param("a2a_ratio") == PRIOR_MEAN["a2a_ratio"]
    assert split.entries["hardware"]["b200"].param("a2a_ratio") > 1.5
    monkeypatch.setattr(calibration, "A2A_LEVELS", ("group", "layout"))
    pinned = fit(df, CAT)
    assert pinned.entries["hardware"]["b200"].param("a2a_ratio") == PRIOR_MEAN["a2a_ratio"]
    assert (pinned.entries["hardware"]["b200"].param("kappa")
            > 1.3 * split.entries["hardware"]["b200"].param("kappa"))
    for group in ("b200/trt/gpt-oss-120b/fp4/none", "b200/vllm/gpt-oss-120b/fp4/none"):
        assert split.entries["group"][group].median_ape_tpot < 0.8 * pinned.entries["group"][group].median_ape_tpot
