"""The decode step of an engine the fixed-sequence points lack on an accelerator (vLLM on MI355X), fitted on the
AgentX one-user points: what it is fitted on, what it predicts for a model it never saw, where lookup uses it."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
import tomllib

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.replay.agentic import deployed_points, fit_rows, load_agentic
from agentprof.replay.calibration import (
    DEFAULT_AGENTIC_OTHER,
    PARAMS,
    _parse_fitted,
    load_fitted,
    to_toml,
)
from agentprof.replay.costmodel import call_times
from agentprof.replay.enginestep import decode_rows, fit_engine_steps, predicted_itl
from agentprof.replay.points import PointKey

from .conftest import AGENTIC, ROOT

CAT = load_catalog()
OTHER = ROOT / DEFAULT_AGENTIC_OTHER
TAU, KAPPA = PARAMS.index("tau_s"), PARAMS.index("kappa")


def _bare():
    return dataclasses.replace(load_fitted(), engine_steps={})


def test_only_engines_without_a_fixed_sequence_group_on_the_accelerator_are_fitted() -> None:
    # B200 has vLLM groups of its own, so its Kimi one-user point is not a vLLM-on-B200 step fit; MI355X has none
    rows = decode_rows([load_agentic(AGENTIC), load_agentic(OTHER)], _bare(), CAT)
    assert set(rows["name"].to_list()) == {"vllm/mi355x"}
    assert {"mi355x/kimi-k2.5/fp4/tp4", "mi355x/minimax-m2.5/fp8/tp2"} <= set(rows["stack"].to_list())
    steps, info = fit_engine_steps([load_agentic(AGENTIC), load_agentic(OTHER)], _bare(), CAT)
    assert set(steps) == {"vllm/mi355x"} and steps["vllm/mi355x"]["points"] == rows.height
    assert info["engine_step_vllm_mi355x_tau_s"] == steps["vllm/mi355x"]["tau_s"]


def test_the_rest_of_a_one_user_decode_step_does_not_depend_on_the_fixed_overhead() -> None:
    # the fit subtracts the fixed overhead from the measured ITL: the model's one-user ITL must be rest + t_fixed
    df = fit_rows(load_agentic(OTHER)).filter(pl.col("conc") == 1).head(1)
    r, _, dep, p, _ = next(deployed_points(df, _bare(), CAT, 0.2))
    inp, out = np.array([float(r["mean_input_tokens"])]), np.array([float(r["mean_output_tokens_actual"])])
    itl = [float(call_times(dep, p.with_(t_fixed_s=t), inp, 0.9 * inp, out).decode_s[0]) / (out[0] - 1)
           for t in (0.0, 0.004)]
    assert itl[1] - itl[0] == pytest.approx(0.004, rel=1e-6)


def test_a_fit_on_minimax_predicts_kimis_one_user_decode_better_than_the_borrowed_sglang_terms() -> None:
    # cross-model hold-out: vLLM on MI355X fitted on MiniMax M2.5 (GQA, TP1/TP2) prices Kimi K2.5 (MLA, TP4)
    kimi = decode_rows([load_agentic(AGENTIC)], _bare(), CAT)
    steps, _ = fit_engine_steps([load_agentic(OTHER)], _bare(), CAT)
    s = steps["vllm/mi355x"]
    held = predicted_itl(kimi, s["tau_s"], s["kappa"]) / kimi["meas_itl"].to_numpy()
    borrowed = []
    for _r, _, _dep, p, _ in deployed_points(fit_rows(load_agentic(AGENTIC)).filter(
            (pl.col("conc") == 1) & (pl.col("hw") == "mi355x")), _bare(), CAT, 0.2):
        borrowed.append(p.t_fixed_s)
    old = (np.array(borrowed) + kimi["rest_s"].to_numpy()) / kimi["meas_itl"].to_numpy()
    assert np.all(np.abs(held - 1) < 0.1)
    assert np.median(np.abs(held - 1)) < np.median(np.abs(old - 1)) - 0.03
    assert s["held_out_median_ape_itl"] < 0.1  # each MiniMax stack from the other two


def test_lookup_gives_the_engines_own_step_only_where_it_borrows_from_another_engine() -> None:
    fitted = load_fitted()
    step = fitted.engine_steps["vllm/mi355x"]
    key = PointKey("cdna4", "mi355x", "vllm", "kimi-k2.5", "fp4", "none", "tp4-ep1")
    bare_e, bare_how = _bare().lookup(key, CAT)
    e, how = fitted.lookup(key, CAT)
    assert e.theta[TAU] == step["tau_s"] and e.theta[KAPPA] == step["kappa"]
    assert "vllm/mi355x" in how and how.split(" ")[0] == bare_how.split(" ")[0]
    # every other term stays the borrowed group's, and the stored entry is not changed
    rest = [i for i in range(len(PARAMS)) if i not in (TAU, KAPPA)]
    assert np.array_equal(e.theta[rest], bare_e.theta[rest])
    assert fitted.lookup(key, CAT)[0].theta[TAU] == step["tau_s"] and bare_e.theta[TAU] != step["tau_s"]
    # an engine the points calibrated on MI355X keeps its own fit
    sg = PointKey("cdna4", "mi355x", "sglang", "deepseek-r1", "fp8", "none", "tp8-ep1")
    assert np.array_equal(fitted.lookup(sg, CAT)[0].theta, _bare().lookup(sg, CAT)[0].theta)


def test_engine_steps_survive_the_file_and_a_bad_one_is_one_clear_error() -> None:
    fitted = load_fitted()
    back = _parse_fitted(tomllib.loads(to_toml(fitted)), "x")
    assert back.engine_steps["vllm/mi355x"]["tau_s"] == pytest.approx(fitted.engine_steps["vllm/mi355x"]["tau_s"],
                                                                      rel=1e-5)
    assert back.engine_steps["vllm/mi355x"]["stacks"] == fitted.engine_steps["vllm/mi355x"]["stacks"]
    text = to_toml(fitted).replace('[engine_step."vllm/mi355x"]\ntau_s = ', '[engine_step."vllm/mi355x"]\ntau_s = -')
    with pytest.raises(CatalogError, match=r"engine_step\.vllm/mi355x\.tau_s"):
        _parse_fitted(tomllib.loads(text), "fitted.toml")
