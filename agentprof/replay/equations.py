"""The serving equations, once: time to first token, time per output token and what each call waits for.

Both the replay (:func:`agentprof.replay.costmodel.call_times`, one model call on a deployment) and the
calibration (:func:`agentprof.replay.points.predict`, one benchmark point) build a :class:`Work` — the
parameter-free seconds each piece of work takes at 100 % of bandwidth or compute — and pass it here with the
free terms. Everything is vectorized over numpy arrays. Equations: docs/DEVICE_MODEL.md §2.2.

Aggregated serving (chunked prefill): a decode step carries the other clients' prefill chunks, so compute
overlaps bandwidth (``max``), not adds to it; a new request's prefill rides one step per chunk; an engine that runs
prefill alone (SGLang) stalls the running batch for each other client's whole prefill pass instead; clients beyond
the KV capacity wait until the running batch drains. Disaggregated serving: decode workers without
prefill, a prefill pool of ``n_prefill`` workers that batches prompts (a closed loop bounds it), and the KV
transfer between the pools over the scale-up link, then the hand-off: the decode engine takes the request in on
its own iterations, so its first token waits a number of decode steps (``handoff``), not a fixed time; clients
beyond the decode slots (KV capacity, the recipe's max batch) and a saturated prefill pool are two bottlenecks of
one closed loop, and the first token waits for the slower of the two.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

QUEUE_SPREAD = 0.15
"""Log-normal spread (sd of log) of a prefill's service time that the queue's wait is averaged over. Near the knee
of a closed loop the wait is steep in the service time, so a point estimate of it turns a prefill a little too slow
into a wait many times too long; the mean over a spread does not. Estimate: chosen among 0, 0.15 and 0.3 on the
ISL/OSL cross-validation (p90 TTFT 45.9, 39.4, 47.9 %: a wide spread puts the saturated tail into every loop sized
near its knee, as the disaggregated recipes are); the 8k1k anchors' peak-throughput ratios scatter with a log-sd of
0.2 (docs/DEVICE_MODEL.md §4, "Long prompts")."""
_Z, _W = np.polynomial.hermite_e.hermegauss(5)
_W = _W / _W.sum()
WAITING_FOR = ("compute", "bandwidth", "overhead", "kv_load", "queueing")
"""What a call waits for: compute (FLOPs), weight/KV bandwidth, fixed overhead (per step: launches, collectives,
scheduling; per request), KV load from lower tiers (and the disaggregated KV transfer), queueing."""


@dataclass
class Work:
    """Parameter-free per-call (or per-point) quantities; seconds at 100 % efficiency, per accelerator."""

    b_run: np.ndarray       # running decode batch per instance (after the KV capacity)
    over: np.ndarray        # clients beyond the capacity / capacity (> 0: they queue for KV space or decode slots)
    osl: np.ndarray         # output tokens (mean)
    n_chunks: np.ndarray    # prefill steps of the new tokens (chunked prefill)
    comm_s: np.ndarray      # decode step collectives over the scale-up link
    comm_pf_s: np.ndarray   # prefill collectives over the scale-up link (per prefill)
    bw_s: np.ndarray        # decode step bytes / HBM bandwidth
    cmp_s: np.ndarray       # decode step FLOPs / peak
    pf_gemm_s: np.ndarray   # one prefill's weight FLOPs / peak (prefill instance)
    pf_attn_s: np.ndarray   # one prefill's attention FLOPs / BF16 peak
    pf_mem_s: np.ndarray    # one prefill's bytes (weights once, KV read and written) / HBM bandwidth
    pf_kv_s: np.ndarray     # the KV part of pf_mem_s (what a prefill batched with others still moves alone)
    disagg: np.ndarray      # bool
    conc: np.ndarray        # clients (closed loop)
    n_prefill: np.ndarray   # prefill workers (disaggregated)
    xfer_s: np.ndarray      # prefill -> decode KV transfer (disaggregated)
    load_s: np.ndarray      # KV load of the cached prefix from a lower tier (replay)
    wait_steps: np.ndarray  # decode steps a new request waits for the scheduler (recv/stream interval / 2)
    # what one sequence fewer in the decode batch takes off bw_s, cmp_s and comm_s (disaggregated points: the
    # decode batch is the clients not queued for prefill, :func:`decode_batch`); None keeps ``b_run``
    bw_seq_s: np.ndarray | None = None
    cmp_seq_s: np.ndarray | None = None
    comm_seq_s: np.ndarray | None = None
    # a disaggregated prefill worker's per-prompt collectives that do not overlap other prompts' compute (the
    # recipe runs its all-to-all without two-batch overlap: scheduling.toml [prefill_collectives]); None: none
    pf_serial_s: np.ndarray | None = None
    # the serving frontend's tokenizing of the prompt before the scheduler sees it (host work, one request after
    # another in the frontend, not queued here): paid on top of the request overhead t0; None: none
    front_s: np.ndarray | None = None
    # the part of pf_attn_s that is the new tokens attending among themselves (a fresh prompt's kernel, priced at
    # ``attn_fresh_eff`` where :func:`times` gets one); None: all of pf_attn_s at ``attn_eff``
    pf_attn_fresh_s: np.ndarray | None = None
    # steps an overlap or asynchronous scheduler has launched before it sees a new request (scheduling.toml
    # [ahead]): waited for, as the running step is, while others decode; None: none
    ahead: np.ndarray | None = None
    # the engine runs prefill in its own forward pass, first, while the running sequences wait (scheduling.toml
    # [prefill_alone]): each other client's prompt stalls the decode for a whole prefill, and a new prompt's
    # steps carry no decode work; None or 0: chunks ride decode steps
    pf_alone: np.ndarray | None = None
    # prompts one prefill pass holds (per scheduler): its batch budget (SGLang's --max-prefill-tokens, else the
    # step's token budget; less the decode batch's tokens where prompts ride decode steps) over the prompt's new
    # tokens. Engines take every waiting prompt that fits into the pass, and each pays for all of them
    # (:func:`batch_factor`); None or 1: one prompt at a time
    pf_batch: np.ndarray | None = None
    # schedulers one prefill pass runs in lockstep, each with its own queue and budget (data-parallel attention
    # ranks): a pass's step overhead is shared by all their prompts; None: 1
    pf_ranks: np.ndarray | None = None
    # the part of pf_gemm_s a data-parallel attention rank computes for its own prompt alone (its non-expert
    # GEMMs; :attr:`agentprof.replay.costmodel.Deployment.prefill_rank_gemm_peak_s_per_token`): with its attention,
    # one prompt's prefill runs on one of the ``pf_ranks`` ranks, so its own first token waits ``pf_ranks`` times
    # that share, while the pool's throughput (all ranks busy) keeps the spread work. None: spread over the instance
    pf_gemm_rank_s: np.ndarray | None = None
    # squared coefficient of variation of one prompt's prefill time across the requests (a benchmark's drawn
    # lengths): the queue's wait scales by (1 + cv²)/2 (Pollaczek-Khinchine); None: 1, exponential service
    svc_cv2: np.ndarray | None = None
    # the KV part of bw_s (the running batch's context, read by the decode attention): a step that carries a
    # prompt's chunk reads the weights once for the chunk and the decode (the read overlaps the chunk's GEMMs),
    # but the KV in a kernel of its own, which adds; None: all of bw_s overlaps the chunk
    bw_kv_s: np.ndarray | None = None
    # the decode attention part of cmp_s (and of cmp_seq_s), priced at its kernel's own efficiency where
    # :func:`times` gets one; None: all of cmp_s at ``mfu``
    cmp_attn_s: np.ndarray | None = None
    cmp_attn_seq_s: np.ndarray | None = None
    bw_kv_seq_s: np.ndarray | None = None   # the KV part of bw_seq_s
    attn_pad: np.ndarray | None = None      # query rows the decode attention kernel's tiles compute per real row
    # other prompts whose prefill a new request's step runs beside its own (TRT-LLM's attention-DP balance schedules
    # the held requests together: :func:`agentprof.replay.adpwait.adp_released_with`); their compute delays its first
    # token. None: none
    pf_with: np.ndarray | None = None


@dataclass
class Times:
    """First token, per output token, end to end, and the end-to-end time split by what it waits for."""

    ttft: np.ndarray
    tpot: np.ndarray
    e2e: np.ndarray
    queue: np.ndarray
    parts: dict[str, np.ndarray]
    decode_batch: np.ndarray | None = None
    """Sequences one decode step holds (per instance): ``b_run``, or a disaggregated pool's by Little's law."""


def batch_factor(rho: np.ndarray, cap: np.ndarray | float | None) -> np.ndarray:
    """How much longer a prompt waits when the engine takes every waiting prompt into its next pass, up to ``cap``
    prompts, than when it takes one at a time. Each prompt's first token leaves at the end of its pass, so it
    waits for the prompts queued behind it too. With Poisson arrivals at utilization ρ and passes as long as
    their prompts, a prompt shares its pass with m = ρ/(1 − ρ²) others on average (the size-biased pass length
    of the branching pass sequence), and the mean wait is FIFO's times 1 + (1 − ρ)·m (= (1 + 2ρ)/(1 + ρ)): 1 at
    light load, 1.5 near saturation. Past ``cap`` the rest wait for a later pass: the others, taken as
    exponential with mean m, count E[min(X, cap − 1)] = m·(1 − exp(−(cap − 1)/m)). A Monte Carlo of the queue
    agrees within 0.03 (ρ 0.3–0.9, cap 2 to unbounded; docs/DEVICE_MODEL.md §2.2)."""
    r = np.clip(np.asarray(rho, dtype=float), 0.0, 0.999)
    if cap is None:
        return np.ones_like(r)
    k1 = np.maximum(np.asarray(cap, dtype=float) - 1.0, 0.0)
    m = np.maximum(r / (1.0 - r * r), 1e-12)
    return 1.0 - (1.0 - r) * m * np.expm1(-k1 / m)


def closed_wait(clients: np.ndarray, demand: np.ndarray, think: np.ndarray, q: np.ndarray | float,
                spread: float | None = None, cap: np.ndarray | float | None = None) -> np.ndarray:
    """Mean wait (excluding its own service) at a queue that ``clients`` closed-loop clients visit once per cycle,
    each bringing ``demand`` seconds of work and spending ``think`` seconds elsewhere in the cycle. The smooth
    form of mean-value analysis for one queue and a delay: the wait is the larger root of
    ``W² − x·W − q·d²·(n − 1) = 0``, ``x = d·(n − 1) − think``: at light load ``q·d·u/(1 − u)``, ``u = d·(n − 1)/think``
    (the queueing factor ``q`` as the fit knows it), and past the knee the saturated loop's ``d·(n − 1) − think``
    (the queue sets the cycle, ``n·d``), with no cap or pole between. The wait is averaged over a log-normal
    ``spread`` of the demand (5-point Gauss-Hermite), so an uncertain service time near the knee gives a smooth
    mean, not a knife edge. ``cap``: prompts one pass takes from the queue (:func:`batch_factor` scales ``q`` at
    the arrival's utilization); None: one at a time."""
    spread = QUEUE_SPREAD if spread is None else spread
    n1 = np.maximum(np.asarray(clients, dtype=float) - 1.0, 0.0)
    d0 = np.maximum(np.asarray(demand, dtype=float), 0.0)
    z = np.maximum(np.asarray(think, dtype=float), 0.0)
    d = d0[..., None] * np.exp(spread * _Z)  # the nodes on a last axis: one pass over all of them
    x = d * n1[..., None] - z[..., None]
    qb = np.asarray(q, dtype=float)[..., None]
    if cap is not None:
        qb = qb * batch_factor(d * n1[..., None] / np.maximum(z[..., None], 1e-12), np.asarray(cap, float)[..., None])
    w = 0.5 * (x + np.sqrt(x * x + 4.0 * qb * d * d * n1[..., None]))
    return w @ _W


def median_wait(mean: np.ndarray, clients: np.ndarray, demand: np.ndarray, think: np.ndarray) -> np.ndarray:
    """The median of a closed loop's queue wait whose mean is ``mean`` (:func:`closed_wait`). Past the knee every
    arrival waits the saturated loop's ``d·(n − 1) − Z``; the rest is random. An arrival finds the server busy with
    probability ρ = d·(n − 1)/Z (the arrival theorem), and its wait is then about exponential with mean R/ρ (the
    M/M/1 form; Kingman's exponential law for heavier traffic). So half the arrivals wait none at ρ ≤ ½, and the
    median is (R/ρ)·ln 2ρ above: a benchmark's median first token holds no queue at light load."""
    n1 = np.maximum(np.asarray(clients, dtype=float) - 1.0, 0.0)
    d = np.maximum(np.asarray(demand, dtype=float), 0.0)
    z = np.maximum(np.asarray(think, dtype=float), 1e-12)
    det = np.maximum(d * n1 - z, 0.0)
    rnd = np.maximum(np.asarray(mean, dtype=float) - det, 0.0)
    rho = np.clip(d * n1 / z, 1e-12, 1.0)
    return det + np.where(rho > 0.5, rnd / rho * np.log(np.maximum(2.0 * rho, 1.0)), 0.0)


def _disagg_cycle(w: Work, t_step: np.ndarray, accept: np.ndarray, s_alone: np.ndarray, work: np.ndarray,
                  t0: np.ndarray, q: np.ndarray, handoff: np.ndarray | float) -> tuple[np.ndarray, ...]:
    """A disaggregated request at decode step ``t_step``: (tpot, prefill-pool wait, hand-off wait, the first
    token's time, the pool loop's think time). A closed loop of the clients holding a decode slot over the pool
    (:func:`_pool_loop`; :func:`closed_wait`, the pool as one queue: Seidmann's reduction of a multi-server
    station); the rest of the cycle (the prompt's own prefill, transfer, hand-off, decode) is the loop's think
    time."""
    tpot = t_step / accept
    # the hand-off: the decode engine takes the transferred request in on its own iterations (poll the
    # transfer, admit, emit the first token), so the wait is a number of its decode steps, not a fixed time
    hand = (w.wait_steps + handoff) * t_step
    base = t0 + s_alone + w.xfer_s + hand
    clients, d = _pool_loop(w, work)
    think = base - d + w.load_s + (w.osl - 1.0) * tpot
    q_dis = closed_wait(clients, d, think, q, cap=w.pf_batch)
    return tpot, q_dis, hand, base + q_dis, think


def _pool_loop(w: Work, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(clients, demand) of a disaggregated prefill pool's closed loop: every client (one waiting for a decode slot
    had its prefill first), each bringing ``work`` shared by the pool's ``n_prefill`` workers."""
    return w.conc, work / w.n_prefill


def _slot_hold(w: Work, hand: np.ndarray, decode: np.ndarray) -> np.ndarray:
    """The cycle of a disaggregated client when the recipe's decode slots bind: the slots turn over once per hold
    (from the hand-off to the last token), so ``n`` clients on ``s`` slots come round once per ``(n/s)·hold``."""
    return (1.0 + w.over) * (hand + decode)


def decode_batch(w: Work, step_s: Callable[[np.ndarray], np.ndarray], accept: np.ndarray, s_alone: np.ndarray,
                 work: np.ndarray, t0: np.ndarray, q: np.ndarray, handoff: np.ndarray | float,
                 iters: int = 5) -> np.ndarray:
    """Sequences a disaggregated decode worker holds: by Little's law its clients' share of the cycle spent
    decoding, ``clients · decode / cycle`` (the cycle the longer of the loop's and the slots' turnover,
    :func:`_slot_hold`) — near the prefill pool's knee the rest queue for prefill, not in the decode batch.
    ``step_s(b)`` is the decode step at batch ``b``, so this is a fixed point, found by secant steps from
    ``b_run`` (exact when the step is affine in the batch and the pool binds; the map is increasing with
    ``F(b_run) <= b_run``). Aggregated points keep ``b_run`` (their prefills ride the decode batch)."""
    dis = w.disagg.astype(bool)
    hi = np.maximum(w.b_run, 1.0)
    if not dis.any() or w.bw_seq_s is None:
        return hi

    def gap(b: np.ndarray) -> np.ndarray:
        tpot, _, hand, core, _ = _disagg_cycle(w, step_s(b), accept, s_alone, work, t0, q, handoff)
        dec = (w.osl - 1.0) * tpot
        cycle = np.maximum(w.load_s + core + dec, _slot_hold(w, hand, dec))
        return hi * (1.0 + w.over) * dec / np.maximum(cycle, 1e-12) - b

    b0, g0 = hi, gap(hi)
    b1 = np.clip(b0 + g0, 1.0, hi)
    for _ in range(iters):
        g1 = gap(b1)
        den = g1 - g0
        ok = np.abs(den) > 1e-12 * hi
        b2 = np.clip(np.where(ok, b1 - g1 * (b1 - b0) / np.where(ok, den, 1.0), b1), 1.0, hi)
        b0, g0, b1 = b1, g1, b2
    return np.where(dis, b1, hi)


def times(w: Work, tf_dec: np.ndarray, tf_pf: np.ndarray, mbu: np.ndarray, mfu: np.ndarray, t0: np.ndarray,
          q: np.ndarray, t_req: np.ndarray, accept: np.ndarray, attn_eff: np.ndarray | float,
          mfu_pf: np.ndarray | float | None = None, handoff: np.ndarray | float = 0.0,
          attn_fresh_eff: np.ndarray | float | None = None, median: bool = False,
          dec_attn_eff: np.ndarray | float | None = None) -> Times:
    """Apply the serving equations to ``w`` with the free terms (arrays or scalars; ``tf_dec``/``tf_pf`` are the
    fixed per-step overheads of the decode and prefill instances, ``mfu_pf`` the compute efficiency of a
    disaggregated prefill pool's batched prompts, ``mfu`` when not given; ``handoff`` the decode-engine
    iterations between a disaggregated request's prefill and its first token leaving the decode worker;
    ``attn_fresh_eff`` the efficiency of ``w.pf_attn_fresh_s``, the new tokens' attention among themselves;
    ``dec_attn_eff`` that of ``w.cmp_attn_s``, the decode attention (NaN or None: ``mfu``);
    ``median``: the first token and end-to-end time are a benchmark's medians, so the queue wait in them is the
    wait's median (:func:`median_wait`), not its mean; the loop itself runs on means)."""
    mfu_pool = mfu if mfu_pf is None else mfu_pf
    if w.svc_cv2 is not None:  # the queue's wait at a service time that varies as the requests' does
        q = q * (1.0 + w.svc_cv2) / 2.0
    if w.front_s is not None:  # the frontend tokenizes before the request overhead's clock starts on the engine
        t0 = t0 + w.front_s
    z = np.zeros_like(w.osl, dtype=float)
    dis = w.disagg.astype(bool)
    others = np.where(dis, 0.0, np.maximum(w.b_run - 1.0, 0.0) / np.maximum(w.b_run, 1.0))
    pf_rate = np.where(dis, 0.0, np.maximum(w.b_run - 1.0, 0.0) / w.osl)  # other clients' prefills per step
    pf_cmp = w.pf_gemm_s / mfu_pool + w.pf_attn_s / attn_eff  # attention at its kernels' own efficiency
    if w.pf_attn_fresh_s is not None and attn_fresh_eff is not None:  # a fresh prompt's part at its own kernel's
        pf_cmp = pf_cmp + w.pf_attn_fresh_s * (1.0 / attn_fresh_eff - 1.0 / attn_eff)
    pf_mem = w.pf_mem_s / mbu
    alone = np.zeros_like(dis) if w.pf_alone is None else (np.asarray(w.pf_alone) > 0) & ~dis
    # one prefill alone: a step per chunk (overhead and collectives) plus the larger of compute and bytes
    pf_over = w.n_chunks * (tf_pf + w.comm_pf_s) + t_req
    pf_core = np.maximum(pf_cmp, pf_mem)
    s_alone = pf_over + pf_core
    # data-parallel attention: a prompt's attention and non-expert GEMMs run on its own rank, (ranks - 1) times
    # their spread share more before its first token; the experts stay spread (its own latency only: a queue of
    # such prompts is ``ranks`` servers, its demand the spread work, Seidmann's reduction)
    ranks = 1.0 if w.pf_ranks is None else np.asarray(w.pf_ranks, dtype=float)
    rank_part = z  # the prompt's attention and non-expert GEMMs at their spread share
    if w.pf_gemm_rank_s is not None:
        rank_part = np.where(w.pf_gemm_rank_s > 0, pf_cmp - (w.pf_gemm_s - w.pf_gemm_rank_s) / mfu_pool, 0.0)
    own_cmp = pf_cmp + (ranks - 1.0) * rank_part
    s_own = pf_over + np.maximum(own_cmp, pf_mem)
    # disaggregated: batched prefill (weights read once per batch, large GEMMs at the batched efficiency
    # ``mfu``), closed loop of conc clients over the pool
    pf_kv = w.pf_kv_s / mbu
    work = np.maximum(pf_cmp, pf_kv)
    if w.pf_serial_s is not None:  # collectives the batched prompts do not hide behind each other's compute
        work = work + w.pf_serial_s
    if w.pf_batch is not None:
        # a pass's step overhead and, where its prompts hide each other's collectives, the one prompt's left
        # exposed: shared by the pass's prompts
        serial = 0.0 if w.pf_serial_s is None else w.pf_serial_s
        work = work + w.n_chunks * (tf_pf + np.where(serial > 0, 0.0, w.comm_pf_s)) / (w.pf_batch * ranks)

    # decode attention at its kernel's efficiency, where one is known (MLA: NaN elsewhere keeps it in the GEMMs')
    known = None if dec_attn_eff is None else ~np.isnan(np.asarray(dec_attn_eff, dtype=float))
    eff = None if known is None else np.where(known, dec_attn_eff, 1.0)
    pad = 1.0 if w.attn_pad is None else w.attn_pad

    def decode_parts(b: np.ndarray) -> tuple[np.ndarray, ...]:
        """(per-step overhead and collectives, bytes, compute, the attention's KV read, its tiles) of a decode step
        at batch ``b`` (``b_run`` unless the decode batch is a disaggregated pool's). The last two are in bytes and
        compute already; apart they are the attention kernel a step carrying a prompt's chunk runs besides the
        shared GEMMs: its KV read and, where the kernel's efficiency is known, its FLOPs over the kernel's query
        tiles (``w.attn_pad``) at that efficiency (else 0: the FLOPs stay with the GEMMs), one after the other."""
        fewer = w.b_run - b
        comm, bw, cmp = w.comm_s, w.bw_s, w.cmp_s
        att = 0.0 if w.cmp_attn_s is None else w.cmp_attn_s
        kv = 0.0 if w.bw_kv_s is None else w.bw_kv_s
        if w.bw_seq_s is not None:
            comm = comm - fewer * w.comm_seq_s
            bw = bw - fewer * w.bw_seq_s
            cmp = cmp - fewer * w.cmp_seq_s
            if w.cmp_attn_seq_s is not None:
                att = att - fewer * w.cmp_attn_seq_s
            if w.bw_kv_seq_s is not None:
                kv = kv - fewer * w.bw_kv_seq_s
        cmp_s, tiles = cmp / mfu, 0.0
        if known is not None:
            tiles = np.where(known, att * pad / eff, 0.0)
            cmp_s = np.where(known, (cmp - att) / mfu + tiles, cmp_s)
        # others' prompts: riding the step (their compute and their chunks' collectives, which the step runs too),
        # or run alone before it (a whole prefill pass each)
        rider_over = np.where(alone, pf_over, t_req + w.n_chunks * w.comm_pf_s)
        rider_bw = np.where(alone, pf_core - np.minimum(pf_core, pf_cmp), 0.0)
        rider_cmp = np.where(alone, np.minimum(pf_core, pf_cmp), pf_cmp)
        return (tf_dec + comm + pf_rate * rider_over, bw / mbu + pf_rate * rider_bw, cmp_s + pf_rate * rider_cmp,
                kv / mbu, tiles)

    b_dec = decode_batch(w, lambda b: sum(decode_parts(b)[:3]), accept, s_own, work, t0, q, handoff)
    # decode step: fixed overhead, collectives, per-prefill scheduling; bandwidth and compute overlap
    step_over, dec_bw, dec_cmp, kv_dec, tiles_dec = decode_parts(b_dec)
    t_step = step_over + dec_bw + dec_cmp
    # aggregated: the new request's chunks ride steps that also carry the running batch's decode work; the
    # weights are read once for both, the decode attention kernel apart (added to the ride below)
    att_run = 0.0 if (w.cmp_attn_s is None or known is None) else np.where(known, w.cmp_attn_s, 0.0)
    mix_cmp = own_cmp + others * w.n_chunks * (w.cmp_s - att_run) / mfu
    mix_bw = (1.0 - others) * pf_mem + others * (w.n_chunks * (dec_bw - kv_dec) + pf_kv)
    pf_cmp_bound = mix_cmp >= mix_bw
    # arrival in the middle of a running step and behind the steps launched ahead of it, then the scheduler's
    # polling interval
    ahead = 0.0 if w.ahead is None else w.ahead
    wait_step = ((0.5 + ahead) * others + w.wait_steps) * t_step
    tpot, q_dis, hand, ttft_dis_core, z_dis = _disagg_cycle(w, t_step, accept, s_own, work, t0, q, handoff)
    decode = (w.osl - 1.0) * tpot
    # aggregated: the running batch's clients queue for the engine's prefill (each brings a prefill of ``s_alone``;
    # the rest of its cycle is overhead, the scheduler interval and its decode): a closed loop, as the pool's
    z_agg = t0 + w.load_s + wait_step + decode
    q_agg = closed_wait(w.b_run, s_alone, z_agg, q, cap=w.pf_batch)
    # clients beyond the decode slots (KV capacity, the recipe's max batch) wait for a running sequence to
    # finish (closed loop, Little's law): the cycle is the longer of the slots' turnover (_slot_hold) and the
    # loop's own (the prefill pool's queue with every client in it), so a saturated pool and full slots bind as
    # the slower, not one after the other
    over_dis = np.maximum(_slot_hold(w, hand, decode) - (ttft_dis_core + w.load_s + decode), 0.0)
    queue_pf = np.where(dis, q_dis + hand, wait_step + q_agg)
    ride_cmp = np.where(dis | alone, own_cmp, mix_cmp)
    ride_bw = np.where(dis | alone, pf_mem, mix_bw)
    ride_kv = np.where(dis | alone, 0.0, others * w.n_chunks * (kv_dec + tiles_dec))
    ride = np.maximum(ride_cmp, ride_bw) + ride_kv
    # prompts scheduled in the same step as the new one: their compute comes before its first token (under
    # data-parallel attention each on its own rank, so only their experts add)
    beside = z if w.pf_with is None else np.where(dis, 0.0, w.pf_with * (pf_cmp - rank_part))
    ttft_core = t0 + w.load_s + np.where(dis, w.xfer_s, 0.0) + pf_over + ride + beside + queue_pf
    # clients beyond the KV capacity wait for the running batch to drain (closed loop)
    over_q = np.where(dis, over_dis, w.over * (ttft_core + decode))
    ttft = ttft_core + over_q
    if median:  # the median arrival's wait at the prefill queue (or pool) in place of the mean
        med = np.where(dis, median_wait(q_dis, *_pool_loop(w, work), z_dis),
                       median_wait(q_agg, w.b_run, s_alone, z_agg))
        median_shift = med - np.where(dis, q_dis, q_agg)
        ttft = ttft + median_shift
    else:
        median_shift = z
    e2e = ttft + decode
    n_dec = (w.osl - 1.0) / accept
    dec_b = dec_bw * n_dec
    dec_c = dec_cmp * n_dec
    cmp_bound = np.where(dis | alone, own_cmp >= pf_mem, pf_cmp_bound)
    parts = {
        "compute": dec_c + np.where(cmp_bound, ride - ride_kv, 0.0) + beside,
        "bandwidth": dec_b + np.where(cmp_bound, ride_kv, ride),
        "overhead": t0 + pf_over + step_over * n_dec,
        "kv_load": w.load_s + np.where(dis, w.xfer_s, 0.0),
        "queueing": queue_pf + over_q + median_shift + z,
    }
    return Times(ttft, tpot, e2e, queue_pf + over_q, parts, b_dec + z)
