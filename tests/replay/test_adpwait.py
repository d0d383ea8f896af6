"""The attention-DP balance hold (:mod:`agentprof.replay.adpwait`): the closed forms (the wait, the prompts
scheduled together) against a step-by-step run of the engine's rule, their limits, and where the points carry
them."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.replay import points
from agentprof.replay.adpwait import adp_hold_iters, adp_released_with
from agentprof.replay.equations import times
from agentprof.replay.points import point_features


def _engine_rule(g: int, lam: float, timeout: int, batching: int, iters: int, seed: int = 7) -> tuple[float, float]:
    """TensorRT-LLM's ``_balance_adp_requests`` iteration by iteration (docs/SOURCES.md S59): Poisson arrivals,
    each to a rank without a waiting context request if any; every rank always decoding. (Mean wait, mean number
    of other requests scheduled in the same iteration.)"""
    rng = np.random.default_rng(seed)
    waiting: list[list[int]] = [[] for _ in range(g)]
    count = batch = turn = 0
    waits: list[int] = []
    beside: list[int] = []
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
            n = sum(len(w) for w in waiting)
            for r in range(g):
                waits += [it - t for t in waiting[r]]
                beside += [n - 1] * len(waiting[r])
                waiting[r] = []
    return float(np.mean(waits)), float(np.mean(beside))


@pytest.mark.parametrize("g, lam, timeout, batching", [(2, 64 / 922, 50, 10), (4, 64 / 922, 50, 10),
                                                      (2, 64 / 7373, 50, 10), (8, 64 / 1050, 60, 0),
                                                      (8, 256 / 1050, 60, 0)])
def test_the_closed_forms_match_the_engine_rule_run_step_by_step(g: int, lam: float, timeout: int,
                                                                  batching: int) -> None:
    wait, beside = _engine_rule(g, lam, timeout, batching, 60_000)
    assert adp_hold_iters(g, lam, timeout, batching) == pytest.approx(wait, rel=0.06)
    assert adp_released_with(g, lam, timeout, batching) == pytest.approx(beside, rel=0.06, abs=0.02)


def test_limits() -> None:
    # a lone request waits for the timeout counter: half its period on average
    assert adp_hold_iters(2, 1e-6, 50, 10) == pytest.approx(25.0, rel=1e-3)
    assert adp_hold_iters(4, 0.0, 50, 10) == 0.0
    # one rank has every rank's request at once: only the batching wait, less what arrives during it
    assert adp_hold_iters(1, 1e-6, 50, 10) == pytest.approx(10.0, rel=1e-3)
    # more ranks to fill: longer holds at the same arrival rate
    assert adp_hold_iters(2, 0.07, 50, 10) < adp_hold_iters(4, 0.07, 50, 10) < adp_hold_iters(8, 0.07, 50, 10)
    # a lone request runs its context phase alone; when every rank fills at once, the other g - 1 beside it
    assert adp_released_with(8, 1e-6, 60, 0) == pytest.approx(0.0, abs=1e-4)
    assert adp_released_with(4, 0.0, 60, 0) == 0.0
    assert adp_released_with(8, 50.0, 60, 0) == pytest.approx(7.0, rel=1e-6)


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


def _deepseek(dpa: bool, hardware: str = "b200") -> pl.DataFrame:
    return pl.DataFrame([{"hardware": hardware, "framework": "trt", "model": "deepseek-ai/DeepSeek-R1-0528",
                          "model_prefix": "dsr1", "precision": "fp8", "spec_decoding": "none", "isl": 8192,
                          "osl": 1024, "conc": 64, "tp": 8, "ep": 8, "dp_attention": dpa, "disagg": False,
                          "num_gpus": 8}])


@pytest.mark.parametrize("hardware", ["b200", "h200"])
def test_deepseek_recipes_hold_for_their_timeout_and_schedule_the_held_prompts_together(hardware: str) -> None:
    cat = load_catalog()
    f = point_features(_deepseek(True, hardware), cat)
    assert point_features(_deepseek(False, hardware), cat).work.pf_with[0] == 0.0
    # the recipes' counts (timeout 60, no batching wait): 64 clients over 0.9 x 1,024 steps rarely fill 8 ranks
    # within 60 steps, so a request waits about half the timeout and shares its step with the window's arrivals
    hold = f.work.wait_steps[0]
    lam = 64 / (0.9 * 1024 + hold)
    assert hold == pytest.approx(adp_hold_iters(8, lam, 60, 0), rel=1e-3)
    assert 25 < hold < 31
    assert f.work.pf_with[0] == pytest.approx(adp_released_with(8, lam, 60, 0), rel=1e-6)
    assert 3.0 < f.work.pf_with[0] < 4.0


def test_the_prompts_beside_a_request_add_their_compute_to_its_first_token_only() -> None:
    w = point_features(_deepseek(True), load_catalog()).work
    args = dict(tf_dec=0.002, tf_pf=0.002, mbu=0.7, mfu=0.3, t0=0.05, q=1.0, t_req=0.001, accept=1.0, attn_eff=0.2)
    beside = float(w.pf_with[0])
    with_ = times(w, **args)
    w.pf_with = None
    alone = times(w, **args)
    # each other prompt runs its attention and non-expert GEMMs on its own rank, beside this one's: only its
    # experts (spread over the ranks) delay this first token
    experts = (w.pf_gemm_s - w.pf_gemm_rank_s) / 0.3
    assert with_.tpot == pytest.approx(alone.tpot)
    assert with_.ttft - alone.ttft == pytest.approx(beside * experts, rel=1e-9)
    assert with_.parts["compute"] - alone.parts["compute"] == pytest.approx(with_.ttft - alone.ttft)
