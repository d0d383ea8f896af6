"""Exact LRU stack distances for chained prompt-prefix keys, computed per *run* of chunks instead of per chunk.

The caches agentprof simulates (LMCache tiers, the HBM prefix cache, a provider's prompt cache) see one lookup
and one store per model call. A store touches the call's chunks deepest first, so chunk 0 ends most recently
used (LMCache's engine order); an LRU cache of ``C`` chunks then holds exactly the ``C`` most recently touched
distinct chunks, and a looked-up chunk is present iff its *stack distance* (distinct chunks touched since its
own last touch) is below ``C``. One pass over the touches therefore answers every capacity at once.

Keys are chained prefix keys (a chunk's key identifies its whole prefix, :meth:`CallBlocks.prefix_keys`), so
every call is a path from the root of one prefix tree and any call holding chunk ``v`` at depth ``i`` also holds
``v``'s ancestors at depths ``0..i-1``. For a chunk ``v`` at depth ``i`` whose last touch was in store ``s``
(looked up when ``c`` stores have happened), that gives

    distance(v) = Σ_{s < s' < c} live(s', c)  +  #{j < i : chunk j last stored in s}

where ``live(s', c)`` is how many of store ``s'``'s chunks have not been touched again by a store before ``c``.
Along a call the last-store index can only fall with depth, so chunks fall into a few *runs* with one last
store each (typically: the previous turn of the conversation, then the new tail); the second term is the
chunk's depth within its run, and the first is one query per run: a length sum over stores minus the
re-touches ("supersessions": store ``t`` re-touching ``n`` chunks last stored in ``s'``) with
``s < s'`` and ``t < c``, a two-dimensional dominance sum answered for all runs at once with a merge-sort
tree over the supersessions (:func:`_dominance_sums`). Per chunk, only one gather and one scatter per event
remain (the last-store table), plus a handful of array passes; everything else is per run (a few per call).

Keys repeated from the previous call (same depth, same key: most of an agent's prompt) inherit their dense
id from it, so only the new chunks are hashed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

_INF = np.inf


@dataclass
class Runs:
    """Runs of consecutive chunks of one call last touched by the same earlier store (or never).

    Chunk ``start + j`` of run ``k`` has stack distance ``base[k] + j`` (``inf`` throughout when the chunk
    was never stored before), at the lookup or the store the runs describe."""

    call: np.ndarray  # int64 call row, runs of a call in depth order, calls in row order
    start: np.ndarray  # int64 depth of the run's first chunk within its call
    length: np.ndarray  # int64
    base: np.ndarray  # float64 stack distance of the run's first chunk; inf: never stored before
    last_store: np.ndarray  # int64 store ordinal of the chunks' last touch (-1: never)

    @property
    def size(self) -> int:
        return int(self.call.size)


@dataclass
class LruStack:
    """Stack distances of every lookup and every store, as runs; ``distinct`` chunks were ever stored."""

    lookups: Runs
    stores: Runs
    store_call: np.ndarray  # call row of each store ordinal
    distinct: int
    n_calls: int

    def expire(self, ttl_s: float, lookup_ns: np.ndarray, store_ns: np.ndarray) -> Runs:
        """The lookup runs under a TTL: a chunk last stored more than ``ttl_s`` seconds before its lookup has
        expired (distance ``inf``). ``lookup_ns`` per call row, ``store_ns`` per store ordinal (int64 ns)."""
        r = self.lookups
        ls = r.last_store
        seen = ls >= 0
        age_s = np.full(r.size, _INF)
        age_s[seen] = (lookup_ns[r.call[seen]] - store_ns[ls[seen]]) / 1e9
        return Runs(r.call, r.start, r.length, np.where(age_s > ttl_s, _INF, r.base), ls)


def _floor(runs: Runs) -> np.ndarray:
    """Per run: the largest distance among the earlier runs of the same call (-1 for a call's first run, inf
    after a missing chunk). Hits are prefix-only, so a chunk is served at capacity C only if every chunk before
    it is: its effective distance is the running maximum along the call."""
    n = runs.size
    if n == 0:
        return np.zeros(0)
    last = runs.base + (runs.length - 1)  # the run's largest distance (inf stays inf)
    prev = np.empty(n)
    prev[0] = -1.0
    prev[1:] = last[:-1]
    first = np.ones(n, dtype=bool)
    first[1:] = runs.call[1:] != runs.call[:-1]
    prev[first] = -1.0
    # segmented running maximum: shift each call's values above every earlier call's
    finite = np.isfinite(prev)
    top = float(np.max(np.where(finite, prev, 0.0))) + 2.0 if n else 2.0
    seg = np.cumsum(first) - 1
    vals = np.where(finite, prev, top - 1.0) + seg * top
    acc = np.maximum.accumulate(vals) - seg * top
    return np.where(acc >= top - 1.0, _INF, acc)


def served(runs: Runs, capacity: float) -> np.ndarray:
    """Chunks per run found in an LRU cache of ``capacity`` chunks as part of the call's leading run."""
    if runs.size == 0:
        return np.zeros(0, dtype=np.int64)
    floor = _floor(runs)
    with np.errstate(invalid="ignore"):
        room = np.where(np.isfinite(runs.base), capacity - runs.base, 0.0)
    got = np.clip(room, 0.0, runs.length.astype(np.float64))
    got[~(floor < capacity)] = 0.0
    return got.astype(np.int64)


def leading_hits(runs: Runs, n_calls: int, capacity: float) -> np.ndarray:
    """Per call row: its leading chunks found in an LRU cache of ``capacity`` chunks."""
    return np.bincount(runs.call, weights=served(runs, capacity), minlength=n_calls).astype(np.int64)


def total_hits(runs: Runs, capacity: float) -> int:
    """All chunks served at ``capacity`` (the sum of :func:`leading_hits`)."""
    return int(served(runs, capacity).sum())


def finite_hits(runs: Runs) -> int:
    """Chunks served by an unlimited cache."""
    if runs.size == 0:
        return 0
    ok = np.isfinite(runs.base) & np.isfinite(_floor(runs))
    return int(runs.length[ok].sum())


def smallest_capacity(runs: Runs, need: int) -> int:
    """The smallest capacity (chunks) at which at least ``need`` chunks are served (``need`` must not exceed
    :func:`finite_hits`)."""
    if need <= 0:
        return 0
    ok = np.isfinite(runs.base) & np.isfinite(_floor(runs))
    hi = int(np.max((runs.base + runs.length)[ok])) if ok.any() else 0
    lo = 0
    while lo < hi:  # hits grow with capacity (LRU inclusion)
        mid = (lo + hi) // 2
        if total_hits(runs, mid) >= need:
            hi = mid
        else:
            lo = mid + 1
    return lo


def inserts(stores: Runs, capacity: float) -> int:
    """Stored chunks that were not in a cache of ``capacity`` chunks when stored (each one is inserted)."""
    total = int(stores.length.sum())
    with np.errstate(invalid="ignore"):
        present = np.clip(np.where(np.isfinite(stores.base), capacity - stores.base, 0.0), 0.0,
                          stores.length.astype(np.float64))
    return total - int(present.sum())


# --------------------------------------------------------------------------------------------- engine


def _lcp_prev(keys: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per call row: leading keys equal to the previous row's (0 for row 0), by bisection for all rows at once
    (chained keys: equal at depth i means equal at every shallower depth)."""
    n = offsets.size - 1
    out = np.zeros(n, dtype=np.int64)
    if n < 2:
        return out
    lengths = np.diff(offsets)
    lo = np.zeros(n - 1, dtype=np.int64)
    hi = np.minimum(lengths[1:], lengths[:-1])
    a_cur = offsets[1:-1]
    a_prev = offsets[:-2]
    while True:
        live = np.flatnonzero(lo < hi)
        if live.size == 0:
            break
        mid = (lo[live] + hi[live] + 1) // 2  # test depth mid - 1
        eq = keys[a_cur[live] + mid - 1] == keys[a_prev[live] + mid - 1]
        lo[live] = np.where(eq, mid, lo[live])
        hi[live] = np.where(eq, hi[live], mid - 1)
    out[1:] = lo
    return out


def fresh_positions(keys: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per call row, its leading keys shared with the previous row (:func:`_lcp_prev`), and the flat positions
    of the rest (the *fresh* keys, in row order). The first occurrence of every key is a fresh position."""
    lengths = np.diff(offsets)
    lcp = _lcp_prev(keys, offsets)
    fresh_len = lengths - lcp
    fo = np.zeros(fresh_len.size + 1, dtype=np.int64)
    np.cumsum(fresh_len, out=fo[1:])
    idx = np.arange(int(fo[-1]), dtype=np.int64) + np.repeat(offsets[:-1] + lcp - fo[:-1], fresh_len)
    return lcp, idx


def dense_ids(keys: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, int]:
    """Keys renumbered ``0..k-1`` (int32 when it fits) and ``k``. A call's leading keys shared with the previous
    row reuse that row's ids; only the rest are ranked (hash-based, no sort)."""
    n = keys.size
    if n == 0:
        return np.zeros(0, dtype=np.int32), 0
    lcp, idx = fresh_positions(keys, offsets)
    total_fresh = idx.size
    fresh_keys = pl.Series(keys[idx])
    uniq = fresh_keys.unique(maintain_order=True)
    k = uniq.len()
    dtype = np.int32 if k < 2**31 else np.int64
    if k == total_fresh:  # every fresh key is new (no prompt repeats an older one): ids in order
        codes = np.arange(k, dtype=dtype)
    else:
        codes = (pl.DataFrame({"k": fresh_keys})
                 .join(pl.DataFrame({"k": uniq, "c": np.arange(k, dtype=dtype)}), on="k", how="left",
                       maintain_order="left").get_column("c").to_numpy())
    ids = np.empty(n, dtype=dtype)
    ids[idx] = codes
    inherit = np.flatnonzero(lcp > 0)
    starts = offsets[:-1]
    for x in inherit.tolist():  # in row order: the previous row's ids are complete
        a, b, m = int(starts[x]), int(starts[x - 1]), int(lcp[x])
        ids[a:a + m] = ids[b:b + m]
    return ids, k


def _runs_of(values: np.ndarray, call_start: np.ndarray, lengths: np.ndarray, calls: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal ``values`` within each call's slice of a flat array laid out call after call
    (``calls[k]`` owns ``lengths[k]`` entries starting at ``call_start[k]``): run call, depth, length, value."""
    total = values.size
    if total == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    brk = np.zeros(total, dtype=bool)
    brk[call_start[lengths > 0]] = True
    brk[1:] |= values[1:] != values[:-1]
    at = np.flatnonzero(brk)
    run_len = np.diff(np.append(at, total))
    owner = np.searchsorted(call_start, at, side="right") - 1
    depth = at - call_start[owner]
    return calls[owner], depth, run_len, values[at].astype(np.int64)


def _runs_of_calls(values: np.ndarray, offsets: np.ndarray, part: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_runs_of` over the calls ``part`` of a flat per-call array (all calls: no copy)."""
    lengths = np.diff(offsets)
    if part.size == int(np.count_nonzero(lengths)):  # every call with chunks takes part: use the array as is
        return _runs_of(values, offsets[:-1], lengths, np.arange(lengths.size, dtype=np.int64))
    plen = lengths[part]
    po = np.zeros(part.size + 1, dtype=np.int64)
    np.cumsum(plen, out=po[1:])
    idx = np.arange(int(po[-1]), dtype=np.int64) + np.repeat(offsets[:-1][part] - po[:-1], plen)
    return _runs_of(values[idx], po[:-1], plen, part)


def _dominance_sums(ev_time: np.ndarray, ev_target: np.ndarray, ev_w: np.ndarray,
                    q_target: np.ndarray, q_time: np.ndarray) -> np.ndarray:
    """For every query: Σ w over events with ``target > q_target`` and ``time < q_time``.

    Events sorted by target (descending) make the first condition a prefix; a merge-sort tree over that order
    (per level, blocks of 2^L events sorted by time with running sums) answers the prefix with at most one
    block per level, all queries of a level in one ``searchsorted``."""
    nq = q_target.size
    out = np.zeros(nq, dtype=np.int64)
    m = ev_time.size
    if m == 0 or nq == 0:
        return out
    order = np.argsort(-ev_target, kind="stable")
    tgt = ev_target[order]
    tim = ev_time[order].astype(np.int64)
    w = ev_w[order].astype(np.int64)
    k = np.searchsorted(-tgt, -q_target, side="left")  # events with target > q_target
    span = int(max(int(tim.max()), int(q_time.max()))) + 2
    pos = np.arange(m, dtype=np.int64)
    level = 0
    while (1 << level) <= m:
        bit = (k >> level) & 1
        sel = np.flatnonzero(bit)
        if sel.size:
            comp = (pos >> level) * span + tim
            o = np.argsort(comp, kind="stable")
            sc = comp[o]
            cum = np.zeros(m + 1, dtype=np.int64)
            np.cumsum(w[o], out=cum[1:])
            block = (k[sel] >> (level + 1)) << 1  # the block [base, base + 2^L) with base = k cleared below L+1
            lo = np.searchsorted(sc, block * span, side="left")
            hi = np.searchsorted(sc, block * span + q_time[sel], side="left")
            out[sel] += cum[hi] - cum[lo]
        level += 1
    return out


def lru_stack(keys: np.ndarray, offsets: np.ndarray, ev_call: np.ndarray, ev_store: np.ndarray) -> LruStack:
    """Stack distances of every lookup and store in an event sequence.

    ``keys``/``offsets``: chained prefix keys, call after call (call row ``x`` owns
    ``keys[offsets[x]:offsets[x+1]]``). ``ev_call``/``ev_store``: the events in simulation order; every call
    that takes part has exactly one lookup (``ev_store`` False) followed, later, by one store (True).
    """
    n_calls = offsets.size - 1
    lengths = np.diff(offsets)
    ev_call = np.asarray(ev_call, dtype=np.int64)
    ev_store = np.asarray(ev_store, dtype=bool)
    store_call = ev_call[ev_store]
    n_stores = store_call.size
    store_ord = np.full(n_calls, -1, dtype=np.int64)
    store_ord[store_call] = np.arange(n_stores, dtype=np.int64)
    stores_before = np.cumsum(ev_store) - ev_store  # per event: stores that happened before it
    lookup_cut = np.full(n_calls, -1, dtype=np.int64)
    lookup_cut[ev_call[~ev_store]] = stores_before[~ev_store]

    ids, n_keys = dense_ids(keys, offsets)
    # the last-store table, walked once in event order: one gather per lookup and a scatter per store; a store
    # with no other store since its own lookup sees what the lookup saw, so only the others gather again
    last = np.full(max(n_keys, 1), -1, dtype=np.int32 if n_stores < 2**31 else np.int64)
    look_ls = np.full(keys.size, -1, dtype=last.dtype)
    moved: dict[int, np.ndarray] = {}  # call row -> last stores its store saw, where they can differ
    offs = offsets.tolist()
    ords = store_ord.tolist()
    cut = lookup_cut.tolist()
    for x, is_store in zip(ev_call.tolist(), ev_store.tolist(), strict=True):
        a, b = offs[x], offs[x + 1]
        if a == b:
            continue
        kid = ids[a:b]
        if is_store:
            if ords[x] != cut[x]:
                moved[x] = last[kid]
            last[kid] = ords[x]
        else:
            look_ls[a:b] = last[kid]

    part = np.flatnonzero((store_ord >= 0) & (lengths > 0))
    l_call, l_depth, l_len, l_ls = _runs_of_calls(look_ls, offsets, part)
    if moved:
        keep = ~np.isin(l_call, np.fromiter(moved, dtype=np.int64, count=len(moved)))
        mv = np.array(sorted(moved), dtype=np.int64)
        m_off = np.zeros(mv.size + 1, dtype=np.int64)
        np.cumsum(lengths[mv], out=m_off[1:])
        m_call, m_depth, m_len, m_ls = _runs_of(np.concatenate([moved[x] for x in mv.tolist()]), m_off[:-1],
                                                lengths[mv], mv)
        s_call = np.concatenate([l_call[keep], m_call])
        s_depth = np.concatenate([l_depth[keep], m_depth])
        s_len = np.concatenate([l_len[keep], m_len])
        s_ls = np.concatenate([l_ls[keep], m_ls])
    else:
        s_call, s_depth, s_len, s_ls = l_call, l_depth, l_len, l_ls

    cum = np.zeros(n_stores + 1, dtype=np.int64)
    np.cumsum(lengths[store_call], out=cum[1:])
    # supersessions: store t re-touches chunks last stored in s' (one event per store run with a last store)
    seen_s = s_ls >= 0
    ev_t = store_ord[s_call[seen_s]]
    ev_tg = s_ls[seen_s]
    ev_w = s_len[seen_s]

    def bases(r_call: np.ndarray, r_ls: np.ndarray, cut: np.ndarray) -> np.ndarray:
        base = np.full(r_call.size, _INF)
        seen = r_ls >= 0
        s = r_ls[seen]
        c = cut[seen]
        dom = _dominance_sums(ev_t, ev_tg, ev_w, s, c)
        base[seen] = (cum[c] - cum[s + 1] - dom).astype(np.float64)
        return base

    # a run's first chunk has the distance ``base``; its chunk j, ``base + j`` (the j chunks above it in its
    # run were touched after it in the same store). Last stores only fall with depth, so runs are maximal.
    s_base = bases(s_call, s_ls, store_ord[s_call])
    l_base = bases(l_call, l_ls, lookup_cut[l_call])
    distinct = int(s_len[~seen_s].sum())
    return LruStack(Runs(l_call, l_depth, l_len, l_base, l_ls), Runs(s_call, s_depth, s_len, s_base, s_ls),
                    store_call, distinct, n_calls)

