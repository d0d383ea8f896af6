"""The analytical device cost model: prefill, decode and KV-load times of model calls on a deployment.

A *deployment* is one open model served in one weight format on ``gpus`` accelerators (tensor/expert
parallel, optionally data-parallel attention). Its byte and FLOP counts come from the catalog; the free terms
(per-step fixed overhead, bandwidth and compute efficiency, request overheads, speculative acceptance) come
from calibration (:mod:`agentprof.replay.calibration`) or a system's declared estimates. Every function is
vectorized over numpy arrays of calls. Equations: docs/DEVICE_MODEL.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from agentprof.catalog import CatalogError, ModelSpec
from agentprof.catalog.hardware import Accelerator, weight_format

ArrayLike = np.ndarray | float | int


@dataclass(frozen=True)
class StepParams:
    """The free terms of one serving configuration (fitted or declared).

    ``t_fixed_s`` per decode step (kernel launches, collectives, scheduling: it dominates low-concurrency
    decode), ``mbu``/``mfu`` bandwidth and compute efficiency, ``t0_s`` request overhead before prefill,
    ``t_req_s`` per-prefill overhead, ``q`` prefill-queueing factor, ``accept`` tokens per decode step with
    MTP/speculative decoding (1 = off), ``m_steps`` decode steps a new request waits behind before its first
    token (scheduler behaviour, fitted on TTFT), ``attn_eff`` efficiency of prefill attention relative to the
    weight GEMMs (fitted once on long-prompt agentic points).
    """

    t_fixed_s: float
    mbu: float
    mfu: float
    t0_s: float = 0.0
    t_req_s: float = 0.0
    q: float = 1.0
    accept: float = 1.0
    m_steps: float = 1.0
    attn_eff: float = 1.0

    def with_(self, **kw: float) -> StepParams:
        d = dict(self.__dict__)
        d.update(kw)
        return StepParams(**d)


@dataclass
class Deployment:
    """One model in one weight format on ``gpus`` accelerators; byte and FLOP counts per step and per GPU."""

    model: ModelSpec
    accel: Accelerator
    precision: str
    gpus: int
    dp_attention: bool = False
    kv_dtype_bytes: float = 2.0
    # derived in __post_init__
    moe_layers: float = field(init=False)
    experts: float = field(init=False)
    topk: float = field(init=False)
    expert_bytes: float = field(init=False)
    nonexpert_bytes: float = field(init=False)
    nonexpert_read_bytes: float = field(init=False)
    routed_bytes: float = field(init=False)

    def __post_init__(self) -> None:
        m = self.model
        fmt = weight_format(m, self.precision)
        ebits, dbits = fmt["expert_bits"].value, fmt["dense_bits"].value
        if "kv_bytes" in fmt:
            self.kv_dtype_bytes = fmt["kv_bytes"].value
        self.experts = m.get("experts")
        self.topk = m.get("experts_per_token")
        self.moe_layers = (m.get("layers") - m.get("dense_layers")) if self.experts else 0.0
        per_expert = 3.0 * m.get("hidden") * m.get("expert_ffn")  # gate, up, down projections
        routed_params = self.moe_layers * self.experts * per_expert
        nonexpert_params = m.get("params_total") - routed_params
        if nonexpert_params <= 0:
            raise CatalogError(f"model {m.key}: routed experts ({routed_params:.3g}) exceed params_total")
        embed = m.get("vocab") * m.get("hidden")  # input embedding rows are gathered, not streamed
        self.expert_bytes = per_expert * ebits / 8
        self.routed_bytes = routed_params * ebits / 8
        self.nonexpert_bytes = nonexpert_params * dbits / 8
        self.nonexpert_read_bytes = max(nonexpert_params - embed, 0.1 * nonexpert_params) * dbits / 8
        if self.gpus < 1:
            raise CatalogError("a deployment needs at least one accelerator")

    # --- sizes -----------------------------------------------------------------------------------------
    @property
    def weight_bytes(self) -> float:
        """All weights of the model in this format."""
        return self.nonexpert_bytes + self.routed_bytes

    @property
    def weight_bytes_per_gpu(self) -> float:
        rep = 1.0 if self.dp_attention else self.gpus
        return self.nonexpert_bytes / rep + self.routed_bytes / self.gpus

    def active_bytes(self, batch: ArrayLike = 1) -> np.ndarray:
        """Weight bytes one decode step streams for ``batch`` sequences (whole instance): non-expert weights
        plus the distinct experts touched under uniform routing, E·(1−(1−k/E)^B) per MoE layer."""
        b = np.maximum(np.asarray(batch, dtype=float), 1.0)
        touched = self.experts * (1.0 - (1.0 - self.topk / self.experts) ** b) if self.experts else 0.0
        return self.nonexpert_read_bytes + self.moe_layers * touched * self.expert_bytes

    def kv_seq_bytes(self, ctx: ArrayLike) -> np.ndarray:
        """KV-cache bytes of one sequence at context ``ctx`` (all layers; sliding layers capped at their window)."""
        m = self.model
        c = np.asarray(ctx, dtype=float)
        per_layer = m.kv_elements_per_layer() * self.kv_dtype_bytes
        sliding = m.get("sliding_layers")
        full = m.get("layers") - sliding
        out = full * c * per_layer
        if sliding:
            out = out + sliding * np.minimum(c, m.get("sliding_window")) * per_layer
        return out

    @property
    def kv_token_bytes(self) -> float:
        """Marginal KV bytes per token at long context (what a cached prefix costs to store or move)."""
        m = self.model
        full = m.get("layers") - m.get("sliding_layers")
        return float(full * m.kv_elements_per_layer() * self.kv_dtype_bytes)

    @property
    def kv_divisor(self) -> float:
        """How many ways one sequence's KV is split over the instance's GPUs: GQA heads shard under TP (up to
        the KV-head count); an MLA latent is replicated on every TP rank (hardware.md §3); DP-attention spreads
        whole sequences over the GPUs."""
        if self.dp_attention:
            return float(self.gpus)
        if self.model.attention == "mla":
            return 1.0
        return float(min(self.gpus, max(self.model.get("kv_heads"), 1.0)))

    def free_kv_bytes_per_gpu(self, mem_util: float) -> float:
        return self.accel.hbm_bytes * mem_util - self.weight_bytes_per_gpu

    def max_batch(self, ctx: ArrayLike, mem_util: float = 0.9) -> np.ndarray:
        """Most sequences of context ``ctx`` whose KV fits next to the weights (the running-batch cap)."""
        free = max(self.free_kv_bytes_per_gpu(mem_util), 0.0)
        per_gpu = self.kv_seq_bytes(ctx) / self.kv_divisor
        return np.floor(free / np.maximum(per_gpu, 1.0))

    def fits(self, mem_util: float = 0.9) -> bool:
        return self.free_kv_bytes_per_gpu(mem_util) > 0

    # --- work -------------------------------------------------------------------------------------------
    def _attn_dims(self, phase: str) -> float:
        """Σ over a layer's heads of (d_qk + d_v): the attention FLOPs per query token per context token / 2."""
        m = self.model
        h = m.get("q_heads")
        if m.attention == "mla":
            if phase == "decode":  # absorbed MLA decode attends in the latent space
                return h * (m.get("kv_lora_rank") + m.get("rope_dim") + m.get("kv_lora_rank"))
            return h * (m.get("qk_nope_dim") + m.get("rope_dim") + m.get("v_head_dim"))
        return h * 2 * m.get("head_dim")

    def _attended(self, span: np.ndarray) -> np.ndarray:
        """Σ over layers of the context each query attends to (sliding layers capped at their window)."""
        m = self.model
        sliding = m.get("sliding_layers")
        full = m.get("layers") - sliding
        out = full * span
        if sliding:
            out = out + sliding * np.minimum(span, m.get("sliding_window"))
        return out

    def prefill_flops(self, new: ArrayLike, cached: ArrayLike = 0) -> np.ndarray:
        """FLOPs to prefill ``new`` tokens after ``cached`` prefix tokens (whole instance): 2·N_active per token
        plus causal attention, new tokens attending to the prefix and half of themselves."""
        t = np.asarray(new, dtype=float)
        c = np.asarray(cached, dtype=float)
        dense = 2.0 * self.model.get("params_active") * t
        attn = 2.0 * self._attn_dims("prefill") * t * self._attended(c + t / 2.0)
        return dense + attn

    def decode_flops(self, batch: ArrayLike, ctx: ArrayLike) -> np.ndarray:
        b = np.asarray(batch, dtype=float)
        return b * (2.0 * self.model.get("params_active")
                    + 2.0 * self._attn_dims("decode") * self._attended(np.asarray(ctx, dtype=float)))

    def prefill_peak_s(self, new: ArrayLike, cached: ArrayLike = 0, attn_eff: float = 1.0) -> np.ndarray:
        """Seconds one GPU needs for its share of a prefill at 100 % of peak: weight GEMMs at the weight
        format's rate, attention at the BF16 rate (attention kernels read a BF16 KV cache whatever the weights)
        and at ``attn_eff`` of the GEMMs' efficiency (long-context attention runs less efficiently)."""
        t = np.asarray(new, dtype=float)
        c = np.asarray(cached, dtype=float)
        dense = 2.0 * self.model.get("params_active") * t / self.peak
        attn = 2.0 * self._attn_dims("prefill") * t * self._attended(c + t / 2.0) / self.attn_peak / attn_eff
        return (dense + attn) / self.gpus

    def decode_peak_s(self, batch: ArrayLike, ctx: ArrayLike) -> np.ndarray:
        """Seconds one GPU needs for its share of a decode step's FLOPs at 100 % of peak (as above)."""
        b = np.asarray(batch, dtype=float)
        dense = 2.0 * self.model.get("params_active") / self.peak
        attn = 2.0 * self._attn_dims("decode") * self._attended(np.asarray(ctx, dtype=float)) / self.attn_peak
        return b * (dense + attn) / self.gpus

    def decode_bytes_per_gpu(self, batch: ArrayLike, ctx: ArrayLike) -> np.ndarray:
        """Bytes one GPU streams per decode step: its share of the touched weights plus the batch's KV."""
        b = np.maximum(np.asarray(batch, dtype=float), 1.0)
        rep = 1.0 if self.dp_attention else self.gpus
        touched = self.active_bytes(b) - self.nonexpert_read_bytes
        weights = self.nonexpert_read_bytes / rep + touched / self.gpus
        return weights + b * self.kv_seq_bytes(ctx) / self.kv_divisor

    @property
    def peak(self) -> float:
        return self.accel.peak_flops(self.precision)

    @property
    def attn_peak(self) -> float:
        return self.accel.peak_flops("bf16")

    @property
    def layers(self) -> float:
        return self.model.get("layers")


# --- times ------------------------------------------------------------------------------------------------
def decode_step_s(dep: Deployment, p: StepParams, batch: ArrayLike, ctx: ArrayLike) -> np.ndarray:
    """One decode step for ``batch`` sequences at mean context ``ctx``: fixed overhead + streamed bytes at
    ``mbu`` of HBM bandwidth + FLOPs at ``mfu`` of peak (time per step, not per token)."""
    bw_s = dep.decode_bytes_per_gpu(batch, ctx) / (p.mbu * dep.accel.hbm_bw)
    cmp_s = dep.decode_peak_s(batch, ctx) / p.mfu
    return p.t_fixed_s + bw_s + cmp_s


def prefill_s(dep: Deployment, p: StepParams, new: ArrayLike, cached: ArrayLike = 0) -> np.ndarray:
    """Prefill ``new`` tokens attending to a ``cached`` prefix already in HBM: per-prefill overhead + the
    larger of compute (at ``mfu``) and memory traffic (weights once, prefix KV read, new KV written)."""
    t = np.asarray(new, dtype=float)
    c = np.asarray(cached, dtype=float)
    cmp_s = dep.prefill_peak_s(t, c, p.attn_eff) / p.mfu
    rep = 1.0 if dep.dp_attention else dep.gpus
    weights = dep.nonexpert_read_bytes / rep + (dep.active_bytes(np.maximum(t, 1.0)) - dep.nonexpert_read_bytes) / dep.gpus
    kv = dep.kv_seq_bytes(c + t) / dep.kv_divisor
    mem_s = (weights + kv) / (p.mbu * dep.accel.hbm_bw)
    return np.where(t > 0, p.t_req_s + np.maximum(cmp_s, mem_s), 0.0)


def kv_load_s(dep: Deployment, tokens: ArrayLike, bw: float) -> np.ndarray:
    """Time to move ``tokens`` of cached prefix KV into HBM over a path of ``bw`` bytes/s per accelerator
    (each GPU loads its own shard in parallel; an MLA latent is loaded by every rank)."""
    return dep.kv_seq_bytes(np.asarray(tokens, dtype=float)) / dep.kv_divisor / bw


def disk_load_s(dep: Deployment, tokens: ArrayLike, bw: float) -> np.ndarray:
    """Time to read ``tokens`` of cached KV from a disk tier of aggregate bandwidth ``bw`` (shared by the GPUs)."""
    per_gpu = dep.kv_seq_bytes(np.asarray(tokens, dtype=float)) / dep.kv_divisor
    return per_gpu * dep.gpus / bw


@dataclass
class CallTimes:
    """Per-call replayed times (seconds, arrays): first token, decode, KV loads and the total."""

    ttft_s: np.ndarray
    decode_s: np.ndarray
    prefill_s: np.ndarray
    load_s: np.ndarray
    queue_s: np.ndarray

    @property
    def total_s(self) -> np.ndarray:
        return self.ttft_s + self.decode_s


def call_times(dep: Deployment, p: StepParams, input_tokens: np.ndarray, cached_tokens: np.ndarray,
               output_tokens: np.ndarray, batch: int = 1, load_s: ArrayLike = 0.0,
               mem_util: float = 0.9) -> CallTimes:
    """Replay model calls: prefill of the uncached tokens attending to the cached prefix, loading the cached
    prefix from its tier (``load_s``, HBM = 0), then ``output−1`` decode steps whose KV reads grow with the
    context. ``batch`` identical clients share the deployment: each decode step serves ``batch`` sequences,
    their prefills interleave with decode, and the KV capacity caps the running batch (the rest queue)."""
    inp = np.asarray(input_tokens, dtype=float)
    cached = np.minimum(np.asarray(cached_tokens, dtype=float), inp)
    out = np.maximum(np.asarray(output_tokens, dtype=float), 1.0)
    new = inp - cached
    ctx_mean = inp + out / 2.0
    b = float(max(batch, 1))
    cap = dep.max_batch(inp + out, mem_util)
    running = np.clip(cap, 1.0, b)
    s = prefill_s(dep, p, new, cached)
    t_dec = decode_step_s(dep, p, running, ctx_mean)
    # other clients' prefills interleave with this call's decode steps (one per client per call)
    t_pf = (running - 1.0) / out * s
    tpot = (t_dec + t_pf) / p.accept
    rho = np.where(t_dec + t_pf > 0, t_pf / (t_dec + t_pf), 0.0)
    rho = np.minimum(rho, 0.95)
    ttft = p.t0_s + np.asarray(load_s, dtype=float) + s * (1.0 + p.q * rho / (1.0 - rho)) + p.m_steps * t_dec
    # clients beyond the KV capacity wait for a running call to finish (closed loop)
    over = np.maximum(b / np.maximum(cap, 1.0) - 1.0, 0.0)
    queue = over * (ttft + (out - 1.0) * tpot)
    return CallTimes(ttft + queue, (out - 1.0) * tpot, s, np.asarray(load_s, dtype=float) + 0.0 * s, queue)


def tokens_per_second_per_user(dep: Deployment, p: StepParams, ctx: float, batch: int = 1) -> float:
    """Decode speed one user sees (1/TPOT) at context ``ctx``."""
    return float(p.accept / decode_step_s(dep, p, batch, ctx))


def ceil_pow2(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1.0))))
