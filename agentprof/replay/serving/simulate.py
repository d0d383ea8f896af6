"""Run the serving simulation of a trace's sessions on one system: plan, step costs, engine, metrics."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from agentprof.catalog import CatalogError
from agentprof.catalog.serving import ServingCatalog, load_serving
from agentprof.errors import AgentprofError
from agentprof.replay.serving.deployment import (
    check_deployment,
    deployed,
    deployment_for,
    describe,
    takes_cache,
)
from agentprof.replay.serving.dpattention import (
    Capacity,
    Layout,
    RankStepCost,
    auto_reason,
    check_mode,
    choose,
    compared,
    dp_resolved,
    need_text,
    pick_layout,
    rank_budget,
)
from agentprof.replay.serving.kvdtype import carry_kv, check_kv_dtype, kv_dtype_name
from agentprof.replay.serving.levers import levers
from agentprof.replay.serving.metrics import pcts, serving_dict, why, window
from agentprof.replay.serving.overflow import Overflow, check_policy, served_window
from agentprof.replay.serving.overflow import apply as apply_overflow
from agentprof.replay.serving.pools import Pools
from agentprof.replay.serving.scheduler import ROUTERS, Engine, EngineResult, Options
from agentprof.replay.serving.sessions import SessionPlan
from agentprof.replay.serving.sizing import serving_gpus
from agentprof.replay.serving.stepcost import StepCost
from agentprof.replay.systems import Resolved


@dataclass
class ServingConfig:
    """User-facing settings of the simulation (CLI flags of ``replay`` and ``capacity``)."""

    concurrency: int = 1
    router: str = "prefix-affinity"
    cpu_bytes: float = 0.0
    disk_bytes: float = 0.0
    ttl_s: float | None = None
    cap_wait_s: float | None = None
    arrival_rate_per_h: float | None = None
    scope: str = "global"
    hbm_unbounded: bool = False
    prefix_cache: bool = True  # False: --cache-policy none, every prompt is prefilled in full
    seed: int = 0
    disagg: str | None = None
    """Disaggregated pools ``p{workers}x{gpus}-d{workers}x{gpus}`` (e.g. ``p1x4-d1x8``: one 4-GPU prefill
    worker, one 8-GPU decode worker of the system's accelerator), each sized and calibrated as the system's
    resolution does for that GPU count; None: the system's aggregated replicas."""
    attention: str = "auto"
    """Attention layout of the aggregated replicas: ``tp`` (tensor-parallel, the single-session replay's), ``dp``
    (data-parallel attention ranks, :mod:`agentprof.replay.serving.dpattention`) or ``auto`` (where more than one
    session shares an MLA model on a framework that runs DP and only DP's KV pool holds the sessions' prompts, both
    layouts simulated and the one whose sessions finish their tasks faster kept; tp otherwise:
    :func:`agentprof.replay.serving.dpattention.choose`)."""
    kv_dtype: str = "auto"
    """KV-cache element type: ``auto`` (the catalog's as-deployed figure), ``bf16`` or ``fp8``
    (:mod:`agentprof.replay.serving.kvdtype`)."""
    levers: bool = False
    """When the run is slow (TTFT p50 of 10 s or more), also simulate the deployment
    levers that would change it (:mod:`agentprof.replay.serving.levers`) and report their figures; on in
    ``replay --concurrency`` and with ``report --serving-levers`` (at the panel's largest concurrency), off in the
    capacity search and by default (each lever is one more simulation)."""
    deployment: str = "agentic"
    """``agentic`` (the CPU tier, KV dtype and HBM share of the system's validated agentic recipe, else the recipes'
    CPU tier as an estimate) or ``benchmark`` (the catalog's as-benchmarked settings, HBM only):
    :mod:`agentprof.replay.serving.deployment`."""
    cache_from_deployment: bool = True
    """False when the cache tiers were given explicitly (``--cache-policy``, even ``prefix``): the deployment's CPU
    tier is then not added."""
    speculative: str = "none"
    """Speculative decoding with the model's catalogued drafter (``eagle3``; :mod:`agentprof.replay.speculative`),
    applied to every variant the simulation runs (each instance size and attention layout); not with ``disagg``."""
    overflow: str = "compact"
    """What the client does with a call beyond the served window (the stand-in's context, or one replica's KV
    pool): ``compact``, ``reject`` or ``stand-in`` (:mod:`agentprof.replay.serving.overflow`)."""
    sessions: int | None = None
    """Session instances the closed loop runs (the recorded sessions cycled, copies sharing no cache blocks);
    None: each recorded session once, or one per slot when the concurrency is larger."""
    ramp_s: float | None = None
    """Seconds between the starts of the closed loop's first sessions; None: the mean recorded session time
    divided by the concurrency, so sessions start spread over their phases as in a steady state instead of
    all cold at once."""

    def check(self) -> None:
        if self.concurrency < 1:
            raise AgentprofError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.router not in ROUTERS:
            raise AgentprofError(f"unknown router {self.router!r}: expected {' or '.join(ROUTERS)}")
        if self.ttl_s is not None and self.ttl_s <= 0:
            raise AgentprofError(f"cache TTL must be positive, got {self.ttl_s}")
        if self.arrival_rate_per_h is not None and self.arrival_rate_per_h <= 0:
            raise AgentprofError(f"--arrival-rate must be positive sessions/hour, got {self.arrival_rate_per_h}")
        if self.disagg is not None:
            pool_layout(self.disagg)
        check_mode(self.attention)
        check_kv_dtype(self.kv_dtype)
        check_deployment(self.deployment)
        check_policy(self.overflow)
        if self.sessions is not None and self.sessions < 1:
            raise AgentprofError(f"--sessions must be at least 1, got {self.sessions}")


def pool_layout(text: str) -> tuple[int, int, int, int]:
    """(prefill workers, GPUs each, decode workers, GPUs each) of ``p1x4-d2x8``; a clear error otherwise."""
    m = re.fullmatch(r"p(\d+)x(\d+)-d(\d+)x(\d+)", text.strip())
    if not m or min(int(x) for x in m.groups()) < 1:
        raise AgentprofError(f"cannot read pools {text!r}: expected p{{workers}}x{{gpus}}-d{{workers}}x{{gpus}}, "
                             "e.g. p1x4-d1x8")
    a, b, c, d = (int(x) for x in m.groups())
    return a, b, c, d


def pools_for(r: Resolved, layout: str) -> tuple[Resolved, Pools, int]:
    """The decode side (``r``'s model on the system's accelerator at the decode worker's GPU count), the pools
    and the accelerators they use, for agent sessions on disaggregated pools."""
    from dataclasses import replace

    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import borrowed_handoff, load_fitted
    from agentprof.replay.points import PointKey
    from agentprof.replay.systems import resolve

    npw, gp, ndw, gd = pool_layout(layout)
    cat = load_catalog()
    accept = r.params.accept
    pre = carry_kv(resolve(r.system, r.model, cat, gpus=gp, accept=accept), r)
    dec = carry_kv(resolve(r.system, r.model, cat, gpus=gd, accept=accept), r)
    # the decode engine's hand-off (decode steps before the first token), as the fitted disaggregated stacks
    # of this model on this engine take it (the prior where none was fitted)
    acc = r.system.accelerator
    key = PointKey(acc.family, acc.key, dec.framework, r.model.key, dec.precision, "none", layout)
    hand = borrowed_handoff(load_fitted(), key)
    dec = replace(dec, params=dec.params.with_(wait_steps=dec.params.wait_steps + hand))
    pools = Pools.of(StepCost.of(pre), StepCost.of(dec), npw, ndw)
    return dec, pools, npw * gp + ndw * gd


def kv_demand(plan: SessionPlan, concurrency: int) -> float:
    """Tokens of KV ``concurrency`` sessions keep between their calls: each its mean simulated prompt."""
    sim = np.isnan(plan.fixed_s)
    return concurrency * (float(plan.input_tokens[sim].mean()) if sim.any() else 0.0)


def _capacity(plan: SessionPlan, tp: Resolved, dp: Resolved, cfg: ServingConfig) -> Capacity:
    """KV demand of ``cfg.concurrency`` sessions (each its mean prompt: the prefix it keeps between calls) and the
    tokens each layout's system holds (HBM pools, plus the CPU and disk tiers)."""
    inst = tp.instances
    tiers = (cfg.cpu_bytes + cfg.disk_bytes) / max(tp.dep.kv_token_bytes, 1.0)
    dp_pool = RankStepCost(dp).pool_tokens * dp.dep.gpus * inst
    tp_pool = (math.inf if cfg.hbm_unbounded else StepCost.of(tp).pool_tokens * inst)
    return Capacity(kv_demand(plan, cfg.concurrency), tp_pool, dp_pool, tiers)


@dataclass
class ServingRun:
    """One system's simulation: the engine's raw result, the ``serving`` object and per-call durations."""

    engine: EngineResult
    serving: dict[str, Any]
    call_s: np.ndarray  # per plan call: replayed duration in its first instance (NaN if not simulated)
    notes: list[str] = field(default_factory=list)


def simulate(plan: SessionPlan, r: Resolved, cfg: ServingConfig, cat: ServingCatalog | None = None) -> ServingRun:
    """Simulate ``plan``'s sessions served by ``r`` at ``cfg.concurrency`` (see the package docstring)."""
    cfg.check()
    cat = cat or load_serving()
    asked, given = r, cfg
    recorded = plan
    plan = _overflowed(plan, r, math.inf, cfg.overflow).plan  # sized for what the client sends
    dep = deployment_for(r, cfg.deployment)
    from_dep = takes_cache(cfg)
    kv = dep.kv_for(cfg.kv_dtype)
    r = deployed(r, dep, cfg.kv_dtype)
    pools, gpus = None, r.system.count
    size_note = ""
    if not cfg.disagg:  # many sessions on a "fit" system: instances sized to the KV the tiers leave to HBM
        fixed = (dep.cpu_bytes_fixed or 0.0) if from_dep else cfg.cpu_bytes + cfg.disk_bytes
        per_inst = dep.cpu_bytes_per_instance if from_dep and dep.cpu_bytes_fixed is None else 0.0
        kvb = r.dep.kv_token_bytes
        g, size_note = serving_gpus(r, cfg.concurrency, 0.0 if cfg.hbm_unbounded else
                                    kv_demand(plan, cfg.concurrency) - fixed / kvb, per_inst / kvb)
        if g != r.dep.gpus:
            from agentprof.catalog.hardware import load_catalog
            from agentprof.replay.systems import resolve

            r = carry_kv(resolve(r.system, r.model, load_catalog(), r.fitted, accept=r.params.accept, gpus=g), r)
    if from_dep:
        cfg = replace(cfg, cpu_bytes=dep.cpu_bytes(r.instances),
                      cache_from_deployment=False)
    cfg = replace(cfg, kv_dtype=kv)
    dinfo = describe(dep, given, r, cfg.cpu_bytes, from_dep)
    layout = choose(r, cfg.attention, cfg.concurrency, disagg=bool(cfg.disagg))
    if cfg.disagg:
        r, pools, gpus = pools_for(r, cfg.disagg)
    if layout.mode == "dp":
        try:
            rd = dp_resolved(r)
        except CatalogError as e:
            if cfg.attention == "dp":
                raise
            layout = Layout("tp", 1, f"auto: tensor-parallel attention, data-parallel does not fit ({e})")
        else:
            if cfg.attention == "auto":  # weigh the sessions' KV against what each layout holds
                cap = _capacity(plan, r, rd, cfg)
                layout = choose(r, "auto", cfg.concurrency, cap=cap)
                if layout.mode == "dp":  # only DP's pool holds the KV: run both, keep what the sessions get
                    run_dp = _run(recorded, rd, layout, cfg, cat, None, gpus, size_note)
                    tp = Layout("tp", 1, layout.reason)
                    run_tp = _run(recorded, r, tp, cfg, cat, None, gpus, size_note)
                    best = pick_layout(run_tp.serving, run_dp.serving)
                    run = run_dp if best == "dp" else run_tp
                    a = run.serving["attention"]
                    a["reason"] = auto_reason(need_text(cap, cfg.concurrency), run_tp.serving, run_dp.serving, best)
                    a["compared"] = {k: compared(v.serving) for k, v in (("tp", run_tp), ("dp", run_dp))}
                    if best == "dp":
                        a["reason"] += f"; parameters {rd.level}: {rd.calibration}"
                    return _finish(recorded, asked, cfg, cat, run, dinfo)
            if layout.mode == "dp":
                r = rd
    run = _run(recorded, r, layout, cfg, cat, pools, gpus, size_note)
    if layout.mode == "dp":
        run.serving["attention"]["reason"] += f"; parameters {r.level}: {r.calibration}"
    return _finish(recorded, asked, cfg, cat, run, dinfo)


def _overflowed(plan: SessionPlan, r: Resolved, pool_tokens: float, policy: str) -> Overflow:
    """``plan`` as the client sends it to ``r`` (:mod:`agentprof.replay.serving.overflow`): calls beyond the
    model's window or ``pool_tokens`` handled by ``policy`` (``stand-in``: the replay already picked a stand-in
    that covers the trace; what passes the pool is compacted)."""
    field_ = r.model.fields.get("context")
    win, basis = served_window(field_.value if field_ is not None else None, pool_tokens)
    return apply_overflow(plan, win, basis, "compact" if policy == "stand-in" else policy)


def _without(eng: EngineResult, served: SessionPlan, ov: Overflow, concurrency: int,
             open_loop: bool) -> dict[str, Any]:
    """The headline figures over the sessions that never passed the served window (same run)."""
    sess_of = np.repeat(np.arange(served.n_sessions), np.diff(served.start))
    keep_req = ~ov.beyond[sess_of[eng.req_call]] if eng.req_call.size else np.zeros(0, dtype=bool)
    keep_inst = ~ov.beyond[eng.sess_plan]
    task = (eng.sess_end - eng.sess_start)[keep_inst & ~eng.sess_failed]
    win = window(eng, concurrency, open_loop, keep_inst)
    n = win["tasks"]
    return {"sessions": int((~ov.beyond).sum()), "ttft_s": pcts((eng.first_t - eng.issue_t)[keep_req]),
            "task_s": pcts(task[np.isfinite(task)], (50, 90)),
            "tasks_per_hour": n * 3600.0 / win["length_s"] if n and win["length_s"] > 0 else None}


def _finish(plan: SessionPlan, r: Resolved, cfg: ServingConfig, cat: ServingCatalog, run: ServingRun,
            deployment: dict[str, Any]) -> ServingRun:
    """The deployment it ran, the levers that would change a slow run (each simulated from ``r`` as the caller
    resolved it, on ``cfg`` as the deployment resolved it), and the ``why`` sentence over everything."""
    d = run.serving
    d["deployment"] = deployment
    if cfg.levers and not cfg.disagg:
        lv = levers(r, cfg, d, lambda c: simulate(plan, r, c, cat).serving)
        if lv:
            d["levers"] = lv
    d["why"] = why(d)
    return run


def _run(plan: SessionPlan, r: Resolved, layout: Layout, cfg: ServingConfig, cat: ServingCatalog,
         pools: Pools | None, gpus: int, size_note: str) -> ServingRun:
    """One simulation of ``r`` in ``layout`` (``r`` already resolved for it; the drafter, when asked for, added
    here, so every re-resolution the simulation makes carries it)."""
    spec = None
    if cfg.speculative != "none":
        from agentprof.replay.speculative import with_speculative

        if pools is not None:
            raise CatalogError("--speculative is not simulated with disaggregated pools (--pools)")
        r, spec = with_speculative(r, cfg.speculative)
    instances = r.instances
    if layout.mode == "dp":
        cost: StepCost = RankStepCost(r)
        replicas = instances * layout.ranks
    else:
        cost = StepCost.of(r)
        replicas = (pools.n_prefill + pools.n_decode) if pools else instances
    budget, budget_src = cat.budget_tokens(r.framework.split("-")[-1] if r.framework not in cat.budget
                                           else r.framework)
    if layout.mode == "dp":
        budget, budget_src = rank_budget(r.framework, budget, layout.ranks)
    pool = min(cost.pool_tokens, pools.prefill.pool_tokens) if pools else cost.pool_tokens
    recorded = plan
    ov = _overflowed(plan, r, math.inf if cfg.hbm_unbounded else pool, cfg.overflow)
    plan = ov.plan
    per_block = cost.tier_token_bytes * plan.block_size
    ramp = cfg.ramp_s if cfg.ramp_s is not None else float(np.mean(plan.recorded_s)) / cfg.concurrency
    copies = max(math.ceil(max(cfg.concurrency, cfg.sessions or 0) / max(plan.n_sessions, 1)), 1)
    opt = Options(concurrency=cfg.concurrency, replicas=replicas, budget_tokens=budget, router=cfg.router,
                  cpu_blocks=cfg.cpu_bytes / per_block if cfg.cpu_bytes else 0.0,
                  disk_blocks=cfg.disk_bytes / per_block if cfg.disk_bytes else 0.0,
                  hbm_blocks=math.inf if cfg.hbm_unbounded else (None if cfg.prefix_cache else 0.0), ttl_s=cfg.ttl_s,
                  arrival_rate_per_h=cfg.arrival_rate_per_h, seed=cfg.seed, copies=copies,
                  ramp_s=ramp, lockstep=layout.ranks, sessions=cfg.sessions,
                  failed=ov.failed if ov.failed.any() else None)
    eng = Engine(plan, cost, opt, pools).run()
    # lockstep ranks: an instance is busy (every rank steps, the idle ones on empty batches) while any rank is
    util = (sum(eng.group_busy_s) / (eng.makespan_s * len(eng.group_busy_s))
            if eng.group_busy_s and eng.makespan_s > 0 else None)
    d = serving_dict(plan, eng, cfg.concurrency, r.system.key, replicas, cat, cfg.arrival_rate_per_h is not None,
                     gpus / max(r.system.count, 1), utilization=util)
    d["attention"] = {**layout.describe(), "instances": instances, "accelerators_per_instance": r.dep.gpus,
                      "kv_pool_tokens_per_system": None if pools else cost.pool_tokens * replicas,
                      "kv_dtype": kv_dtype_name(r), "kv_bytes_per_token": r.dep.kv_token_bytes,
                      "kv_source": r.kv_source, "kv_demand_tokens": kv_demand(plan, cfg.concurrency),
                      "calibration": r.calibration, "calibration_level": r.level,
                      "lockstep_wait_s": eng.lockstep_wait_s}
    if size_note:
        d["attention"]["instance_size"] = size_note
    d["beyond_context"] = ov.summary(cfg.overflow)
    if ov.beyond.any():
        d["beyond_context"]["without"] = _without(eng, plan, ov, cfg.concurrency, cfg.arrival_rate_per_h is not None)
    if pools:
        d["pools"] = {"layout": cfg.disagg, "prefill_workers": pools.n_prefill,
                      "prefill_gpus": pools.prefill.dep.gpus, "decode_workers": pools.n_decode,
                      "decode_gpus": r.dep.gpus, "accelerators": gpus, "kv_link": pools.link,
                      "kv_link_gb_s": pools.link_bw / 1e9,
                      "handoff_s": pcts(eng.handoff_s + pools.t_req_s),
                      "queue_wait_mean_s": {k: v["wait_s"] / max(v["entries"], 1)
                                            for k, v in eng.queue_by_role.items()}}
    notes = list(plan.notes)
    if copies > 1:
        notes.append(f"{plan.n_sessions} recorded session(s) cycled to run {eng.sess_start.size} session(s) in "
                     f"{cfg.concurrency} concurrent slots (copies share no cache blocks)")
    if eng.oversize:
        notes.append(f"{eng.oversize} request(s) needed more KV than the whole pool and ran alone")
    if spec:
        d["speculative"] = spec
    d["budget_tokens"] = budget
    d["budget_source"] = budget_src
    d["kv_pool_tokens"] = cost.pool_tokens
    d["host_link"] = {"key": r.system.link.key, "gb_s": r.system.link.bw.value / 1e9}
    d["router"] = cfg.router
    d["ramp_s"] = ramp
    d["notes"] = notes
    # per plan call, its first instance's replayed duration (issue -> last token)
    call_s = np.full(recorded.n_calls, np.nan)
    dur = eng.done_t - eng.issue_t
    seen = np.zeros(recorded.n_calls, dtype=bool)
    for c, t in zip(ov.source[eng.req_call].tolist(), dur.tolist(), strict=True):
        if c >= 0 and not seen[c]:
            seen[c] = True
            call_s[c] = t
    return ServingRun(eng, d, call_s, notes)
