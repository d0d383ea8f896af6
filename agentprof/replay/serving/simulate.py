"""The driver of the serving simulation: one system's configuration passed, as immutable values, through the steps

overflow (the plan as the client sends it) → deployment (settings, instance size) → layout (attention layout,
pools, drafter, step costs) → run (the engine) → metrics (the ``serving`` object) → why,

each a module that takes its inputs and returns a value, never calling back into the driver or a later step.
Where ``auto`` simulates both attention layouts, the layout step picks between the two runs; the levers of a slow
run are configurations the levers module names, which the driver runs through the same steps and hands back for
their rows. Each simulated configuration enters each step module at most once (tests/replay/serving/test_simulate.py
counts it on a report).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from agentprof.catalog import CatalogError
from agentprof.catalog.serving import ServingCatalog, load_serving
from agentprof.errors import AgentprofError
from agentprof.replay.context import context_tokens
from agentprof.replay.serving import deployment, layout, levers, metrics, overflow, run, why
from agentprof.replay.serving.config import ServingConfig
from agentprof.replay.serving.scheduler import EngineResult
from agentprof.replay.serving.sessions import SessionPlan
from agentprof.replay.systems import Resolved

__all__ = ["Request", "ServingConfig", "ServingRun", "simulate"]


@dataclass(frozen=True)
class Request:
    """One configuration to simulate: the recorded sessions, the system as the caller resolved it, the settings and
    the serving catalog (budgets, power, prices)."""

    plan: SessionPlan
    resolved: Resolved
    config: ServingConfig
    catalog: ServingCatalog


@dataclass(frozen=True)
class ServingRun:
    """One system's simulation: the engine's raw result, the ``serving`` object and per-call durations."""

    engine: EngineResult
    serving: dict[str, Any]
    call_s: np.ndarray  # per plan call: replayed duration in its first instance (NaN if not simulated)
    notes: list[str]
    call_req: np.ndarray  # per plan call: the engine's request of its first instance (-1 if not simulated)
    pre_req: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per plan call: the request of the summarizing call a compaction sent just before it (-1 where none)."""


def simulate(plan: SessionPlan, r: Resolved, cfg: ServingConfig, cat: ServingCatalog | None = None) -> ServingRun:
    """Simulate ``plan``'s sessions served by ``r`` at ``cfg.concurrency`` (see the module docstring)."""
    cfg.check()
    req = Request(plan, r, cfg, cat or load_serving())
    ran, deployed = _configuration(req)
    d = ran.serving
    if cfg.levers and not cfg.disagg:
        tries = levers.variants(r, deployed, d)
        if tries is not None:  # slow: each lever from ``r`` as the caller resolved it, on the deployed settings
            results: list[tuple[str, dict[str, Any] | Exception]] = []
            for flag, c in tries:
                try:
                    results.append((flag, _configuration(replace(req, config=c))[0].serving))
                except (CatalogError, AgentprofError) as e:  # e.g. DP's replicated weights do not fit
                    results.append((flag, e))
            d = {**d, "levers": levers.table(r, d, results)}
    d = {**d, "why": why.why(d)}
    return ServingRun(ran.engine, d, ran.call_s, ran.notes, ran.call_req, ran.pre_req)


def _configuration(req: Request) -> tuple[ServingRun, ServingConfig]:
    """One configuration through the steps up to its ``serving`` object (with its deployment), and the settings
    as the deployment resolved them."""
    r, cfg, plan = req.resolved, req.config, req.plan
    context = context_tokens(r.model)
    sent = overflow.fit(plan, context, math.inf, cfg.overflow, cfg.concurrency)  # sized for what the client sends
    dep = deployment.deploy(r, cfg, sent.kv_demand_tokens)
    lay = layout.lay_out(dep, sent.kv_demand_tokens, req.catalog)
    runs = []
    for v in lay.variants:
        pool = math.inf if dep.config.hbm_unbounded else v.pool_tokens
        # a replica's pool smaller than the model's window narrows what is served (compacted again)
        served = (sent if pool >= sent.overflow.window_tokens
                  else overflow.fit(plan, context, pool, cfg.overflow, cfg.concurrency))
        ran = run.run(served.overflow, v, dep.config)
        d, call_s, call_req, pre_req = metrics.measure(plan, served, v, ran, dep.config, req.catalog, dep.size_note)
        runs.append(ServingRun(ran.engine, d, call_s, d["notes"], call_req, pre_req))
    best = runs[0]
    if len(runs) == 2:  # auto ran data- and tensor-parallel: keep the one whose sessions finish faster
        i, attention = layout.settle(lay, runs[0].serving, runs[1].serving, cfg.concurrency)
        best = replace(runs[i], serving={**runs[i].serving, "attention": attention})
    return replace(best, serving={**best.serving, "deployment": dep.record}), dep.config
