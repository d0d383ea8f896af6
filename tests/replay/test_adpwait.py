"""The attention-DP balance hold (:mod:`agentprof.replay.adpwait`): the closed form against a step-by-step run of
the engine's rule, its limits, and where the calibration points carry it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.replay import points
from agentprof.replay.adpwait import adp_hold_iters
from agentprof.replay.points import point_features


def _engine_rule(g: int, lam: float, timeout: int, batching: int, iters: int, seed: int = 7) -> float:
    """TensorRT-LLM's ``_balance_adp_requests`` iteration by iteration (docs/SOURCES.md S59): Poisson arrivals,
    each to a rank without a waiting context request if any; every rank always decoding. Mean wait."""
    rng = np.random.default_rng(seed)
    waiting: list[list[int]] = [[] for _ in range(g)]
    count = batch = turn = 0
    waits: list[int] = []
    for it in range(iters):
        for _ in range(rng.poisson(lam)):
            free = [r for r in range(g) if not waiting[r]]
            waiting[free[0] if free else turn % g].append(it)
            turn += 1
        go = False
        if all(waiting):
            count = 0
            if batch < batching:
                batch += 1
            else:
                batch, go = 0, True
        else:
            count += 1
            if count >= timeout:
                count, go = 0, True
        if go:
            for r in range(g):
                waits += [it - t for t in waiting[r]]
                waiting[r] = []
    return float(np.mean(waits))


@pytest.mark.parametrize("g, lam", [(2, 64 / 922), (4, 64 / 922), (2, 64 / 7373)])
def test_the_closed_form_matches_the_engine_rule_run_step_by_step(g: int, lam: float) -> None:
    sim = _engine_rule(g, lam, 50, 10, 60_000)
    assert adp_hold_iters(g, lam, 50, 10) == pytest.approx(sim, rel=0.06)


def test_limits() -> None:
    # a lone request waits for the timeout counter: half its period on average
    assert adp_hold_iters(2, 1e-6, 50, 10) == pytest.approx(25.0, rel=1e-3)
    assert adp_hold_iters(4, 0.0, 50, 10) == 0.0
    # one rank has every rank's request at once: only the batching wait, less what arrives during it
    assert adp_hold_iters(1, 1e-6, 50, 10) == pytest.approx(10.0, rel=1e-3)
    # more ranks to fill: longer holds at the same arrival rate
    assert adp_hold_iters(2, 0.07, 50, 10) < adp_hold_iters(4, 0.07, 50, 10) < adp_hold_iters(8, 0.07, 50, 10)


def _rows(dpa: bool, disagg: bool = False) -> pl.DataFrame:
    row = {"hardware": "b200", "framework": "trt", "model": "openai/gpt-oss-120b", "model_prefix": "gptoss",
           "precision": "fp4", "spec_decoding": "none", "isl": 1024, "osl": 1024, "conc": 64, "tp": 2, "ep": 1,
           "dp_attention": dpa, "disagg": disagg, "num_gpus": 2}
    if disagg:
        row.update(framework="dynamo-trt", hardware="gb200", prefill_num_workers=1, num_prefill_gpu=1, prefill_tp=1,
                   decode_num_workers=1, num_decode_gpu=2, decode_tp=1, decode_ep=2, num_gpus=3)
    return pl.DataFrame([row])


def test_aggregated_attention_dp_points_of_the_recipe_wait_for_the_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    cat = load_catalog()
    held = point_features(_rows(True), cat).work.wait_steps[0]
    plain = point_features(_rows(False), cat).work.wait_steps[0]
    assert plain == 0.0
    # 64 clients on 0.9 x 1,024 output tokens, two ranks: ~13 steps (the engine rule above gives the same)
    assert held == pytest.approx(adp_hold_iters(2, 64 / (0.9 * 1024 + held), 50, 10), rel=1e-3)
    assert 10 < held < 17
    # a disaggregated decode worker runs no context phase: nothing to hold
    assert point_features(_rows(True, disagg=True), cat).work.wait_steps[0] == 0.0
    monkeypatch.setattr(points, "ADP_BALANCE", False)
    assert point_features(_rows(True), cat).work.wait_steps[0] == 0.0
