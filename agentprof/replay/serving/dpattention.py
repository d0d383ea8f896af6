"""Data-parallel attention for the serving simulation: which attention layout a system runs, and a DP rank's costs.

Under tensor-parallel attention an MLA model's latent KV (one KV head) is copied on every TP rank, so an 8-GPU
instance holds one GPU's worth of KV. Engines serving MLA models (DeepSeek, Kimi) at high concurrency run the
attention data-parallel instead: each rank holds its own sequences' KV and a replica of the attention
(non-expert) weights, while the MoE layers stay shared by all ranks (tensor- or expert-parallel) and every
forward pass is aligned across ranks — a rank without work runs an empty batch (SGLang ``--enable-dp-attention``
[S-DPA1]; vLLM data-parallel attention [S-DPA2]; TensorRT-LLM ``enable_attention_dp``, whose DP ranks Dynamo's KV router
targets one by one [S-DPA3]).

The simulation runs each attention rank as a replica of the engine (its own queue, running batch, KV pool and
HBM prefix cache; the router picks a rank, as SGLang's DP controller and Dynamo's DP-rank routing do), priced by
the cost model's ``Deployment(dp_attention=True)``: a rank's step is the instance's step with every rank holding
this rank's batch (its attention, KV reads and the replicated weights on this rank; the MoE weights, FLOPs and
all-to-all collectives of ``g`` such batches). Ranks step in lockstep: an instance's ranks run each step together,
as long as its slowest rank's (the engine's ``lockstep`` groups, :mod:`agentprof.replay.serving.scheduler`).
Docs: docs/DEVICE_MODEL.md §10.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentprof.errors import AgentprofError
from agentprof.replay.costmodel import disk_load_s, kv_load_s
from agentprof.replay.serving.config import ATTENTION_MODES, check_choice
from agentprof.replay.serving.stepcost import StepCost

if TYPE_CHECKING:
    from agentprof.catalog.hardware import HardwareCatalog
    from agentprof.replay.systems import Resolved

DP_FRAMEWORKS = ("sglang", "vllm", "trt", "dynamo-sglang", "dynamo-trt")
"""Serving frameworks that run data-parallel attention for MLA models: SGLang [S-DPA1], vLLM [S-DPA2], TensorRT-LLM and
Dynamo on either [S-DPA3]. Others (ATOM, a system's declared software) run tensor-parallel attention under ``auto``."""


@dataclass(frozen=True)
class Layout:
    """The attention layout a simulation ran: ``tp`` or ``dp``, the ranks per instance and why."""

    mode: str
    ranks: int
    reason: str


@dataclass(frozen=True)
class Capacity:
    """What ``auto`` weighs: the sessions' KV demand (concurrency × their mean prompt) against what each layout
    holds per system (HBM pools, plus the CPU and disk tiers, in tokens)."""

    demand: float
    tp_pool: float
    dp_pool: float
    tiers: float = 0.0


def need_text(cap: Capacity, concurrency: int) -> str:
    """The sessions' KV against what each layout holds, in words."""
    m = 1e6
    return (f"{concurrency} sessions hold ~{cap.demand / m:.2f}M tokens of KV (their mean prompt each); "
            f"tensor-parallel attention holds {cap.tp_pool / m:.2f}M per system, data-parallel {cap.dp_pool / m:.2f}M"
            + (f", the CPU/disk tiers {cap.tiers / m:.2f}M more" if cap.tiers else ""))


def choose(r: Resolved, mode: str, concurrency: int, disagg: bool = False, cap: Capacity | None = None) -> Layout:
    """The layout ``mode`` (``auto``, ``tp``, ``dp``) gives the model resolved on a system, with the reason.
    ``auto``: data-parallel when more than one session shares the system, the model's attention is MLA, the
    framework runs DP attention and (given ``cap``) the sessions' KV outgrows what tensor-parallel attention holds
    while DP holds it; tensor-parallel otherwise. In that one case the simulation then runs both layouts and keeps
    the one whose sessions finish their tasks faster (:func:`pick_layout`). One session is the single-session replay's layout; when the
    KV fits either way tensor-parallel keeps a prompt's attention on all GPUs and no rank waits for another's
    (docs/DEVICE_MODEL.md §10: DP pays a long prompt's attention on one rank and the lockstep)."""
    check_choice("attention layout", mode, ATTENTION_MODES)
    g = r.dep.gpus
    mla = r.model.attention == "mla"
    fw = r.framework
    if disagg:
        if mode == "dp":
            raise AgentprofError("--attention dp applies to aggregated replicas; disaggregated pools (--pools) take "
                                 "the layout of their workers")
        return Layout("tp", 1, "disaggregated pools: each worker's layout as resolved")
    if mode == "tp":
        return Layout("tp", 1, "tensor-parallel attention as asked (--attention tp)"
                      + ("; the MLA latent KV is copied on every rank" if mla and g > 1 else ""))
    if mode == "dp":
        if g <= 1:
            raise AgentprofError(f"--attention dp needs more than one accelerator per instance; {r.system.key} runs "
                                 f"{r.model.display} on {g}")
        return Layout("dp", g, f"data-parallel attention as asked (--attention dp): {g} attention ranks per "
                      "instance, each with its own sequences' KV and a copy of the attention weights, MoE shared")
    if concurrency <= 1:
        return Layout("tp", 1, "auto: one session runs the single-session replay's layout (tensor-parallel attention)")
    if not mla:
        return Layout("tp", 1, f"auto: {r.model.display}'s attention is {r.model.attention or 'not MLA'} (KV heads "
                      "shard over the tensor-parallel ranks), so tensor-parallel attention")
    if g <= 1:
        return Layout("tp", 1, "auto: one accelerator per instance, nothing to split")
    if fw not in DP_FRAMEWORKS:
        return Layout("tp", 1, f"auto: framework {fw!r} is not known to run data-parallel attention, so "
                      "tensor-parallel (the MLA latent KV copied on every rank); --attention dp forces it")
    why = ""
    if cap is not None:
        need = need_text(cap, concurrency)
        if cap.tp_pool + cap.tiers >= cap.demand:
            return Layout("tp", 1, f"auto: {need}: the KV fits under tensor-parallel attention, which keeps each "
                          "prompt's attention on all GPUs and no rank waiting for another's, so tensor-parallel")
        if cap.dp_pool + cap.tiers < cap.demand:
            return Layout("tp", 1, f"auto: {need}: neither layout holds it and data-parallel would run each "
                          "recompute's attention on one rank while the others wait, so tensor-parallel")
        why = f" ({need})"
    return Layout("dp", g, f"auto: {concurrency} sessions of an MLA model on {fw}{why}: data-parallel attention, "
                  f"{g} ranks per instance each holding its own sequences' KV (under tensor-parallel attention the "
                  "latent is copied on every rank), as SGLang, vLLM and TensorRT-LLM serve MLA models at "
                  "high concurrency")


def compared(serving: dict[str, object]) -> dict[str, object]:
    """What ``auto`` compares of a layout's simulation: the sessions' task rate, TTFT and cache hits."""
    ttft = serving["ttft_s"]
    hits = serving["hit_share"]
    a = serving.get("attention") or {}
    return {"tasks_per_hour": serving.get("tasks_per_hour"), "ttft_p50_s": ttft["p50"], "ttft_p99_s": ttft["p99"],  # type: ignore[index]
            "hit_share": hits["total"], "hit_share_hbm": hits["hbm"],  # type: ignore[index]
            "kv_pool_tokens_per_system": a.get("kv_pool_tokens_per_system")}  # type: ignore[union-attr]


def pick_layout(tp: dict[str, object], dp: dict[str, object]) -> str:
    """``tp`` or ``dp``: the layout whose sessions finish their tasks faster (more tasks per hour: the closed loop's
    active sessions over their mean task time, every call's queue, prefill, hits and decode in it); the lower
    TTFT p50 where no task finished."""
    a, b = tp.get("tasks_per_hour"), dp.get("tasks_per_hour")
    if isinstance(a, float) and isinstance(b, float):
        return "dp" if b > a else "tp"
    ta, tb = (x["ttft_s"]["p50"] for x in (tp, dp))  # type: ignore[index]
    return "dp" if tb is not None and (ta is None or tb < ta) else "tp"


def auto_reason(facts: str, tp: dict[str, object], dp: dict[str, object], best: str) -> str:
    """``auto``'s reason when it simulated both layouts: the KV rule's facts and what each layout gave."""
    def one(name: str, d: dict[str, object]) -> str:
        c = compared(d)
        tph = c["tasks_per_hour"]
        return (f"{name} {tph:.1f} tasks/h, TTFT p50 {c['ttft_p50_s'] or 0:.2f} s, {c['hit_share']:.0%} hits"
                if isinstance(tph, float) else f"{name} no finished task, TTFT p50 {c['ttft_p50_s'] or 0:.2f} s")
    name = "data-parallel" if best == "dp" else "tensor-parallel"
    return (f"auto: {facts}: only data-parallel attention's pool holds the sessions' KV, so "
            f"both layouts were simulated: {one('tensor-parallel', tp)}; {one('data-parallel', dp)}: {name}, "
            "whose sessions finish their tasks faster")


def dp_resolved(r: Resolved, cat: HardwareCatalog | None = None) -> Resolved:
    """The model on the same system and accelerators with data-parallel attention (calibration as resolved, the
    per-step overhead's fan-out that of the all-to-all); a clear error when the replicated weights do not fit."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.serving.kvdtype import carry_kv
    from agentprof.replay.systems import resolve

    cat = cat or load_catalog()
    # the KV dtype asked for (--kv-dtype) carries over
    return carry_kv(resolve(r.system, r.model, cat, r.fitted, accept=r.params.accept, gpus=r.dep.gpus,
                            dp_attention=True), r)


def rank_budget(framework: str, budget: float, ranks: int) -> tuple[float, str]:
    """Prefill token budget of one data-parallel attention rank's step: SGLang divides ``--chunked-prefill-size``
    by the DP size when DP attention is on (``server_args.py``, [S-DPA4]), so the instance's step holds the budget
    over all ranks; a vLLM DP rank is an engine of its own with its own scheduler and budget [S-DPA2]; TensorRT-LLM
    is taken as vLLM (estimate: its ``max_num_tokens`` is per rank's executor)."""
    if framework in ("sglang", "dynamo-sglang"):
        return max(budget / max(ranks, 1), 1.0), f"{budget:.0f} / {ranks} ranks (SGLang divides the chunked-prefill size by the DP size under DP attention [S-DPA4])"
    return budget, f"{budget:.0f} per rank (each DP rank schedules its own step; estimate for {framework})"


class RankStepCost(StepCost):
    """Step costs of one data-parallel attention rank: the instance's DP deployment with every rank holding this
    rank's batch (``copies`` = ranks), its KV pool one GPU's free memory, and cached KV loaded by the rank alone."""

    def __init__(self, r: Resolved) -> None:
        g = r.dep.gpus
        # each simulated request stands for one per rank (``copies``); a rank's scheduler pays the per-prefill
        # overhead of its own request only, so the g copies share one t_req
        p = r.params.with_(t_req_s=r.params.t_req_s / g)
        super().__init__(r.dep, p, r.system.mem_util, r.host_link_bw, r.disk_bw, copies=float(g))
        self.ranks = g

    def load_s(self, cpu_tokens: float, disk_tokens: float) -> float:
        """The rank brings the whole sequence's latent over its own host link (under TP each rank loads its
        copy in parallel); from disk the rank's share of the disk's bandwidth."""
        t = 0.0
        if cpu_tokens > 0:
            t += float(kv_load_s(self.dep, cpu_tokens, self.host_link_bw)) * self.dep.kv_divisor
        if disk_tokens > 0:
            t += float(disk_load_s(self.dep, disk_tokens, self.disk_bw))
        return t
