"""The one place the serving simulation calls the device cost model: a scheduler step's batch into seconds.

A step holds decode sequences (their count and mean context) and prefill chunks. Decode time is the cost
model's ``decode_step_s`` for the batch at its mean context (tabulated per batch size over a context grid and
interpolated: exact while it is piecewise linear in context); a step's prefill chunks are priced together as
``costmodel.prefill_chunk_s`` prices one chunk, with each chunk's causal attention and KV traffic summed:
riding a decode step they add their FLOPs (or KV traffic) and collectives, the step already paying the fixed
overhead and the weight reads; alone they are a prefill step. Each prefill pays ``t_req`` once over
its chunks. Cached KV from a lower tier costs ``kv_load_s`` over the host link (PCIe or NVLink-C2C) or
``disk_load_s``. With one sequence this reproduces ``costmodel.call_times`` at batch 1 (``t0 + load + prefill +
wait_steps·t_step`` to the first token, then ``t_step/a`` per token).
"""

from __future__ import annotations

import bisect

import numpy as np

from agentprof.replay.costmodel import (
    Deployment,
    StepParams,
    busiest_rank_s,
    decode_step_s,
    disk_load_s,
    kv_load_s,
    prefill_bytes_per_gpu,
    prefill_chunk_s,
    prefill_rank_s,
)
from agentprof.replay.systems import Resolved

_GRID = [0.0] + [float(2 ** k) for k in range(6, 25)]  # 0, 64 … 16M tokens of context


class StepCost:
    """Step times of one deployment (one replica of a system) for the simulation."""

    def __init__(self, dep: Deployment, params: StepParams, mem_util: float, host_link_bw: float,
                 disk_bw: float, copies: float = 1.0) -> None:
        self.dep = dep
        self.p = params
        # each simulated request stands for ``copies`` identical ones (a large benchmark simulated as one of
        # ``copies`` identical slices: batches, chunks and KV held scale by it, the pool per slice shrinks)
        self.copies = float(max(copies, 1.0))
        # a disaggregated prefill pool's batched step overlaps one prompt's collectives with the others'
        # compute (only one prompt's are exposed): the serving equations size the pool by its prompts' compute
        # or KV traffic alone (``equations.times``: W), so the fitted terms carry that overlap
        self.overlap_comm = False
        self.host_link_bw, self.disk_bw = host_link_bw, disk_bw
        self.t0_s = float(self.p.t0_s)
        self.accept = float(max(self.p.accept, 1e-9))
        self.wait_steps = float(getattr(self.p, "wait_steps", 0.0))
        self.ahead_steps = float(getattr(self.p, "ahead_steps", 0.0))
        # the engine runs a prompt in its own pass while the running sequences wait (SGLang), not in their steps
        self.prefill_alone = bool(getattr(self.p, "prefill_alone", False))
        self.pool_tokens = self.dep.kv_pool_tokens_per_gpu(mem_util) / self.copies
        # bytes one token of KV takes in a CPU or disk tier: one logical copy (GQA heads sharded over the
        # ranks add up to it; an MLA latent is stored once, LMCache's save_only_first_rank)
        self.tier_token_bytes = float(self.dep.kv_token_bytes)
        self._rows: dict[int, list[float]] = {}

    @classmethod
    def of(cls, r: Resolved) -> StepCost:
        """Step costs of a model resolved on a catalog system."""
        return cls(r.dep, r.params, r.system.mem_util, r.host_link_bw, r.disk_bw)

    def _step(self, b: int, ctx: np.ndarray) -> np.ndarray:
        """A decode step of ``b`` sequences (``costmodel.decode_step_s``: fixed overhead + collectives + bytes at
        ``mbu`` + FLOPs at ``mfu``, as ``equations.times`` and so ``call_times`` time it), its kernels at the
        engine's captured CUDA-graph batch (``padded``)."""
        return decode_step_s(self.dep, self.p, max(b, 1) * self.copies, ctx, padded=True)

    def _row(self, b: int) -> list[float]:
        row = self._rows.get(b)
        if row is None:
            row = [float(x) for x in self._step(b, np.asarray(_GRID))]
            self._rows[b] = row
        return row

    def decode_linear(self, b: int, ctx: float) -> tuple[float, float]:
        """``(alpha, beta)`` with step time ``alpha + beta·c`` around mean context ``ctx`` for ``b`` sequences."""
        row = self._row(b)
        i = min(max(bisect.bisect_right(_GRID, ctx) - 1, 0), len(_GRID) - 2)
        beta = (row[i + 1] - row[i]) / (_GRID[i + 1] - _GRID[i])
        return row[i] - beta * _GRID[i], beta

    def decode_s(self, b: int, ctx: float) -> float:
        a, beta = self.decode_linear(b, ctx)
        return a + beta * ctx

    def chunks_s(self, chunks: list[tuple[float, ...]], decoding: int = 0) -> float:
        """One step's prefill chunks ``(tokens, context before them[, share of the request's prompt])`` as one
        batched chunk (attention summed: an effective context gives the same causal attention work), in a step
        that also decodes ``decoding`` sequences (:func:`agentprof.replay.costmodel.prefill_chunk_s`). A chunk
        without a share pays the whole per-prefill overhead."""
        if not chunks:
            return 0.0
        if self.copies > 1.0 or len(chunks) > 1 or self.overlap_comm:
            return self._batch_s(chunks, decoding > 0)
        ch = chunks[0]
        return float(prefill_chunk_s(self.dep, self.p, ch[0], ch[1], ch[2] if len(ch) > 2 else 1.0, decoding > 0))

    def _batch_s(self, chunks: list[tuple[float, ...]], riding: bool) -> float:
        """Several requests' chunks in one step (each standing for ``copies`` identical ones), priced as
        :func:`prefill_chunk_s` prices one chunk — weights read once, collectives over all the tokens, the
        larger of FLOPs and bytes — with each chunk's own causal attention and KV traffic summed: prompts
        batched together do not attend to each other (priced as one long prompt, nine 900-token prompts cost
        1.7x their FLOPs)."""
        dep, p, k = self.dep, self.p, self.copies
        t = np.array([ch[0] for ch in chunks], dtype=float)
        c = np.array([ch[1] for ch in chunks], dtype=float)
        share = sum(ch[2] if len(ch) > 2 else 1.0 for ch in chunks) * k
        total = float(t.sum()) * k
        if total <= 0:
            return 0.0
        peak = dep.prefill_peak_s(t, c, p.attn_rel, p.fresh_rel)
        cmp_s = k * float(np.sum(peak)) / p.prefill_mfu
        if not riding:  # data-parallel attention: the step lasts as its busiest rank (one rank per chunk)
            cmp_s += busiest_rank_s(dep, np.repeat(prefill_rank_s(dep, p, t, c, peak), int(round(k))))
        kv = k * float(np.sum(dep.kv_seq_bytes(c + t))) / dep.kv_divisor
        if riding:
            mem = kv
        else:
            mem = float(prefill_bytes_per_gpu(dep, total, 0.0)) - float(dep.kv_seq_bytes(total)) / dep.kv_divisor + kv
        comm = float(dep.comm_s(total))
        if self.overlap_comm:
            comm /= max(len(chunks) * k, 1.0)
        over = comm + share * p.t_req_s + (0.0 if riding else p.t_fixed_s)
        return over + max(cmp_s, mem / (p.mbu * dep.accel.hbm_bw))

    def chunk_series_s(self, tokens: float, contexts: list[float], share: float, decoding: int) -> list[float]:
        """``chunks_s([(tokens, c, share)], decoding)`` for each context ``c`` in one vectorized call (a long
        prefill's equal chunks)."""
        if self.copies > 1.0:
            return [self._batch_s([(tokens, c, share)], decoding > 0) for c in contexts]
        n = len(contexts)
        return [float(x) for x in np.broadcast_to(
            prefill_chunk_s(self.dep, self.p, np.full(n, tokens), np.asarray(contexts, dtype=float), share,
                            decoding > 0), (n,))]

    def arrival_s(self, input_tokens: float) -> float:
        """From issue to the scheduler: the request overhead ``t0`` plus the frontend's tokenization of the prompt
        (:meth:`agentprof.replay.costmodel.StepParams.request_s`)."""
        return float(self.p.request_s(input_tokens))

    def first_token_s(self, b: int, ctx: float) -> float:
        """The scheduler's polling / streaming interval before the first token (``wait_steps`` decode steps,
        from the serving recipe), and, while others decode (``b`` > 1), the steps an overlap scheduler has
        launched ahead; waiting for a running step and riding the batch's decode are simulated."""
        return (self.wait_steps + (self.ahead_steps if b > 1 else 0.0)) * self.decode_s(max(b, 1), ctx)

    def load_s(self, cpu_tokens: float, disk_tokens: float) -> float:
        """Bringing cached prefix KV into HBM from the CPU tier (host link) and the disk tier."""
        t = 0.0
        if cpu_tokens > 0:
            t += float(kv_load_s(self.dep, cpu_tokens, self.host_link_bw))
        if disk_tokens > 0:
            t += float(disk_load_s(self.dep, disk_tokens, self.disk_bw))
        return t
