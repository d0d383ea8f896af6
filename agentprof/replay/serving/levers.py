"""What would bring a slow serving run to seconds: the deployment levers, each simulated.

A run is slow when its median first token takes :data:`SLOW_TTFT_S` or more: typically the sessions' contexts
outgrow the KV pool, their prefixes are evicted between calls, every call recomputes its ~100K-token prompt and
the calls queue behind those recomputes (docs/DEVICE_MODEL.md §10). The levers are deployment settings an operator has, each with its source:

- ``--kv-dtype fp8`` (where the KV is stored in BF16): half the bytes per token, twice the contexts in HBM
  (:mod:`agentprof.replay.serving.kvdtype`);
- ``--cache-policy lmcache:cpu=2TB`` (where the CPU tier is smaller or there is none): LMCache keeps evicted prefixes in host DRAM and
  loads them over the host link (the AgentX LMCache recipe holds 2,500 GB [S47]; 2 TB is an 8-GPU server's DRAM);
- both together;
- ``--attention dp`` where tensor-parallel attention ran without ``auto`` weighing it: forced, or a framework not
  known to run DP attention (Jalapeño's undisclosed software: the figure says what it would give if it did);
- and, not simulated, how many instances would hold the sessions' KV in HBM at the run's KV dtype and at FP8.

Each lever is one more simulation of the same sessions (without levers of its own): :func:`variants` names the
configurations, the driver (:mod:`agentprof.replay.serving.simulate`) runs them, :func:`table` makes the rows. Only
slow runs pay for them, and only where asked (``replay --concurrency``; ``report --serving-levers``); the ``why``
sentence names them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentprof.replay.serving.dpattention import DP_FRAMEWORKS
from agentprof.replay.serving.sizing import instances_to_hold

if TYPE_CHECKING:
    from agentprof.replay.serving.config import ServingConfig
    from agentprof.replay.systems import Resolved

CPU_TIER_BYTES = 2e12
"""The CPU tier a lever adds: 2 TB of host DRAM (an 8-GPU server's; the AgentX LMCache recipe set 2,500 GB [S47])."""


SLOW_TTFT_S = 10.0
"""A median first token this slow asks for the levers: agents' calls are seconds apart, and a warm call (its
prefix cached) gets its first token in about a second on every system here."""


def slow(d: dict[str, Any]) -> bool:
    """The median call's first token takes :data:`SLOW_TTFT_S` or more."""
    t = d["ttft_s"]["p50"]
    return t is not None and t >= SLOW_TTFT_S


def _row(flag: str, s: dict[str, Any]) -> dict[str, Any]:
    a = s.get("attention") or {}
    h = s["hit_share"]
    return {"flag": flag, "ttft_p50_s": s["ttft_s"]["p50"], "ttft_p99_s": s["ttft_s"]["p99"],
            "queue_p50_s": s["queue_s"]["p50"], "hit_share_hbm": h["hbm"], "hit_share_cpu": h["cpu"],
            "tasks_per_hour": s.get("tasks_per_hour"), "layout": a.get("layout"), "kv_dtype": a.get("kv_dtype"),
            "kv_pool_tokens_per_system": a.get("kv_pool_tokens_per_system"), "slow": slow(s)}


def variants(r: Resolved, cfg: ServingConfig, d: dict[str, Any]) -> list[tuple[str, ServingConfig]] | None:
    """The levers of a slow run ``d`` (None when it is not), each a copy of ``cfg`` the driver simulates: ``r`` is
    the system as the caller resolved it, ``cfg`` the settings as the deployment resolved them."""
    if not slow(d):
        return None
    a = d.get("attention") or {}
    tries: list[tuple[str, ServingConfig]] = []
    bf16 = a.get("kv_dtype") == "bf16"
    if bf16:
        tries.append(("--kv-dtype fp8", replace(cfg, kv_dtype="fp8", levers=False)))
    if cfg.cpu_bytes < CPU_TIER_BYTES:  # none, or the deployment's smaller one
        tries.append(("--cache-policy lmcache:cpu=2TB", replace(cfg, cpu_bytes=CPU_TIER_BYTES, levers=False)))
        if bf16:
            tries.append(("--kv-dtype fp8 --cache-policy lmcache:cpu=2TB",
                          replace(cfg, kv_dtype="fp8", cpu_bytes=CPU_TIER_BYTES, levers=False)))
    # DP attention where auto did not weigh it: TP forced, or a framework not known to run DP (Jalapeño's)
    if (a.get("layout") == "tp" and r.model.attention == "mla" and int(a.get("accelerators_per_instance") or 1) > 1
            and (cfg.attention == "tp" or r.framework not in DP_FRAMEWORKS)):
        tries.append(("--attention dp", replace(cfg, attention="dp", levers=False)))
    return tries


def table(r: Resolved, d: dict[str, Any], results: list[tuple[str, dict[str, Any] | Exception]]) -> dict[str, Any]:
    """The ``levers`` object of the slow run ``d``: each lever's simulated figures (``results``: its ``serving``
    object, or the error that stopped it, e.g. DP's replicated weights not fitting), plus the instances that would
    hold the sessions' KV in HBM."""
    a = d.get("attention") or {}
    rows = [{"flag": flag, "error": str(got)} if isinstance(got, Exception) else _row(flag, got)
            for flag, got in results]
    demand = float(a.get("kv_demand_tokens") or 0.0)
    inst = int(a.get("instances") or 1)
    ranks = int(a.get("ranks_per_instance") or 1)
    pool = a.get("kv_pool_tokens_per_system")
    per_inst = float(pool) / inst if pool else 0.0
    g = int(a.get("accelerators_per_instance") or r.dep.gpus)
    n = instances_to_hold(demand, per_inst)
    hold = {"kv_demand_tokens": demand, "pool_per_instance_tokens": per_inst, "accelerators_per_instance": g,
            "layout": a.get("layout"), "ranks_per_instance": ranks, "kv_dtype": a.get("kv_dtype"),
            "instances": n, "accelerators": n * g if n else None}
    if a.get("kv_dtype") == "bf16" and n:
        n8 = instances_to_hold(demand, 2.0 * per_inst)  # FP8 halves the bytes per token
        hold["instances_fp8"] = n8
        hold["accelerators_fp8"] = n8 * g if n8 else None
    return {"queue_p50_s": d["queue_s"]["p50"], "ttft_p50_s": d["ttft_s"]["p50"],
            "hit_share": d["hit_share"]["total"], "tried": rows, "hold_kv": hold,
            "basis": "each lever simulated on the same sessions; the instances that hold the sessions' KV "
                     "(concurrency x their mean prompt) in HBM are arithmetic, not simulated"}
