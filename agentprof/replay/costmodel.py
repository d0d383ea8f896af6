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
from agentprof.catalog.kvcache import engine, graph_batch, prefill_gemm_ratio
from agentprof.catalog.serving import DEFAULT_BUDGET_TOKENS
from agentprof.replay.equations import Work, times

ArrayLike = np.ndarray | float | int
CHUNK_TOKENS = DEFAULT_BUDGET_TOKENS
"""Prefill tokens per scheduler step (chunked prefill) when the framework is not known. The per-framework
budgets are ``catalog/serving.toml [budget]`` (:meth:`agentprof.catalog.serving.ServingCatalog.budget_tokens`),
read by the calibration points and the serving simulation alike; this is that file's fallback."""
DEFAULT_SCALEUP_BW = 50e9
"""Scale-up bandwidth when an accelerator names none (estimate: a 400 Gb/s NIC)."""
DEFAULT_SCALEOUT_BW = 50e9
"""Scale-out (NIC) bandwidth per accelerator when the catalog names none (estimate: one 400 Gb/s NIC per GPU,
the common build, hardware.md §2.1 [S2-spec])."""
SCALEOUT_ALLREDUCE_S = 20e-6
"""Latency a small all-reduce adds when it crosses the scale-out network between two 8-GPU nodes (measured: NCCL
all_reduce_perf across two nodes over InfiniBand HDR, 19-21 us at 8-64 B, NVIDIA/nccl-tests#150; NCCL's own
tuning model gives 25.9-26.5 us for 4-8 KB between H100 nodes, NVIDIA/nccl#1453 [S80]). Inside one scale-up
domain the engines' one-shot all-reduce runs over NVLink; its latency is in the fitted fan-out term."""


def one_shot_max_bytes(gpus: float, engine: str = "", hidden: float = 0.0, vendor: str = "") -> float:
    """The largest all-reduce message (bytes) an engine's custom all-reduce sends one-shot: every rank reads each
    peer's whole message, (g − 1)·M per rank, where the two-shot kernel (reduce-scatter, all-gather) moves the ring's
    2·(g − 1)/g·M. vLLM's dispatch [S-CUSTOMAR1]: always one-shot on 2 GPUs, below 512 KiB on up to 4, below 256 KiB
    on up to 8; above 8 GPUs NCCL (no one-shot); SGLang carries the same kernel on NVIDIA. On AMD the engines run
    AITER's all-reduce [S-AITERAR1], whose default kernel goes one-shot below 160 KiB on up to 4 GPUs and 80 KiB on up
    to 8. TRT-LLM's AUTO strategy table [S-TRTAR1] (SM100, the all-reduce fused with the residual RMSNorm, TP 4 and 8)
    goes one-shot up to 2^20 elements of the hidden size's power-of-two bucket (512 tokens of hidden 2,048–4,095, 256
    of 4,096–8,191)."""
    if gpus <= 2:
        return math.inf
    if gpus > 8:
        return 0.0
    if engine == "trt" and hidden >= 1024:
        bucket = 2.0 ** math.floor(math.log2(hidden))
        return (2.0 ** 20 / bucket) * hidden * 2.0
    if vendor == "amd":
        return 160.0 * 1024 if gpus <= 4 else 80.0 * 1024
    return 512.0 * 1024 if gpus <= 4 else 256.0 * 1024


ATTN_TILE_ROWS = 64
"""Query rows (heads x tokens of one sequence) one tile of the MLA decode kernel computes [S-FlashMLA]."""


@dataclass(frozen=True)
class StepParams:
    """The free terms of one serving configuration (fitted or declared).

    ``t_fixed_s`` per decode step (kernel launches, collectives, scheduling: it dominates low-concurrency
    decode), ``mbu``/``mfu`` bandwidth and compute efficiency, ``t0_s`` request overhead before prefill,
    ``t_req_s`` per-prefill overhead, ``q`` prefill-queueing factor, ``accept`` tokens per decode step with
    MTP/speculative decoding (1 = off), ``attn_eff`` efficiency of prefill attention as a fraction of the BF16
    peak (the attention kernels' own, not scaled by the GEMMs' ``mfu_pf``; fitted once on long-prompt agentic
    points). ``m_steps`` is kept for callers of the first model and
    ignored: a new request now waits for the prefill work itself (one step per chunk), not a fitted number of
    decode steps.
    """

    t_fixed_s: float
    mbu: float
    mfu: float
    t0_s: float = 0.0
    t_req_s: float = 0.0
    q: float = 1.0
    accept: float = 1.0
    m_steps: float = 0.0
    attn_eff: float = 1.0
    mfu_pf: float | None = None
    """Compute efficiency of prefill (batched prompts); ``mfu`` when None."""
    wait_steps: float = 0.0
    """Decode steps a new request waits for the scheduler (recipe's polling / streaming interval / 2)."""
    ahead_steps: float = 0.0
    """Steps an overlap or asynchronous scheduler has launched ahead (``scheduling.toml [ahead]``): a new request
    waits for them too while others decode."""
    prefill_alone: bool = False
    """The engine runs prefill in its own forward pass, first, while the running sequences wait
    (``scheduling.toml [prefill_alone]``: SGLang); False: prompt chunks ride decode steps."""
    draft_tokens: float = 0.0
    """Tokens each sequence drafts per decode step with MTP, as the recipe set them (``catalog/draft_depth.toml``;
    0 where not listed): the step verifies them with the sequence's own token, so its FLOPs and collectives carry
    1 + draft_tokens tokens per sequence; ``accept`` stays the tokens it keeps."""
    draft_s: float = 0.0
    """Seconds a speculative drafter adds to every decode step (its passes; :mod:`agentprof.replay.speculative`);
    0 without one, and for the fitted MTP groups, whose draft head is inside their fitted step."""
    verify_weights: bool = False
    """A speculative verify step streams the weights its ``1 + draft_tokens`` tokens per sequence touch (their MoE
    experts). False for the fitted MTP groups, which keep the form they were fitted in."""
    t_tok_s: float = 0.0
    """Seconds per prompt token the frontend spends before the scheduler sees a request (tokenizing the whole
    prompt on the host; ``catalog/scheduling.toml [tokenize]``, 0 where not listed): part of the request overhead."""
    dec_attn_eff: float = 0.0
    """Efficiency of the decode attention kernel (fraction of the BF16 peak): the chip's published figure for the
    model's attention where the catalog has one (:attr:`Deployment.decode_attn_eff`); 0: ``mfu``, as the GEMMs."""
    attn_fresh_eff: float = 0.0
    """Efficiency of the new tokens' attention among themselves, the part of a prefill a fresh prompt is made of:
    the chip's published forward figure where the catalog has one (``attn_fwd_eff``), as the fixed-sequence
    points take it; 0: ``attn_eff``, which then prices the whole prefill attention."""

    def request_s(self, input_tokens: ArrayLike) -> np.ndarray:
        """Overhead before a request reaches the scheduler: ``t0`` plus the frontend's tokenization of the prompt."""
        return self.t0_s + self.t_tok_s * np.asarray(input_tokens, dtype=float)

    @property
    def prefill_mfu(self) -> float:
        return self.mfu if self.mfu_pf is None else self.mfu_pf

    @property
    def attn_rel(self) -> float:
        """``attn_eff`` relative to the prefill GEMMs' efficiency: what :meth:`Deployment.prefill_peak_s` scales the
        attention by so that, divided by ``prefill_mfu``, attention runs at ``attn_eff`` of the BF16 peak."""
        return self.attn_eff / self.prefill_mfu

    @property
    def fresh_eff(self) -> float:
        """The new tokens' attention among themselves: ``attn_fresh_eff``, else ``attn_eff``."""
        return self.attn_fresh_eff or self.attn_eff

    @property
    def fresh_rel(self) -> float:
        """:attr:`fresh_eff` relative to the prefill GEMMs' efficiency (as :attr:`attn_rel`)."""
        return self.fresh_eff / self.prefill_mfu

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
    expert_parallel: int = 1
    """Ranks the routed experts are split over as whole experts (EP); 1: every GPU holds a slice of each."""
    engine: str = ""
    """The serving engine (``trt``, ``sglang``, ``vllm``, ``atom``; :func:`agentprof.catalog.kvcache.engine`), for
    its all-reduce's one-shot size (:func:`one_shot_max_bytes`); empty: vLLM's."""
    nonexpert_gemm_ratio: float = 1.0
    """How many times longer the recipe's non-expert prefill GEMMs take than with the reference block-scale kernel
    the prefill efficiency is fitted against (:func:`agentprof.catalog.kvcache.prefill_gemm_ratio`); 1: the same."""
    # derived in __post_init__
    moe_layers: float = field(init=False)
    experts: float = field(init=False)
    topk: float = field(init=False)
    expert_bytes: float = field(init=False)
    nonexpert_bytes: float = field(init=False)
    nonexpert_read_bytes: float = field(init=False)
    routed_bytes: float = field(init=False)
    dpa_split_bytes: float = field(init=False)
    """Non-expert weight bytes that data-parallel attention still splits over the ranks (the rest, each rank holds
    whole): SGLang's shared experts without expert parallelism; 0 otherwise."""
    gemm_peak_s_per_token: float = field(init=False)
    """Seconds of a decode token's weight GEMMs at 100 % of peak, whole instance (each weight at its format's rate)."""
    prefill_gemm_peak_s_per_token: float = field(init=False)
    """The same for a prefill token (no output head: a prefill computes logits for its last token only)."""
    prefill_rank_gemm_peak_s_per_token: float = field(init=False)
    """The part of :attr:`prefill_gemm_peak_s_per_token` a data-parallel attention rank computes for its own prompts
    alone: the non-expert GEMMs (attention projections, dense layers, shared experts), less what the engine still
    splits over the ranks (:attr:`dpa_split_bytes`); 0 without data-parallel attention."""

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
        # weight GEMMs run at the tensor-core rate of their own format: routed experts at the format's rate,
        # the other active weights (attention, shared experts, dense layers) at their own bits' rate, never
        # faster than the format's (DeepSeek R1 FP4 keeps non-expert layers in FP8; GPT-OSS in BF16)
        # (the input embedding is a gather, not a GEMM; a prefill computes the output head for its last token
        # only, a decode step for every sequence)
        routed_active = self.moe_layers * self.topk * per_expert if self.experts else 0.0
        other_active = m.get("params_active") - routed_active
        fmt_peak = self.accel.peak_flops(self.precision)
        dense_name = "fp4" if dbits <= 4.5 else "fp8" if dbits <= 8 else "bf16"
        dense_peak = min(fmt_peak, self.accel.peak_flops(dense_name))
        dec_other = max(other_active - embed, 0.1 * other_active)
        pf_other = max(other_active - 2.0 * embed, 0.1 * other_active)
        self.gemm_peak_s_per_token = 2.0 * (routed_active / fmt_peak + dec_other / dense_peak)
        # (a recipe whose non-expert GEMMs run a slower library adds that library's extra time at prefill)
        pf_other_s = pf_other * self.nonexpert_gemm_ratio / dense_peak
        self.prefill_gemm_peak_s_per_token = 2.0 * (routed_active / fmt_peak + pf_other_s)
        self.routed_bytes = routed_params * ebits / 8
        self.nonexpert_bytes = nonexpert_params * dbits / 8
        self.nonexpert_read_bytes = max(nonexpert_params - embed, 0.1 * nonexpert_params) * dbits / 8
        # data-parallel attention: each rank holds the non-expert weights whole (the DP recipes copy the dense FFNs
        # and output head too: --moe-dense-tp-size 1, --enable-dp-lm-head [S51]), but for SGLang's shared experts
        # where no all-to-all runs the experts: fused into the tensor-parallel MoE, or TP-split [S-sgl-dpa]
        split = 0.0
        if self.engine == "sglang" and self.experts and self.expert_parallel <= 1:
            split = self.moe_layers * m.get("shared_experts") * per_expert
        self.dpa_split_bytes = split * dbits / 8
        # (shared experts run for every token: the split ones are active parameters the ranks share)
        self.prefill_rank_gemm_peak_s_per_token = (2.0 * max(pf_other - split, 0.0) * self.nonexpert_gemm_ratio
                                                   / dense_peak if self.dp_attention else 0.0)
        if self.gpus < 1:
            raise CatalogError("a deployment needs at least one accelerator")
        # attention's shape, read once (the serving simulation prices many small prefills)
        self._sliding = m.get("sliding_layers")
        self._full = m.get("layers") - self._sliding
        self._window = m.get("sliding_window")
        self._pf_dims = 2.0 * self._attn_dims("prefill")
        self._expand = (2.0 * m.get("kv_lora_rank") * m.get("q_heads") * (m.get("qk_nope_dim") + m.get("v_head_dim"))
                        if m.attention == "mla" else 0.0)

    @classmethod
    def as_deployed(cls, model: ModelSpec, accel: Accelerator, precision: str, gpus: int, framework: str,
                    dp_attention: bool = False, kv_dtype_bytes: float = 2.0, expert_parallel: int = 1) -> Deployment:
        """The deployment as ``framework``'s recipe runs it: its engine, and its non-expert prefill GEMMs' library
        (:func:`agentprof.catalog.kvcache.prefill_gemm_ratio`, matched on the framework itself)."""
        return cls(model, accel, precision, gpus, dp_attention, kv_dtype_bytes, expert_parallel, engine(framework),
                   prefill_gemm_ratio(framework, model.key, accel.key, precision)[0])

    # --- sizes -----------------------------------------------------------------------------------------
    @property
    def weight_bytes(self) -> float:
        """All weights of the model in this format."""
        return self.nonexpert_bytes + self.routed_bytes

    def nonexpert_share(self, nbytes: float) -> float:
        """One GPU's share of ``nbytes`` of non-expert weights: a 1/GPUs slice under tensor parallelism; under
        data-parallel attention all of them but what the engine still splits (:attr:`dpa_split_bytes`)."""
        if not self.dp_attention:
            return nbytes / self.gpus
        return nbytes - self.dpa_split_bytes * (1.0 - 1.0 / self.gpus)

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.nonexpert_share(self.nonexpert_bytes) + self.routed_bytes / self.gpus

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

    def kv_pool_tokens_per_gpu(self, mem_util: float) -> float:
        """Tokens of KV one accelerator holds next to its weights (each token's per-accelerator share: an MLA
        latent copied on every tensor-parallel rank, GQA heads split over them); 0 when the weights fill it."""
        return max(self.free_kv_bytes_per_gpu(mem_util), 0.0) / max(self.kv_token_bytes / self.kv_divisor, 1e-9)

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
        out = self._full * span
        if self._sliding:
            out = out + self._sliding * np.minimum(span, self._window)
        return out

    @staticmethod
    def _chunks(new: np.ndarray, chunk: ArrayLike | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A prefill of ``new`` tokens under a per-step ``chunk`` budget (None: one piece): (chunks, full chunk
        size, last chunk size)."""
        if chunk is None:
            return np.ones_like(new), new, new
        b = np.minimum(np.asarray(chunk, dtype=float), np.maximum(new, 1.0))
        n = np.maximum(np.ceil(new / b), 1.0)
        return n, b, new - (n - 1.0) * b

    def _prefill_attn(self, t: np.ndarray, c: np.ndarray, chunk: ArrayLike | None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | float]:
        """A prefill's attention FLOPs as (each chunk's new tokens among themselves, their attention to what came
        before the chunk, its re-expansion: :meth:`context_expand_flops`)."""
        dims = self._pf_dims
        n, b, last = self._chunks(t, chunk)
        own = dims * ((n - 1.0) * b * self._attended(b / 2.0) + last * self._attended(last / 2.0))
        before = dims * t * self._attended(c + t / 2.0) - own
        if not self._expand:
            return own, before, 0.0
        return own, before, (t > 0) * self._expand * self._attended(n * c + b * n * (n - 1.0) / 2.0)

    def prefill_attn_flops(self, new: ArrayLike, cached: ArrayLike = 0, chunk: ArrayLike | None = None) -> np.ndarray:
        """Attention FLOPs of a prefill of ``new`` tokens after ``cached`` ones (whole instance): causal attention,
        new tokens attending to the prefix and half of themselves, plus the prefix's re-expansion
        (:meth:`context_expand_flops`, once per ``chunk`` of the prefill)."""
        own, before, expand = self._prefill_attn(np.asarray(new, dtype=float), np.asarray(cached, dtype=float), chunk)
        return own + before + expand

    def prefill_self_attn_flops(self, new: ArrayLike, chunk: ArrayLike | None = None) -> np.ndarray:
        """The part of :meth:`prefill_attn_flops` that is each chunk's new tokens attending among themselves
        (causal): all of a one-chunk fresh prompt's attention; the rest attends to what came before the chunk."""
        t = np.asarray(new, dtype=float)
        return self._prefill_attn(t, np.zeros_like(t), chunk)[0]

    def context_expand_flops(self, new: ArrayLike, cached: ArrayLike, chunk: ArrayLike | None = None) -> np.ndarray:
        """FLOPs an MLA prefill spends re-expanding what precedes each chunk (whole instance; 0 for other attention
        and where nothing is prefilled). MLA's prefill attends in per-head form, so each prefill step up-projects
        every earlier token's latent into its heads' K and V again (W_UK, W_UV: 2·kv_lora·h·(d_nope + d_v) per
        token and layer; vLLM's MLA prefill over a cached context, SGLang's chunked prefix cache [S68]): work that
        grows with the prefix, not with the new tokens; under a ``chunk`` budget each chunk expands the prefix and
        the chunks before it."""
        t = np.asarray(new, dtype=float)
        c = np.asarray(cached, dtype=float)
        return np.broadcast_to(self._prefill_attn(t, c, chunk)[2], np.broadcast(t, c).shape) * 1.0

    def prefill_flops(self, new: ArrayLike, cached: ArrayLike = 0) -> np.ndarray:
        """FLOPs to prefill ``new`` tokens after ``cached`` prefix tokens (whole instance): 2·N_active per token
        plus attention (:meth:`prefill_attn_flops`)."""
        t = np.asarray(new, dtype=float)
        return 2.0 * self.model.get("params_active") * t + self.prefill_attn_flops(t, cached)

    def decode_flops(self, batch: ArrayLike, ctx: ArrayLike) -> np.ndarray:
        b = np.asarray(batch, dtype=float)
        return b * (2.0 * self.model.get("params_active")
                    + 2.0 * self._attn_dims("decode") * self._attended(np.asarray(ctx, dtype=float)))

    def prefill_peak_s(self, new: ArrayLike, cached: ArrayLike = 0, attn_eff: float = 1.0,
                       fresh_eff: float | None = None, chunk: ArrayLike | None = None) -> np.ndarray:
        """Seconds one GPU needs for its share of a prefill at 100 % of peak: weight GEMMs at the weight
        format's rate, attention at the BF16 rate (attention kernels read a BF16 KV cache whatever the weights)
        and at ``attn_eff`` of the GEMMs' efficiency (callers divide by ``mfu_pf`` and pass
        :attr:`StepParams.attn_rel`, so attention runs at its own fraction of the BF16 peak); each chunk's new
        tokens' attention among themselves at ``fresh_eff`` (:attr:`StepParams.fresh_rel`; ``attn_eff`` when
        None). ``chunk``: the per-step budget the prefill is split by (None: one piece)."""
        t = np.asarray(new, dtype=float)
        own, before, expand = self._prefill_attn(t, np.asarray(cached, dtype=float), chunk)
        attn = ((before + expand) / attn_eff + own / (attn_eff if fresh_eff is None else fresh_eff)) / self.attn_peak
        return (self.prefill_gemm_peak_s_per_token * t + attn) / self.gpus

    def decode_peak_s(self, batch: ArrayLike, ctx: ArrayLike, dense_tokens: ArrayLike | None = None) -> np.ndarray:
        """Seconds one GPU needs for its share of a decode step's FLOPs at 100 % of peak (as above); the weight GEMMs
        run over ``dense_tokens`` (a padded CUDA-graph batch) where given, attention over the real ``batch``."""
        b = np.asarray(batch, dtype=float)
        d = b if dense_tokens is None else np.asarray(dense_tokens, dtype=float)
        return d * self.gemm_peak_s_per_token / self.gpus + self.decode_attn_peak_s(b, ctx)

    def decode_attn_peak_s(self, batch: ArrayLike, ctx: ArrayLike) -> np.ndarray:
        """The attention part of :meth:`decode_peak_s`: ``batch`` query tokens over their context, one GPU's share."""
        b = np.asarray(batch, dtype=float)
        return b * 2.0 * self._attn_dims("decode") * self._attended(np.asarray(ctx, dtype=float)) / self.attn_peak \
            / self.gpus

    def decode_attn_pad(self, tokens_per_seq: float = 1.0) -> float:
        """Query rows the MLA decode kernel computes per real one: it tiles each sequence's heads x tokens by 64
        rows [S-FlashMLA], so a GPU holding 16 of the 128 heads (TP8) pays for 64; 1 for other attention."""
        if self.model.attention != "mla":
            return 1.0
        rows = self.model.get("q_heads") / (1.0 if self.dp_attention else self.gpus) * max(tokens_per_seq, 1.0)
        return math.ceil(rows / ATTN_TILE_ROWS - 1e-9) * ATTN_TILE_ROWS / rows

    @property
    def decode_attn_eff(self) -> float | None:
        """The decode attention kernel's published fraction of the BF16 peak, where the catalog has one for this
        model's attention on this chip (MLA: ``mla_decode_eff``); None: the decode step's fitted ``mfu``."""
        return self.accel.mla_decode_eff if self.model.attention == "mla" else None

    def decode_bytes_per_gpu(self, batch: ArrayLike, ctx: ArrayLike, tokens: ArrayLike | None = None) -> np.ndarray:
        """Bytes one GPU streams per decode step: its share of the weights ``tokens`` tokens touch (``batch`` when
        not given; a speculative verify step routes each sequence's drafted tokens too; under expert parallelism
        the busiest rank's, :meth:`busiest_rank_experts`) plus the batch's KV."""
        b = np.maximum(np.asarray(batch, dtype=float), 1.0)
        t = b if tokens is None else np.maximum(np.asarray(tokens, dtype=float), 1.0)
        touched = (self.active_bytes(t) - self.nonexpert_read_bytes) / self.gpus
        if self.experts and self.expert_parallel > 1:  # the step waits for the rank that touched the most experts
            touched = self.moe_layers * self.expert_bytes * self.busiest_rank_experts(t) * self.expert_parallel / self.gpus
        weights = self.nonexpert_share(self.nonexpert_read_bytes) + touched
        return weights + self.decode_kv_bytes_per_gpu(b, ctx)

    def decode_kv_bytes_per_gpu(self, batch: ArrayLike, ctx: ArrayLike) -> np.ndarray:
        """The KV part of :meth:`decode_bytes_per_gpu`: the ``batch`` sequences' context, which the decode attention
        reads in a kernel of its own."""
        b = np.maximum(np.asarray(batch, dtype=float), 1.0)
        return b * self.kv_seq_bytes(ctx) / self.kv_divisor

    def busiest_rank_experts(self, batch: ArrayLike) -> np.ndarray:
        """Expected distinct experts (per MoE layer) the busiest of the ``expert_parallel`` ranks touches in a decode
        step of ``batch`` sequences: each rank holds E/ep whole experts, each touched with probability
        1 − (1 − k/E)^B under uniform routing; the expected maximum over the ranks of these binomial counts
        (treated as independent). Under tensor-parallel experts every GPU reads a slice of every touched expert and
        no rank waits for another; under EP a small batch touches the ranks unevenly."""
        from scipy.stats import binom

        ep = int(self.expert_parallel)
        n = int(round(self.experts / ep))
        b = np.atleast_1d(np.maximum(np.asarray(batch, dtype=float), 1.0))
        p = 1.0 - (1.0 - self.topk / self.experts) ** b
        k = np.arange(n)[:, None]
        out = np.sum(1.0 - binom.cdf(k, n, p[None, :]) ** ep, axis=0)
        return out.reshape(np.shape(batch)) if np.ndim(batch) else out[0]

    def comm_bytes_per_gpu(self, tokens: ArrayLike) -> np.ndarray:
        """Bytes one GPU sends over the scale-up link for ``tokens`` tokens in one forward pass: two all-reduces of
        the BF16 activations per layer under tensor parallelism, a ring's 2·(g−1)/g of the message M each plus, up to
        the engines' one-shot size (:func:`one_shot_max_bytes`), (g−1)·(1 − 2/g)·M more: a one-shot all-reduce moves
        (g−1)·M; above that size the two-shot kernel moves the ring's bytes and pays the one-shot excess at the
        threshold as its second stage's latency (the engine switches where the two cost the same), so the time
        grows with M without a step;
        with data-parallel attention the MoE layers' all-to-all dispatch (FP8) and combine (BF16) of each
        rank's tokens to its top-k experts instead (hardware.md §5.2, t_comm)."""
        t = np.asarray(tokens, dtype=float)
        g = float(self.gpus)
        if g <= 1:
            return 0.0 * t
        hidden = self.model.get("hidden")
        if self.dp_attention:
            k = self.topk if self.experts else 1.0
            layers = self.moe_layers if self.experts else self.layers
            return layers * (t / g) * k * hidden * 3.0 * (g - 1.0) / g
        msg = t * hidden * 2.0  # one all-reduce's BF16 message
        one_shot = one_shot_max_bytes(g, self.engine, hidden, self.accel.vendor)
        return self.layers * 2.0 * (2.0 * (g - 1.0) / g * msg + (g - 1.0) * (1.0 - 2.0 / g) * np.minimum(msg, one_shot))

    def comm_s(self, tokens: ArrayLike) -> np.ndarray:
        """Seconds of :meth:`comm_bytes_per_gpu` over the accelerator's links (per direction): the scale-up link
        inside one scale-up domain; an instance larger than the domain (MI355X EP16 over two 8-GPU nodes) sends
        the traffic that leaves its domain over the scale-out NIC — all of a ring all-reduce's, the off-domain
        share (g − D)/(g − 1) of an all-to-all's — and the slower of the two links binds."""
        b = self.comm_bytes_per_gpu(tokens)
        g, dom = float(self.gpus), self.scaleup_domain
        if g <= dom:
            return b / self.scaleup_bw
        off = (g - dom) / (g - 1.0) if self.dp_attention else 1.0
        return np.maximum(b * (1.0 - off) / self.scaleup_bw, b * off / self.scaleout_bw)

    @property
    def scaleup_domain(self) -> float:
        """Accelerators one scale-up link connects (unbounded when the catalog names none)."""
        f = self.accel.fields.get("scaleup_domain")
        return f.value if f is not None else math.inf

    @property
    def scaleout_bw(self) -> float:
        f = self.accel.fields.get("scaleout_bw")
        return f.value if f is not None else DEFAULT_SCALEOUT_BW

    @property
    def scaleup_bw(self) -> float:
        f = self.accel.fields.get("scaleup_bw")
        return f.value if f is not None else DEFAULT_SCALEUP_BW

    @property
    def peak(self) -> float:
        return self.accel.peak_flops(self.precision)

    @property
    def attn_peak(self) -> float:
        return self.accel.peak_flops("bf16")

    @property
    def layers(self) -> float:
        return self.model.get("layers")

    @property
    def crossing_s(self) -> float:
        """Seconds a step's tensor-parallel all-reduces spend crossing the scale-out network: an instance wider than
        its scale-up domain (H100 TP16 over two nodes) runs each of its two all-reduces per layer through the NIC,
        which adds :data:`SCALEOUT_ALLREDUCE_S`; 0 inside one domain and under data-parallel attention (its
        all-to-all's fan-out is fitted, cross-node points included)."""
        if self.dp_attention or self.gpus <= self.scaleup_domain:
            return 0.0
        return 2.0 * self.layers * SCALEOUT_ALLREDUCE_S


# --- times ------------------------------------------------------------------------------------------------
def decode_step_parts(dep: Deployment, p: StepParams, batch: ArrayLike, ctx: ArrayLike,
                      prefill_rate: ArrayLike = 0.0, prefill_new: ArrayLike = 0.0,
                      prefill_cached: ArrayLike = 0.0, padded: bool = False) -> dict[str, np.ndarray]:
    """One decode step for ``batch`` sequences at mean context ``ctx``, split into ``overhead`` (fixed step
    overhead, collectives, per-prefill scheduling), ``bandwidth`` and ``compute``, which add: decode kernels run
    one after another (attention reads KV, then the GEMMs), as in the serving equations
    (:func:`agentprof.replay.equations.times`, the form the free terms were fitted in). ``prefill_rate``
    prefills of ``prefill_new`` tokens after ``prefill_cached`` ride each step (chunked prefill in aggregated
    serving): their FLOPs add to the step's compute. With MTP the step's FLOPs and collectives carry each
    sequence's ``p.draft_tokens`` drafted tokens too; its bytes (weights, each sequence's KV) are read once.
    ``padded`` (a step of a whole number of sequences): the kernels run at the engine's next captured CUDA-graph
    batch (:func:`agentprof.catalog.kvcache.graph_batch`), so the weights its padding slots route to, the GEMM
    FLOPs and the collectives are those of the padded batch; KV reads and attention stay the real sequences'."""
    b = np.asarray(batch, dtype=float)
    g = graph_batch(dep.engine, b) if padded else b
    tok, gtok = b * (1.0 + p.draft_tokens), g * (1.0 + p.draft_tokens)
    rate = np.asarray(prefill_rate, dtype=float)
    bw_s = dep.decode_bytes_per_gpu(b, ctx, gtok if p.verify_weights else g) / (p.mbu * dep.accel.hbm_bw)
    pf = np.where(rate > 0, dep.prefill_peak_s(prefill_new, prefill_cached, p.attn_rel, p.fresh_rel, CHUNK_TOKENS),
                  0.0)
    cmp_s = dep.decode_peak_s(tok, ctx, gtok) / p.mfu + rate * pf / p.prefill_mfu
    if p.dec_attn_eff:  # the attention over its kernel's query tiles at the kernel's own efficiency
        att_s = dep.decode_attn_peak_s(tok, ctx)
        cmp_s = cmp_s - att_s / p.mfu + att_s * dep.decode_attn_pad(1.0 + p.draft_tokens) / p.dec_attn_eff
    over = p.t_fixed_s + p.draft_s + dep.comm_s(np.maximum(gtok, 1.0)) + rate * p.t_req_s
    return {"overhead": over + 0.0 * bw_s, "bandwidth": bw_s + 0.0 * cmp_s, "compute": cmp_s + 0.0 * bw_s}


def decode_step_s(dep: Deployment, p: StepParams, batch: ArrayLike, ctx: ArrayLike,
                  prefill_rate: ArrayLike = 0.0, prefill_new: ArrayLike = 0.0,
                  prefill_cached: ArrayLike = 0.0, padded: bool = False) -> np.ndarray:
    """One decode step (time per step, not per token): fixed overhead + collectives + streamed bytes at ``mbu``
    of HBM bandwidth + FLOPs at ``mfu`` of peak (:func:`decode_step_parts`)."""
    parts = decode_step_parts(dep, p, batch, ctx, prefill_rate, prefill_new, prefill_cached, padded)
    return parts["overhead"] + parts["bandwidth"] + parts["compute"]


def prefill_chunks(new: ArrayLike, budget: ArrayLike = CHUNK_TOKENS) -> np.ndarray:
    """Scheduler steps a prefill of ``new`` tokens takes under chunked prefill with a per-step token ``budget``
    (at least one)."""
    return np.maximum(np.ceil(np.asarray(new, dtype=float) / np.asarray(budget, dtype=float)), 1.0)


def pass_prompts(batch: ArrayLike, decode_tokens: ArrayLike, new: ArrayLike) -> np.ndarray:
    """Prompts of ``new`` tokens one prefill pass holds (:attr:`agentprof.replay.equations.Work.pf_batch`): its
    ``batch`` budget less the ``decode_tokens`` riding the same step (0 where prefill runs alone or in a prefill
    worker), at least one."""
    room = np.asarray(batch, dtype=float) - np.asarray(decode_tokens, dtype=float)
    return np.maximum(room / np.maximum(np.asarray(new, dtype=float), 1.0), 1.0)


def prefill_parts(dep: Deployment, p: StepParams, new: ArrayLike, cached: ArrayLike = 0) -> dict[str, np.ndarray]:
    """Prefill ``new`` tokens attending to a ``cached`` prefix already in HBM, alone on the deployment:
    ``overhead`` (one fixed step overhead and the collectives per chunk, plus the per-prefill overhead) and the
    larger of ``compute`` (at ``mfu``) and ``bandwidth`` (weights once, prefix KV read, new KV written)."""
    t = np.asarray(new, dtype=float)
    c = np.asarray(cached, dtype=float)
    peak = dep.prefill_peak_s(t, c, p.attn_rel, p.fresh_rel, CHUNK_TOKENS)
    # data-parallel attention: its chunks' attention and non-expert GEMMs on its own rank
    cmp_s = peak / p.prefill_mfu + (dep.gpus - 1.0) * prefill_rank_s(dep, p, t, c, peak)
    mem_s = prefill_bytes_per_gpu(dep, t, c) / (p.mbu * dep.accel.hbm_bw)
    over = prefill_chunks(t) * p.t_fixed_s + dep.comm_s(t) + p.t_req_s
    on = t > 0
    bound = cmp_s >= mem_s
    return {"overhead": np.where(on, over, 0.0), "compute": np.where(on & bound, cmp_s, 0.0),
            "bandwidth": np.where(on & ~bound, mem_s, 0.0)}


def prefill_rank_s(dep: Deployment, p: StepParams, new: ArrayLike, cached: ArrayLike = 0,
                   peak_s: ArrayLike | None = None) -> np.ndarray:
    """Seconds of a prefill chunk's attention and non-expert GEMMs at the instance's spread share (what
    :meth:`Deployment.prefill_peak_s` divides over the GPUs): under data-parallel attention its own rank runs
    them alone, ``gpus`` times this. 0 without data-parallel attention. ``peak_s``: the chunk's
    ``prefill_peak_s(new, cached, p.attn_rel, p.fresh_rel)`` where the caller has it already."""
    t = np.asarray(new, dtype=float)
    if not dep.dp_attention:
        return np.zeros_like(t)
    if peak_s is None:
        peak_s = dep.prefill_peak_s(t, cached, p.attn_rel, p.fresh_rel)
    experts = (dep.prefill_gemm_peak_s_per_token - dep.prefill_rank_gemm_peak_s_per_token) * t / dep.gpus
    return (np.asarray(peak_s, dtype=float) - experts) / p.prefill_mfu


def busiest_rank_s(dep: Deployment, rank_s: np.ndarray) -> float:
    """How much longer a prefill-only step of chunks whose spread rank parts are ``rank_s``
    (:func:`prefill_rank_s`) takes under data-parallel attention than spread: each chunk's part runs on its own
    rank, so the step lasts as the busiest rank, at least the largest chunk's (``gpus`` times its share) and at
    least the average rank's (the sum). The experts stay spread."""
    r = np.asarray(rank_s, dtype=float)
    total = float(r.sum())
    return max(dep.gpus * float(r.max(initial=0.0)), total) - total if dep.dp_attention else 0.0


def prefill_chunk_s(dep: Deployment, p: StepParams, new: ArrayLike, cached: ArrayLike, req_share: ArrayLike,
                    riding: bool) -> np.ndarray:
    """Seconds a scheduler step spends on a prefill chunk of ``new`` tokens after ``cached`` context (several
    requests' chunks in one step come as one batched chunk): its collectives, ``req_share`` of the per-prefill
    overhead (the chunk's share of its request's prompt, so a prefill pays ``t_req`` once over its chunks) and
    the larger of its FLOPs at ``mfu_pf`` and its bytes at ``mbu``. ``riding``: the step also decodes, whose
    step already pays the fixed overhead and streams the weights, so the chunk adds only its KV traffic
    (context read, new KV written) on the bytes side, as a riding prefill adds only its FLOPs and ``t_req`` to
    a decode step in the serving equations. Alone, a chunk pays the fixed step overhead and reads the weights:
    with one chunk this is :func:`prefill_s`. Vectorized over arrays of chunks (0 where ``new`` is 0)."""
    t = np.asarray(new, dtype=float)
    c = np.asarray(cached, dtype=float)
    peak = dep.prefill_peak_s(t, c, p.attn_rel, p.fresh_rel)
    cmp_s = peak / p.prefill_mfu
    mem = dep.kv_seq_bytes(c + t) / dep.kv_divisor if riding else prefill_bytes_per_gpu(dep, t, c)
    over = dep.comm_s(t) + np.asarray(req_share, dtype=float) * p.t_req_s + (0.0 if riding else p.t_fixed_s)
    # a prefill-only step of one chunk under data-parallel attention: its rank runs the chunk's attention and
    # non-expert GEMMs alone (a step that also decodes: not priced, as the equations' riders)
    if not riding:
        cmp_s = cmp_s + (dep.gpus - 1.0) * prefill_rank_s(dep, p, t, c, peak)
    return np.where(t > 0, over + np.maximum(cmp_s, mem / (p.mbu * dep.accel.hbm_bw)), 0.0)


def prefill_bytes_per_gpu(dep: Deployment, new: ArrayLike, cached: ArrayLike = 0) -> np.ndarray:
    """Bytes one GPU moves in a prefill: its share of the touched weights, the prefix KV read, the new KV written."""
    t = np.asarray(new, dtype=float)
    c = np.asarray(cached, dtype=float)
    touched = (dep.active_bytes(np.maximum(t, 1.0)) - dep.nonexpert_read_bytes) / dep.gpus
    weights = dep.nonexpert_share(dep.nonexpert_read_bytes) + touched
    return weights + dep.kv_seq_bytes(c + t) / dep.kv_divisor


def prefill_s(dep: Deployment, p: StepParams, new: ArrayLike, cached: ArrayLike = 0) -> np.ndarray:
    """Seconds to prefill ``new`` tokens after a ``cached`` prefix, alone (:func:`prefill_parts`)."""
    parts = prefill_parts(dep, p, new, cached)
    return parts["overhead"] + parts["compute"] + parts["bandwidth"]


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
    """Per-call replayed times (seconds, arrays): first token, decode, KV loads, queueing, the total, and
    ``waiting_for``: the total split into compute, bandwidth, overhead, kv_load and queueing (they sum to it)."""

    ttft_s: np.ndarray
    decode_s: np.ndarray
    prefill_s: np.ndarray
    load_s: np.ndarray
    queue_s: np.ndarray
    waiting_for: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def total_s(self) -> np.ndarray:
        return self.ttft_s + self.decode_s


def call_work(dep: Deployment, input_tokens: ArrayLike, cached_tokens: ArrayLike, output_tokens: ArrayLike,
              batch: float = 1, load_s: ArrayLike = 0.0, mem_util: float = 0.9, wait_steps: float = 0.0,
              budget: float = CHUNK_TOKENS, draft_tokens: float = 0.0, verify_weights: bool = False,
              ahead_steps: float = 0.0, prefill_alone: bool = False) -> Work:
    """The parameter-free work of model calls on an aggregated deployment shared by ``batch`` identical
    clients (:class:`agentprof.replay.equations.Work`). With ``draft_tokens`` each decode step verifies that many
    drafted tokens per sequence too (FLOPs and collectives; with ``verify_weights`` also the weights they touch),
    as :func:`decode_step_parts` prices a step; ``ahead_steps``: the steps an overlap scheduler launches ahead;
    ``prefill_alone``: the engine runs each prompt in its own pass while the batch waits."""
    inp = np.atleast_1d(np.asarray(input_tokens, dtype=float))
    cached = np.minimum(np.atleast_1d(np.asarray(cached_tokens, dtype=float)), inp)
    out = np.maximum(np.atleast_1d(np.asarray(output_tokens, dtype=float)), 1.0)
    new = inp - cached
    ctx_mean = inp + out / 2.0
    b = float(max(batch, 1))
    # a batch drains: sequences finish and free their KV, so the capacity is counted at the mean context
    cap = np.maximum(dep.max_batch(ctx_mean, mem_util), 1.0)
    running = np.minimum(cap, b)
    tok = running * (1.0 + draft_tokens)
    z = np.zeros_like(inp)
    # the prefill's attention at η = 1, split once: each chunk's own tokens, and what came before them
    own, before, expand = dep._prefill_attn(new, cached, budget)
    per_s = dep.attn_peak * dep.gpus
    return Work(
        b_run=running, over=np.maximum(b / cap - 1.0, 0.0), osl=out, n_chunks=prefill_chunks(new, budget),
        comm_s=dep.comm_s(tok), comm_pf_s=dep.comm_s(new) / prefill_chunks(new, budget),
        bw_s=dep.decode_bytes_per_gpu(running, ctx_mean, tok if verify_weights else None) / dep.accel.hbm_bw,
        bw_kv_s=dep.decode_kv_bytes_per_gpu(running, ctx_mean) / dep.accel.hbm_bw,
        cmp_s=dep.decode_peak_s(tok, ctx_mean), cmp_attn_s=dep.decode_attn_peak_s(tok, ctx_mean),
        attn_pad=z + dep.decode_attn_pad(1.0 + draft_tokens),
        pf_gemm_s=dep.prefill_gemm_peak_s_per_token * new / dep.gpus,
        pf_gemm_rank_s=dep.prefill_rank_gemm_peak_s_per_token * new / dep.gpus,
        pf_ranks=z + (dep.gpus if dep.dp_attention else 1.0),
        pf_attn_s=(own + before + expand) / per_s, pf_attn_fresh_s=own / per_s,
        pf_mem_s=np.where(new > 0, prefill_bytes_per_gpu(dep, new, cached), 0.0) / dep.accel.hbm_bw,
        pf_kv_s=np.where(new > 0, dep.kv_seq_bytes(cached + new) / dep.kv_divisor, 0.0) / dep.accel.hbm_bw,
        disagg=np.zeros(inp.shape, dtype=bool), conc=z + b, n_prefill=z + 1.0, xfer_s=z,
        load_s=z + np.asarray(load_s, dtype=float), wait_steps=z + wait_steps, ahead=z + ahead_steps,
        pf_alone=z + float(prefill_alone),
        pf_batch=pass_prompts(budget, 0.0 if prefill_alone else running, new))


def call_times(dep: Deployment, p: StepParams, input_tokens: np.ndarray, cached_tokens: np.ndarray,
               output_tokens: np.ndarray, batch: float = 1, load_s: ArrayLike = 0.0,
               mem_util: float = 0.9) -> CallTimes:
    """Replay model calls: prefill of the uncached tokens attending to the cached prefix (one step per chunk),
    loading the cached prefix from its tier (``load_s``, HBM = 0), then ``output−1`` decode steps at the mean
    context. ``batch`` identical clients share the deployment: each decode step serves the running batch and
    carries the other clients' prefill chunks; clients beyond the KV capacity wait for the batch to drain."""
    inp = np.atleast_1d(np.asarray(input_tokens, dtype=float))
    cached = np.minimum(np.atleast_1d(np.asarray(cached_tokens, dtype=float)), inp)
    w = call_work(dep, inp, cached, output_tokens, batch, load_s, mem_util, p.wait_steps,
                  draft_tokens=p.draft_tokens, verify_weights=p.verify_weights, ahead_steps=p.ahead_steps,
                  prefill_alone=p.prefill_alone)
    t = times(w, p.t_fixed_s + p.draft_s, p.t_fixed_s, p.mbu, p.mfu, p.request_s(inp), p.q, p.t_req_s, p.accept,
              p.attn_eff, p.prefill_mfu, attn_fresh_eff=p.fresh_eff, dec_attn_eff=p.dec_attn_eff or None)
    return CallTimes(t.ttft, t.e2e - t.ttft, prefill_s(dep, p, inp - cached, cached), w.load_s, t.queue, t.parts)


def tokens_per_second_per_user(dep: Deployment, p: StepParams, ctx: float, batch: int = 1) -> float:
    """Decode speed one user sees (1/TPOT) at context ``ctx``."""
    return float(p.accept / decode_step_s(dep, p, batch, ctx))


def ceil_pow2(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1.0))))
