"""The layout step: how a deployed system's instances run one configuration — attention layout (tensor- or
data-parallel, weighing the sessions' KV: :mod:`agentprof.replay.serving.dpattention`), disaggregated pools,
the drafter, step costs and prefill budget — as the variants the engine runs (both layouts where ``auto`` lets the
sessions' tasks decide), and the pick between those two once they ran."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agentprof.catalog import CatalogError
from agentprof.catalog.serving import ServingCatalog
from agentprof.replay.serving.config import ServingConfig, pool_layout
from agentprof.replay.serving.deployment import Deployed
from agentprof.replay.serving.dpattention import (
    Capacity,
    Layout,
    RankStepCost,
    auto_reason,
    choose,
    compared,
    dp_resolved,
    need_text,
    pick_layout,
    rank_budget,
)
from agentprof.replay.serving.pools import Pools
from agentprof.replay.serving.stepcost import StepCost
from agentprof.replay.systems import Resolved


@dataclass(frozen=True)
class Variant:
    """One configuration as the engine runs it: the system resolved for its layout (drafter included), its step
    costs, replicas and prefill budget, and the KV one replica holds (the prefill worker's where smaller)."""

    resolved: Resolved
    layout: Layout
    cost: StepCost
    pools: Pools | None
    instances: int
    replicas: int
    accelerators: int
    budget_tokens: float
    budget_source: str
    pool_tokens: float
    speculative: dict[str, Any] | None


@dataclass(frozen=True)
class Layouts:
    """The layout step's output: one variant, or data- and tensor-parallel (in that order) when ``auto`` simulates
    both; then ``capacity`` holds what the KV rule weighed."""

    variants: tuple[Variant, ...]
    capacity: Capacity | None = None


def pools_for(r: Resolved, layout: str) -> tuple[Resolved, Pools, int]:
    """The decode side (``r``'s model on the system's accelerator at the decode worker's GPU count), the pools
    and the accelerators they use, for agent sessions on disaggregated pools."""
    from dataclasses import replace

    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import borrowed_handoff, load_fitted
    from agentprof.replay.points import PointKey
    from agentprof.replay.serving.kvdtype import carry_kv
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


def capacity(kv_demand_tokens: float, tp: Resolved, dp: Resolved, cfg: ServingConfig) -> Capacity:
    """The sessions' KV demand against the tokens each layout's system holds (HBM pools, plus the CPU and disk
    tiers)."""
    inst = tp.instances
    tiers = (cfg.cpu_bytes + cfg.disk_bytes) / max(tp.dep.kv_token_bytes, 1.0)
    dp_pool = RankStepCost(dp).pool_tokens * dp.dep.gpus * inst
    tp_pool = (math.inf if cfg.hbm_unbounded else StepCost.of(tp).pool_tokens * inst)
    return Capacity(kv_demand_tokens, tp_pool, dp_pool, tiers)


def lay_out(deployed: Deployed, kv_demand_tokens: float, cat: ServingCatalog) -> Layouts:
    """The layout step: the variants to run for ``deployed`` (see the module docstring)."""
    r, cfg = deployed.resolved, deployed.config
    pools, gpus = None, r.system.count
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
                cap = capacity(kv_demand_tokens, r, rd, cfg)
                layout = choose(r, "auto", cfg.concurrency, cap=cap)
                if layout.mode == "dp":  # only DP's pool holds the KV: run both, keep what the sessions get
                    return Layouts((_variant(rd, layout, None, gpus, cfg, cat),
                                    _variant(r, Layout("tp", 1, layout.reason), None, gpus, cfg, cat)), cap)
            if layout.mode == "dp":
                r = rd
                layout = Layout("dp", layout.ranks, f"{layout.reason}; parameters {r.level}: {r.calibration}")
    return Layouts((_variant(r, layout, pools, gpus, cfg, cat),))


def _variant(r: Resolved, layout: Layout, pools: Pools | None, gpus: int, cfg: ServingConfig,
             cat: ServingCatalog) -> Variant:
    """``r`` (already resolved for ``layout``) as the engine runs it; the drafter, when asked for, added here, so
    every re-resolution the simulation makes carries it."""
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
    return Variant(r, layout, cost, pools, instances, replicas, gpus, budget, budget_src, pool, spec)


def settle(layouts: Layouts, dp: dict[str, Any], tp: dict[str, Any], concurrency: int) -> tuple[int, dict[str, Any]]:
    """After both layouts ran: the variant whose sessions finish their tasks faster (its index) and its
    ``serving.attention`` with the reason and what each layout gave."""
    if layouts.capacity is None or len(layouts.variants) != 2:
        raise ValueError("settle takes the two runs of a layout step that chose to simulate both layouts")
    best = pick_layout(tp, dp)
    reason = auto_reason(need_text(layouts.capacity, concurrency), tp, dp, best)
    if best == "dp":
        rd = layouts.variants[0].resolved
        reason += f"; parameters {rd.level}: {rd.calibration}"
    chosen = dp if best == "dp" else tp
    return (0 if best == "dp" else 1), {**chosen["attention"], "reason": reason,
                                         "compared": {k: compared(v) for k, v in (("tp", tp), ("dp", dp))}}
