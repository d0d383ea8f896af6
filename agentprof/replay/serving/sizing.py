"""How many accelerators an instance spans when many sessions share a system, and how many instances would hold
the sessions' KV.

A ``tp = "fit"`` system (Jalapeño) resolves a model on the fewest accelerators that hold its weights: the
single-session replay's latency layout. Many agent sessions are bound by the KV their contexts keep, not by
one call's speed; under tensor-parallel attention an MLA latent is copied on every rank, so an instance holds
one accelerator's free HBM of KV, ``HBM·mem_util − weights/g``, which grows with the instance's size ``g`` as the
weights spread thinner, while the system holds ``count/g`` instances. Above one session the simulation sizes the
instances to the sessions' KV (concurrency x their mean prompt): the smallest instance size (a power of two from the
fewest that fit to the system's count) whose instances hold it together — more instances prefill more prompts at
once — else the size whose instances hold the most; every accelerator of the system is used either way. Kimi K2.5 on
8 Jalapeño chips: two instances of 4 (1.31M tokens of BF16 KV) for 8 sessions (~1.0M), one of 8 (1.71M) for 50
(~6.3M). Docs: docs/DEVICE_MODEL.md §10.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentprof.replay.systems import Resolved


def system_pool_tokens(r: Resolved, gpus: int) -> float:
    """Tokens of KV the system's instances of ``gpus`` accelerators hold together under tensor-parallel
    attention (0 when the weights do not fit)."""
    from dataclasses import replace

    dep = replace(r.dep, gpus=gpus, dp_attention=False)
    return (r.system.count // gpus) * dep.kv_pool_tokens_per_gpu(r.system.mem_util)


def serving_gpus(r: Resolved, concurrency: int, demand: float = float("inf"),
                 tier_per_instance: float = 0.0) -> tuple[int, str]:
    """(accelerators per instance, why) for ``concurrency`` sessions keeping ``demand`` tokens of KV: as resolved
    for one session or a ``tp = "max"`` system; for a ``tp = "fit"`` system above one session the smallest size
    whose instances hold ``demand`` together (with ``tier_per_instance`` tokens of lower tiers each), else the one
    whose instances hold the most."""
    g0 = r.dep.gpus
    if concurrency <= 1 or r.system.tp != "fit":
        return g0, ""
    sizes = []
    g = g0
    while g <= r.system.count:
        sizes.append(g)
        g *= 2
    pools = {g: system_pool_tokens(r, g) + tier_per_instance * (r.system.count // g) for g in sizes}
    holds = [g for g in sizes if pools[g] >= demand]
    best = holds[0] if holds else max(sizes, key=lambda g: (pools[g], -g))
    if best == g0:
        return g0, ""
    m = 1e6
    text = ", ".join(f"{r.system.count // g} x {g}: {pools[g] / m:.2f}M" for g in sizes)
    what = "the smallest whose instances hold it" if holds else "none holds it; the size whose instances hold the most"
    why = (f"{r.system.key} serves {concurrency} sessions (~{demand / m:.2f}M tokens of KV) as "
           f"{r.system.count // best} instance(s) of {best} accelerators, {what} ({text} tokens"
           f"{' in HBM and the CPU tier' if tier_per_instance else ''}; one session runs on "
           f"the fewest that hold the weights, {g0})")
    return best, why


def instances_to_hold(demand_tokens: float, pool_per_instance: float) -> int | None:
    """Instances whose HBM pools hold ``demand_tokens`` of KV (None when an instance holds none)."""
    if pool_per_instance <= 0 or not math.isfinite(pool_per_instance):
        return None
    return max(math.ceil(demand_tokens / pool_per_instance), 1)
