"""LMCache-like tiered KV-cache simulator, provider prompt-cache (TTL) mode and capacity sweep.

Behaviours mirrored from LMCache 0.5.x (``research/lmcache.md`` §7):

- chunk keys are chained prefix hashes at ``block`` tokens (256 by default): a chunk is reusable only if
  the whole prefix through it is identical; the trace's finer block hashes are coarsened (every k-th
  chained hash identifies the longer prefix);
- hits are prefix-only: the contiguous run of present chunks from chunk 0; the partial tail chunk is never
  cached (tail tokens always miss); only prompt tokens are stored, after prefill, skipping chunks already
  present;
- LRU with *reversed* touch order (engine semantics): after a call, its chunks are the most recently used
  with chunk 0 on top, so deeper chunks are evicted first (not ``lmcache.tools.cache_simulator``'s forward
  order);
- capacity in chunks = ``floor(bytes / align_up(chunk_bytes, 4096))`` per TP rank;
- tier lookup order hbm → cpu → disk: the HBM prefix run is served from HBM (vLLM's prefix cache), LMCache
  serves the chunks beyond it from the first of its tiers holding each, and loads are charged per tier.

Sessions are interleaved on their recorded timestamps (lookup at the call's start, store at start + TTFT,
else at its end), so concurrent sessions compete for capacity. Provider mode adds a TTL (refreshed on every
use) and a minimum cacheable prompt, and keys chunks by the recorded model (provider caches are per model).

The LRU engine (:mod:`agentprof.analysis.lru_stack`) computes, once, every chunk lookup's *stack distance*
(distinct chunks used since its last use): a chunk is in an LRU cache of C chunks exactly when its distance is
below C, so one pass gives every tier and the whole capacity sweep. LFU and FIFO run a direct (slower,
per-chunk) simulation.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from agentprof.analysis.calls import CallBlocks, mix64, model_calls
from agentprof.analysis.lru_stack import (
    LruStack,
    Runs,
    finite_hits,
    inserts,
    leading_hits,
    lru_stack,
    smallest_capacity,
    total_hits,
)
from agentprof.analysis.stats import summary
from agentprof.catalog import ModelSpec, resolve_model
from agentprof.errors import AgentprofError
from agentprof.trace.schema import Trace

TIER_ORDER = ("hbm", "cpu", "disk")
POLICIES = ("lru", "lfu", "fifo")
ALIGN = 4096
LOOKUP, STORE = 0, 1
_INF = np.inf


@dataclass
class Tier:
    """One cache tier: ``hbm``, ``cpu`` or ``disk`` (or ``provider``); ``capacity_bytes`` per TP rank, ``None``
    for unlimited."""

    name: str
    capacity_bytes: int | None


@dataclass
class CacheSimResult:
    """Per-call hits (``per_call``, simulation order) and totals per tier."""

    per_call: pl.DataFrame
    model: str
    model_note: str | None
    block: int
    policy: str
    ttl_s: float | None
    provider: bool
    tp: int
    kv_dtype_bytes: float
    chunk_bytes: int  # per TP rank
    tiers: list[dict[str, Any]]
    prompt_tokens: int
    hit_tokens: int
    diagnostics: list[str] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def tier(self, name: str) -> dict[str, Any]:
        for t in self.tiers:
            if t["name"] == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        pc = self.per_call.filter(pl.col("prompt_tokens") > 0)
        per_req = (pc.get_column("hit_tokens") / pc.get_column("prompt_tokens")).to_numpy() if pc.height else []
        return {
            "model": self.model, "model_note": self.model_note, "block": self.block, "policy": self.policy,
            "ttl_s": self.ttl_s, "provider": self.provider, "tp": self.tp, "kv_dtype_bytes": self.kv_dtype_bytes,
            "chunk_bytes_per_rank": self.chunk_bytes, "model_calls": self.per_call.height,
            "prompt_tokens": self.prompt_tokens, "hit_tokens": self.hit_tokens, "hit_rate": self.hit_rate,
            "per_request_hit_rate": summary(per_req), "tiers": self.tiers, "diagnostics": self.diagnostics,
        }


# --------------------------------------------------------------------------------------------- workload


@dataclass
class _Workload:
    calls: pl.DataFrame  # call rows (analysis order) with span_id, session_id, start_ns, model, prompt_tokens
    keys: np.ndarray  # chunk keys (int64), calls concatenated in row order
    offsets: np.ndarray
    eligible: np.ndarray  # bool per call: looked up and stored
    events: list[tuple[int, int, int]]  # (time_ns, LOOKUP|STORE, call row), in simulation order
    order: np.ndarray  # call rows in lookup order
    block: int


def _coarsen(cb: CallBlocks, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Chunk keys at ``block`` tokens from the trace's prefix keys at ``cb.block_size``."""
    bs = cb.block_size
    if block <= 0 or block % bs:
        raise AgentprofError(f"--block {block} must be a positive multiple of the trace's block size {bs} "
                             f"(the trace hashes {bs}-token blocks; e.g. use {bs * max(1, round(block / bs))})")
    k = block // bs
    keys = cb.prefix_keys()
    counts = cb.lengths // k
    if k == 1:
        return keys, cb.offsets
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    # chunk j of call x is the trace's block offsets[x] + k·(j+1) − 1 (the last of its k blocks)
    idx = k * np.arange(int(offsets[-1]), dtype=np.int64) + np.repeat(cb.offsets[:-1] + k - 1 - k * offsets[:-1],
                                                                        counts)
    return keys[idx], offsets


def _workload(trace: Trace, block: int, key_by_model: bool, min_tokens: int) -> _Workload:
    cb = model_calls(trace)
    keys, offsets = _coarsen(cb, block)
    calls = cb.calls
    if key_by_model and keys.size:
        code = calls.get_column("model").fill_null("").rank("dense").cast(pl.Int64).to_numpy()
        keys = (keys.view(np.uint64) ^ mix64(np.repeat(code, np.diff(offsets)).astype(np.uint64))).view(np.int64)
    n = calls.height
    prompt = calls.get_column("prompt_tokens").fill_null(0).to_numpy()
    eligible = (prompt >= max(min_tokens, 1)) & calls.get_column("has_hashes").to_numpy()
    start = calls.get_column("start_ns").to_numpy()
    end = calls.get_column("end_ns").to_numpy()
    ttft = calls.get_column("ttft_s").to_numpy()
    start_l = start.tolist() if n else []
    end_l = end.tolist() if n else []
    ttft_l = ttft.tolist() if n else []
    events: list[tuple[int, int, int]] = []
    t_prev = 0
    for i in range(n):
        s = start_l[i]
        s = t_prev if s is None or (isinstance(s, float) and math.isnan(s)) else int(s)
        e = end_l[i]
        f = ttft_l[i]
        if f is not None and not (isinstance(f, float) and math.isnan(f)):
            st = s + int(f * 1e9)
        elif e is not None and not (isinstance(e, float) and math.isnan(e)):
            st = int(e)
        else:
            st = s
        st = max(st, s + 1)
        events.append((s, LOOKUP, i))
        events.append((st, STORE, i))
        t_prev = st
    events.sort()
    order = np.array([i for _, typ, i in events if typ == LOOKUP], dtype=np.int64)
    return _Workload(calls, np.ascontiguousarray(keys), offsets, eligible, events, order, block)


# --------------------------------------------------------------------------------------------- LRU engine


def _lru_stack(w: _Workload) -> LruStack:
    """Stack distances of the workload's lookups and stores (calls with chunks that take part only)."""
    lengths = np.diff(w.offsets)
    active = (w.eligible & (lengths > 0)).tolist()
    ev = [(i, typ == STORE) for _, typ, i in w.events if active[i]]
    ev_call = np.fromiter((i for i, _ in ev), dtype=np.int64, count=len(ev))
    ev_store = np.fromiter((st for _, st in ev), dtype=bool, count=len(ev))
    return lru_stack(w.keys, w.offsets, ev_call, ev_store)


def _lookup_runs(w: _Workload, st: LruStack, ttl_s: float | None) -> Runs:
    """The lookup runs, with chunks older than the TTL (refreshed by every store) expired."""
    if ttl_s is None:
        return st.lookups
    n = w.calls.height
    lookup_ns = np.zeros(n, dtype=np.int64)
    store_ns = np.zeros(n, dtype=np.int64)
    for t, typ, i in w.events:
        (store_ns if typ == STORE else lookup_ns)[i] = t
    return st.expire(ttl_s, lookup_ns, store_ns[st.store_call])


# --------------------------------------------------------------------------------------------- other policies


class _PolicyCache:
    """One tier under LFU or FIFO (direct simulation); touches happen at store, as for LRU."""

    def __init__(self, policy: str, capacity: float) -> None:
        self.policy = policy
        self.capacity = capacity
        self.fifo: OrderedDict[int, None] = OrderedDict()
        self.freq: dict[int, tuple[int, int]] = {}
        self.heap: list[tuple[int, int, int]] = []
        self.stamp = 0
        self.evictions = 0

    def __contains__(self, k: int) -> bool:
        return k in (self.fifo if self.policy == "fifo" else self.freq)

    def __len__(self) -> int:
        return len(self.fifo) if self.policy == "fifo" else len(self.freq)

    def store(self, ks: list[int]) -> None:
        import heapq

        if self.capacity <= 0:
            return
        if self.policy == "fifo":
            for k in ks:  # LMCache puts in chunk order; FIFO keeps insertion order, hits do not reorder
                if k not in self.fifo:
                    self.fifo[k] = None
            while len(self.fifo) > self.capacity:
                self.fifo.popitem(last=False)
                self.evictions += 1
            return
        for k in reversed(ks):  # chunk 0 last: most recent among equal frequencies
            self.stamp += 1
            c = self.freq.get(k, (0, 0))[0] + 1
            self.freq[k] = (c, self.stamp)
            heapq.heappush(self.heap, (c, self.stamp, k))
        while len(self.freq) > self.capacity:
            c, s, k = heapq.heappop(self.heap)
            if self.freq.get(k) == (c, s):
                del self.freq[k]
                self.evictions += 1


def _direct(w: _Workload, caps: list[float], policy: str, ttl_s: float | None,
            hbm_first: bool) -> tuple[np.ndarray, list[int]]:
    """Per call and tier: chunks served (shape calls × tiers); and evictions per tier."""
    tiers = [_PolicyCache(policy, c) for c in caps]
    served = np.zeros((w.calls.height, len(caps)), dtype=np.int64)
    last_t: dict[int, int] = {}
    keys = w.keys.tolist()
    offs = w.offsets.tolist()
    ttl_ns = None if ttl_s is None else ttl_s * 1e9
    for t, typ, i in w.events:
        a, b = offs[i], offs[i + 1]
        if a == b or not w.eligible[i]:
            continue
        ks = keys[a:b]
        if typ == STORE:
            for c in tiers:
                c.store(ks)
            last_t.update(dict.fromkeys(ks, t))
            continue

        def fresh(k: int, now: int = t) -> bool:
            return ttl_ns is None or (k in last_t and now - last_t[k] <= ttl_ns)

        start = 0
        if hbm_first:
            while start < len(ks) and ks[start] in tiers[0] and fresh(ks[start]):
                start += 1
            served[i, 0] = start
        rest = range(1 if hbm_first else 0, len(tiers))
        j = start
        run = 0
        # LMCache's own run starts at chunk 0 in its tiers; it serves only what lies beyond the HBM run
        while run < len(ks) and fresh(ks[run]) and any(ks[run] in tiers[x] for x in rest):
            run += 1
        while j < run:
            for x in rest:
                if ks[j] in tiers[x]:
                    served[i, x] += 1
                    break
            j += 1
    return served, [c.evictions for c in tiers]


# --------------------------------------------------------------------------------------------- simulate


def _resolve(model: str) -> tuple[ModelSpec, str | None]:
    return resolve_model(model, strict=True)


def _ordered_tiers(tiers: Sequence[Tier]) -> list[Tier]:
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise AgentprofError(f"tier names must be unique, got {names}")
    rank = {n: i for i, n in enumerate(TIER_ORDER)}
    return sorted(tiers, key=lambda t: rank.get(t.name, len(TIER_ORDER)))


def capacity_chunks(capacity_bytes: int | None, chunk_bytes: int) -> float:
    """LMCache's chunk budget: ``floor(bytes / align_up(chunk_bytes, 4096))`` (``inf`` when unlimited)."""
    if capacity_bytes is None:
        return _INF
    aligned = -(-chunk_bytes // ALIGN) * ALIGN
    return float(capacity_bytes // aligned)


def simulate(trace: Trace, model: str, tiers: Sequence[Tier] | None = None, block: int = 256,
             policy: str = "lru", ttl_s: float | None = None, provider: bool = False,
             min_cacheable_tokens: int = 0, tp: int = 1, kv_dtype_bytes: float = 2.0,
             key_by_model: bool | None = None) -> CacheSimResult:
    """Replay the trace's prompts through a tiered KV cache and report hits per call and per tier.

    ``model`` names the served model (catalog key, alias, or a closed model replayed through its stand-in)
    for KV bytes per chunk. Without ``tiers``: one unlimited ``cpu`` tier (LMCache mode) or one unlimited
    ``provider`` tier (provider mode). ``key_by_model`` (default: on in provider mode) keeps each recorded
    model's chunks apart.
    """
    if policy not in POLICIES:
        raise AgentprofError(f"unknown policy {policy!r}: expected one of {', '.join(POLICIES)}")
    if tp < 1:
        raise AgentprofError("tp must be at least 1")
    spec, note = _resolve(model)
    chunk_bytes = spec.lmcache_chunk_bytes(block, tp=tp, dtype_bytes=kv_dtype_bytes)
    ranks = tp  # every rank loads its own share (MLA: its own full copy of the latent)
    if tiers is None:
        tiers = [Tier("provider", None)] if provider else [Tier("cpu", None)]
    tiers = _ordered_tiers(tiers)
    if key_by_model is None:
        key_by_model = provider
    w = _workload(trace, block, key_by_model, min_cacheable_tokens)
    caps = [capacity_chunks(t.capacity_bytes, chunk_bytes) for t in tiers]
    hbm_first = tiers[0].name == "hbm" and len(tiers) > 1
    n = w.calls.height
    diags: list[str] = []
    no_hash = int((~w.calls.get_column("has_hashes")).sum()) if n else 0
    if no_hash:
        diags.append(f"{no_hash} model calls have no block hashes: counted as misses")
    if policy == "lru":
        st = _lru_stack(w)
        runs = _lookup_runs(w, st, ttl_s)
        counts = [leading_hits(runs, n, c) for c in caps]
        served = _split_tiers(counts, hbm_first)
        evictions = [0 if math.isinf(c) else max(0, inserts(st.stores, c) - int(min(c, st.distinct)))
                     for c in caps]
    else:
        served_m, evictions = _direct(w, caps, policy, ttl_s, hbm_first)
        served = [served_m[:, x] for x in range(len(caps))]
    block_tokens = w.block
    cols: dict[str, Any] = {
        "span_id": w.calls.get_column("span_id"), "session_id": w.calls.get_column("session_id"),
        "start_ns": w.calls.get_column("start_ns"), "model": w.calls.get_column("model"),
        "prompt_tokens": w.calls.get_column("prompt_tokens").fill_null(0),
    }
    total_hit = np.zeros(n, dtype=np.int64)
    for s in served:
        total_hit += s
    cols["hit_tokens"] = total_hit * block_tokens
    names = [t.name for t in tiers]
    for name in (*TIER_ORDER, *[x for x in names if x not in TIER_ORDER]):
        s = served[names.index(name)] if name in names else np.zeros(n, dtype=np.int64)
        cols[f"hit_tokens_{name}"] = s * block_tokens
    for name in ("cpu", "disk", *[x for x in names if x not in TIER_ORDER]):
        s = served[names.index(name)] if name in names else np.zeros(n, dtype=np.int64)
        cols[f"bytes_loaded_{name}"] = s * chunk_bytes * ranks
    per_call = pl.DataFrame(cols).with_columns(pl.Series("eligible", w.eligible))[w.order.tolist()] if n else \
        pl.DataFrame(cols)
    prompt_total = int(per_call.get_column("prompt_tokens").sum()) if n else 0
    hit_total = int(total_hit.sum()) * block_tokens
    tier_rows = []
    for x, t in enumerate(tiers):
        hit = int(served[x].sum()) * block_tokens
        tier_rows.append({
            "name": t.name, "capacity_bytes": t.capacity_bytes,
            "capacity_chunks": None if math.isinf(caps[x]) else int(caps[x]),
            "hit_tokens": hit, "hit_rate": hit / prompt_total if prompt_total else 0.0,
            "bytes_loaded": 0 if t.name == "hbm" else int(served[x].sum()) * chunk_bytes * ranks,
            "evictions": int(evictions[x]),
        })
    return CacheSimResult(per_call, spec.key, note, block, policy, ttl_s, provider, tp, kv_dtype_bytes,
                          chunk_bytes, tier_rows, prompt_total, hit_total, diags)


def _split_tiers(counts: list[np.ndarray], hbm_first: bool) -> list[np.ndarray]:
    """Chunks served per tier from each tier's prefix-run length (LRU: runs are nested prefixes)."""
    if not counts:
        return []
    n = counts[0].size
    hbm = counts[0] if hbm_first else np.zeros(n, dtype=np.int64)
    rest = counts[1:] if hbm_first else counts
    lm = np.max(np.stack(rest), axis=0) if rest else np.zeros(n, dtype=np.int64)
    total = np.maximum(hbm, lm)
    out = [hbm] if hbm_first else []
    covered = hbm.copy()
    for c in rest:
        upto = np.minimum(total, c)
        out.append(np.maximum(0, upto - covered))
        covered = np.maximum(covered, upto)
    return out


# --------------------------------------------------------------------------------------------- sweep


@dataclass
class SweepResult:
    """Hit rate against capacity (one tier, the rest of the configuration fixed)."""

    tier: str
    chunk_bytes: int
    points: list[dict[str, Any]]  # {capacity_bytes, capacity_chunks, hit_rate}
    unlimited_hit_rate: float
    target: float
    capacity_at_target_chunks: int | None
    capacity_at_target_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def capacity_sweep(trace: Trace, model: str, block: int = 256, policy: str = "lru", ttl_s: float | None = None,
                   provider: bool = False, min_cacheable_tokens: int = 0, tp: int = 1, kv_dtype_bytes: float = 2.0,
                   capacities: Sequence[int] | None = None, target: float = 0.9,
                   key_by_model: bool | None = None) -> SweepResult:
    """Token hit rate of a single cache tier against its capacity, and the smallest capacity reaching
    ``target`` (90 %) of the unlimited hit rate. ``capacities`` in bytes per rank (default: powers of two
    of chunks up to the working set)."""
    spec, _note = _resolve(model)
    chunk_bytes = spec.lmcache_chunk_bytes(block, tp=tp, dtype_bytes=kv_dtype_bytes)
    aligned = -(-chunk_bytes // ALIGN) * ALIGN
    if key_by_model is None:
        key_by_model = provider
    w = _workload(trace, block, key_by_model, min_cacheable_tokens)
    prompt_total = int(w.calls.get_column("prompt_tokens").fill_null(0).sum()) if w.calls.height else 0

    def rate(hit_chunks: int) -> float:
        return hit_chunks * w.block / prompt_total if prompt_total else 0.0

    if policy == "lru":
        st = _lru_stack(w)
        runs = _lookup_runs(w, st, ttl_s)
        reachable = finite_hits(runs)
        working = max(int(st.distinct), 1)

        def hits_at(c: float) -> int:
            return total_hits(runs, c)

        unlimited = rate(reachable)
        c90 = smallest_capacity(runs, math.ceil(target * reachable - 1e-9))
    else:
        def run(c: float) -> int:
            served, _ = _direct(w, [c], policy, ttl_s, False)
            return int(served.sum())

        working = max(int(np.unique(w.keys).size), 1)
        unlimited_hits = run(_INF)
        unlimited = rate(unlimited_hits)
        cache: dict[int, int] = {}

        def hits_at(c: float) -> int:
            k = int(c) if not math.isinf(c) else -1
            if k not in cache:
                cache[k] = run(c)
            return cache[k]

        goal = target * unlimited_hits
        lo, hi = 0, working
        while lo < hi:  # smallest capacity reaching the goal (bisection; exact if hits grow with capacity)
            mid = (lo + hi) // 2
            if hits_at(mid) >= goal:
                hi = mid
            else:
                lo = mid + 1
        c90 = lo
    if capacities is None:
        chunks = [0] + [2 ** i for i in range(int(math.log2(working)) + 2)]
    else:
        chunks = [int(b // aligned) for b in capacities]
    points = [{"capacity_bytes": c * aligned, "capacity_chunks": c, "hit_rate": rate(hits_at(c))}
              for c in chunks]
    points.append({"capacity_bytes": None, "capacity_chunks": None, "hit_rate": unlimited})
    return SweepResult("cache", chunk_bytes, points, unlimited, target, c90, c90 * aligned)
