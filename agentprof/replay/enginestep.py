"""The per-step overhead of a serving engine on an accelerator where the fixed-sequence points hold none of it.

The calibration's AMD points are SGLang and ATOM; the AgentX runs on MI355X are vLLM. A model there borrows the
per-step terms of another engine's group (:meth:`~agentprof.replay.calibration.Fitted.lookup`), and vLLM's ROCm
decode path is not SGLang's or ATOM's: Kimi K2.5's decode ITL regressed from v0.19 ([S69]); MiniMax M2.5's
one-user ITL is 1.7x what ATOM's terms give, with no source that says why. Single-user AgentX runs measure that stack's decode step alone
(no other request, no prefill riding it): each such point's ITL is the step's fixed overhead plus the bytes and
FLOPs the cost model already prices, so the overhead's ``tau`` and ``kappa`` (``layers·tau·(1 + kappa·fanout)``,
:func:`~agentprof.replay.points.fixed_overhead`) are fitted on the difference (least squares on log ITL, from the
accelerator's fitted values; ``kappa`` keeps the accelerator's where the points span one GPU count).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import polars as pl
from scipy.optimize import least_squares

from agentprof.catalog.hardware import HardwareCatalog
from agentprof.catalog.kvcache import engine
from agentprof.replay.agentic import deployed_points, fit_rows, row_mem_util
from agentprof.replay.calibration import PRIOR_MEAN, Fitted, engine_step_key
from agentprof.replay.costmodel import call_times
from agentprof.replay.points import fixed_overhead


def _own_engine_groups(fitted: Fitted) -> set[str]:
    """``engine/hardware`` of every calibrated group (the pairs the fixed-sequence points measured)."""
    return {engine_step_key(engine(e.attrs.get("framework", "")), e.attrs.get("hardware", ""))
            for e in fitted.entries["group"].values()}


def decode_rows(frames: Iterable[pl.DataFrame], fitted: Fitted, cat: HardwareCatalog) -> pl.DataFrame:
    """The healthy one-user AgentX points of engine/accelerator pairs the fixed-sequence points lack: the pair
    (``name``), the stack (accelerator, model, precision, TP), layers and GPUs, the measured ITL and the ITL the
    cost model gives without the fixed overhead (``rest_s``)."""
    bare = dataclasses.replace(fitted, engine_steps={})
    own = _own_engine_groups(bare)
    rows = []
    for df in frames:
        one = fit_rows(df).filter(pl.col("conc") == 1)
        for r, hw, dep, p, _ in deployed_points(one, bare, cat, bare.attn_eff, bare.attn_eff_by_accelerator,
                                                by_attention=bare.attn_eff_by_attention):
            name = engine_step_key(engine(str(r["framework"])), hw)
            out = float(r["mean_output_tokens_actual"])
            if name in own or out < 2:
                continue
            inp = np.array([float(r["mean_input_tokens"])])
            t = call_times(dep, p.with_(t_fixed_s=0.0), inp, r["server_gpu_cache_hit_rate"] * inp, np.array([out]),
                           batch=1, mem_util=row_mem_util(r, hw, dep))
            rows.append({"name": name, "stack": f"{hw}/{dep.model.key}/{dep.precision}/tp{dep.gpus}",
                         "layers": dep.layers, "gpus": dep.gpus, "meas_itl": float(r["mean_itl"]),
                         "rest_s": float(t.decode_s[0]) / (out - 1.0)})
    return pl.DataFrame(rows)


def _prior(fitted: Fitted, hw: str) -> tuple[float, float]:
    """The accelerator's fitted ``(tau, kappa)``, every group's prior in the hierarchy; else the top prior's."""
    e = fitted.entries["hardware"].get(hw)
    if e is None:
        return PRIOR_MEAN["tau_s"], PRIOR_MEAN["kappa"]
    return e.param("tau_s"), e.param("kappa")


def fit_pair(rows: pl.DataFrame, prior_tau: float, prior_kappa: float) -> tuple[float, float]:
    """``(tau, kappa)`` minimizing the log error of the rows' ITL, from the priors; ``kappa`` stays at its prior
    where the rows span one GPU count (nothing measures the growth then)."""
    lay, g = rows["layers"].to_numpy(), rows["gpus"].to_numpy()
    rest, meas = rows["rest_s"].to_numpy(), rows["meas_itl"].to_numpy()
    free_kappa = len(set(g.tolist())) > 1

    def res(x: np.ndarray) -> np.ndarray:
        kappa = math.exp(x[1]) if free_kappa else prior_kappa
        return np.log((fixed_overhead(lay, math.exp(x[0]), kappa, g) + rest) / meas)

    x = least_squares(res, np.log([prior_tau, prior_kappa])[: 2 if free_kappa else 1]).x
    return float(math.exp(x[0])), float(math.exp(x[1])) if free_kappa else prior_kappa


def predicted_itl(rows: pl.DataFrame, tau: float, kappa: float) -> np.ndarray:
    return fixed_overhead(rows["layers"].to_numpy(), tau, kappa, rows["gpus"].to_numpy()) + rows["rest_s"].to_numpy()


def fit_engine_steps(frames: Iterable[pl.DataFrame], fitted: Fitted, cat: HardwareCatalog
                     ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per engine/accelerator pair without a calibrated group: ``{"vllm/mi355x": {tau_s, kappa, points, stacks,
    median_ape_itl, held_out_median_ape_itl}}``, the held-out error from each stack predicted by the others' fit
    (where there are two or more). The second value is the same in flat form for ``fitted.toml [agentic]``."""
    rows = decode_rows(frames, fitted, cat)
    steps: dict[str, dict[str, Any]] = {}
    info: dict[str, Any] = {}
    if not rows.height:
        return steps, info
    for (name,), g in sorted(rows.group_by("name"), key=lambda kv: str(kv[0][0])):
        prior_tau, prior_kappa = _prior(fitted, str(name).split("/", 1)[1])
        tau, kappa = fit_pair(g, prior_tau, prior_kappa)
        ape = np.abs(predicted_itl(g, tau, kappa) / g["meas_itl"].to_numpy() - 1.0)
        step: dict[str, Any] = {"tau_s": tau, "kappa": kappa, "points": g.height,
                                "stacks": ", ".join(sorted(set(g["stack"].to_list()))),
                                "median_ape_itl": float(np.median(ape))}
        held = []
        for stack in sorted(set(g["stack"].to_list())):
            other = g.filter(pl.col("stack") != stack)
            if other.height:
                t, k = fit_pair(other, prior_tau, prior_kappa)
                mine = g.filter(pl.col("stack") == stack)
                held.extend(np.abs(predicted_itl(mine, t, k) / mine["meas_itl"].to_numpy() - 1.0).tolist())
        if held:
            step["held_out_median_ape_itl"] = float(np.median(held))
        steps[str(name)] = step
        info.update({f"engine_step_{str(name).replace('/', '_')}_{k}": v for k, v in step.items()})
    return steps, info


def refit_with(fitted: Fitted, cat: HardwareCatalog, others: Iterable[pl.DataFrame]
               ) -> Callable[[pl.DataFrame], Fitted]:
    """A function of AgentX rows: ``fitted`` with its engine decode steps refitted on those rows and ``others``
    (other models' points), so a hold-out predicts an accelerator with a step its own points did not set
    (``agentic.held_out_predictions``)."""
    extra = list(others)

    def refit(rows: pl.DataFrame) -> Fitted:
        return dataclasses.replace(fitted, engine_steps=fit_engine_steps([rows, *extra], fitted, cat)[0])

    return refit
