"""Which prompt tokens a serving system finds cached, per model call, under a cache policy.

- ``auto`` (the default): ``prefix`` for one session; in the serving simulation, the tiers of each system's
  agentic deployment (:mod:`agentprof.replay.serving.deployment`).
- ``none``: nothing is cached; every call prefills its whole prompt.
- ``prefix``: an HBM prefix cache (vLLM/SGLang automatic prefix caching). A call reuses the longest prefix of
  its prompt blocks that some earlier call already computed, while it still fits: the capacity is the HBM left
  after the weights, shared by the concurrent clients, with least-recently-used eviction.
- ``lmcache:cpu=SIZE[,disk=SIZE]``: the HBM prefix cache backed by CPU-memory (and disk) tiers as LMCache
  adds; hits in a lower tier are loaded over the host link (or from disk) before prefill. The tiers are
  simulated by :func:`agentprof.analysis.cachesim.simulate` (LMCache's 256-token chunks; sessions
  interleaved on their recorded timestamps), see :func:`agentprof.replay.replay`.

Block identity comes from the trace's prompt block hashes (prefix keys), so matching is exact at the trace's
block size. A call without hashes falls back to the provider's reported cache reads, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from agentprof.analysis.calls import CallBlocks
from agentprof.analysis.lru_stack import LruStack, fresh_positions, leading_hits, lru_stack
from agentprof.analysis.units import parse_size
from agentprof.errors import AgentprofError


@dataclass(frozen=True)
class CachePolicy:
    """A parsed ``--cache-policy``: kind ``auto``, ``none``, ``prefix`` or ``lmcache`` with tier sizes in bytes."""

    kind: str
    cpu_bytes: float = 0.0
    disk_bytes: float = 0.0

    @property
    def label(self) -> str:
        if self.kind != "lmcache":
            return self.kind
        parts = [f"cpu={self.cpu_bytes / 2**30:.4g}GiB"]
        if self.disk_bytes:
            parts.append(f"disk={self.disk_bytes / 2**30:.4g}GiB")
        return "lmcache:" + ",".join(parts)


def parse_policy(text: str) -> CachePolicy:
    """``auto`` | ``none`` | ``prefix`` | ``lmcache:cpu=SIZE[,disk=SIZE]`` (sizes as ``200GiB``, ``1TB``)."""
    t = text.strip().lower()
    if t in ("auto", "none", "prefix"):
        return CachePolicy(t)
    if t.startswith("lmcache"):
        rest = t[len("lmcache"):].lstrip(":")
        sizes: dict[str, float] = {}
        for part in filter(None, rest.split(",")):
            key, _, val = part.partition("=")
            if key not in ("cpu", "disk") or not val:
                raise AgentprofError(f"cache policy {text!r}: expected lmcache:cpu=SIZE[,disk=SIZE], got {part!r}")
            size = parse_size(val)
            sizes[key] = float("inf") if size is None else float(size)
        if "cpu" not in sizes:
            raise AgentprofError(f"cache policy {text!r}: lmcache needs a CPU tier size, e.g. lmcache:cpu=200GiB")
        return CachePolicy("lmcache", sizes["cpu"], sizes.get("disk", 0.0))
    raise AgentprofError(f"unknown cache policy {text!r}: expected auto, none, prefix or lmcache:cpu=SIZE[,disk=SIZE]")


@dataclass
class CacheHits:
    """Cached prompt tokens per call (aligned with ``CallBlocks.calls``), by the tier that serves them."""

    hbm: np.ndarray
    cpu: np.ndarray
    disk: np.ndarray
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> np.ndarray:
        return self.hbm + self.cpu + self.disk


def _leading_hits_unbounded(keys: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Leading blocks of each call that an earlier call (in row order) already had: infinite capacity."""
    n = offsets.size - 1
    if keys.size == 0:
        return np.zeros(n, dtype=np.int64)
    lengths = np.diff(offsets)
    _, fresh = fresh_positions(keys, offsets)  # a key shared with the previous row was seen before
    miss_pos = fresh[pl.Series(keys[fresh]).is_first_distinct().to_numpy()]
    first_miss = np.searchsorted(miss_pos, offsets[:-1])
    first_miss_at = np.where(first_miss < miss_pos.size, miss_pos[np.minimum(first_miss, miss_pos.size - 1)],
                             keys.size)
    return np.minimum(first_miss_at - offsets[:-1], lengths).astype(np.int64)


def _row_order_stack(keys: np.ndarray, offsets: np.ndarray) -> LruStack:
    """LRU stack distances with the calls taken one after another in row order (each looks up, then stores)."""
    rows = np.flatnonzero(np.diff(offsets) > 0)
    return lru_stack(keys, offsets, np.repeat(rows, 2), np.tile(np.array([False, True]), rows.size))


def _leading_hits_lru(keys: np.ndarray, offsets: np.ndarray, capacities: list[float]) -> list[np.ndarray]:
    """Leading blocks found within each of several LRU capacities (in blocks), calls in row order.

    Capacity ``c`` holds the ``floor(c)`` most recently used blocks; a call's leading run is counted against
    each capacity separately. After a call its blocks are touched last-to-first, so eviction takes the deepest
    blocks of the least recently used prompts first and shared prefixes survive longest (vLLM frees a
    finished request's blocks tail-first). Exact, from stack distances (:mod:`agentprof.analysis.lru_stack`)."""
    st = _row_order_stack(keys, offsets)
    return [leading_hits(st.lookups, offsets.size - 1, float(np.floor(c))) for c in capacities]


def _max_line_blocks(keys: np.ndarray, cb: CallBlocks) -> int:
    """The largest number of distinct blocks one conversation line uses. Every occurrence of a key in a line is
    fresh (not shared with the previous row), shared with a previous row of the same line (so seen in the line
    before), or shared with a previous row of another line: only the first and last kind are counted."""
    line = cb.calls.get_column("line_id").rank("dense").cast(pl.Int64).to_numpy()
    lcp, fresh = fresh_positions(keys, cb.offsets)
    other = np.flatnonzero((lcp > 0) & (np.diff(line, prepend=line[:1] - 1) != 0))
    idx = [fresh, *(np.arange(cb.offsets[x], cb.offsets[x] + lcp[x]) for x in other.tolist())]
    pos = np.concatenate(idx) if len(idx) > 1 else fresh
    call = np.searchsorted(cb.offsets, pos, side="right") - 1
    df = pl.DataFrame({"line": line[call], "key": keys[pos]})
    return int(df.group_by("line").agg(pl.col("key").n_unique()).get_column("key").max())


class PrefixIndex:
    """The trace-dependent part of prefix matching, computed once and shared by every replayed system:
    prefix keys, each line's working set and the unbounded leading hits; LRU runs are memoized by capacity."""

    def __init__(self, cb: CallBlocks) -> None:
        self.cb = cb
        self.keys = cb.prefix_keys()
        self.has = cb.calls.get_column("has_hashes").to_numpy()
        self.reads = cb.calls.get_column("cache_read_tokens").fill_null(0).to_numpy().astype(float)
        self.max_line_blocks = _max_line_blocks(self.keys, cb) if self.keys.size else 0
        self._unbounded: np.ndarray | None = None
        self._stack: LruStack | None = None
        self._lru: dict[float, np.ndarray] = {}

    def leading_hits(self, capacity_blocks: float) -> tuple[np.ndarray, bool]:
        """Leading cached blocks per call with an LRU cache of ``capacity_blocks``; ``(hits, evicting)``.

        Lines are taken one after another (``cb`` order), so when every line's working set fits, no block a
        line reuses can have been evicted and the exact answer is the unbounded one (vectorized); otherwise
        the LRU answer comes from the stack distances (computed once, shared by every capacity)."""
        if self.max_line_blocks <= capacity_blocks:
            if self._unbounded is None:
                self._unbounded = _leading_hits_unbounded(self.keys, self.cb.offsets)
            return self._unbounded, False
        cap = float(np.floor(capacity_blocks))
        if cap not in self._lru:
            if self._stack is None:
                self._stack = _row_order_stack(self.keys, self.cb.offsets)
            self._lru[cap] = leading_hits(self._stack.lookups, self.cb.calls.height, cap)
        return self._lru[cap], True

    def no_hash_note(self) -> list[str]:
        k = int((~self.has).sum())
        if not k:
            return []
        return [f"{k} call(s) have no prompt block hashes: their cached prefix is the provider's reported cache reads"]


def _prefix_tokens(index: PrefixIndex, capacity_tokens: float, input_tokens: np.ndarray) -> tuple[np.ndarray, bool]:
    """Leading cached tokens per call with an LRU cache of ``capacity_tokens`` (calls without hashes: the provider's
    reported reads), at most ``input − 1``; and whether the cache evicts."""
    bs = float(index.cb.block_size)
    blocks, evicting = index.leading_hits(max(capacity_tokens / bs, 0.0))
    limit = np.maximum(np.asarray(input_tokens, dtype=float) - 1.0, 0.0)
    return np.where(index.has, np.minimum(blocks * bs, limit), np.minimum(index.reads, limit)), evicting


def _evict_note(capacity_tokens: float, index: PrefixIndex, what: str) -> str:
    room = max(capacity_tokens / index.cb.block_size, 0.0) * index.cb.block_size
    return (f"the HBM prefix cache holds {room:,.0f} tokens per client, less than a conversation's working set: "
            + what)


def cached_tokens(index: PrefixIndex, policy: CachePolicy, hbm_capacity_tokens: float,
                  input_tokens: np.ndarray) -> CacheHits:
    """Cached tokens per call under ``none`` or ``prefix`` (HBM only); ``hbm_capacity_tokens`` is the
    prefix-cache room of one client. For ``lmcache`` use :func:`tiered_tokens`.

    At most ``input − 1`` tokens are cached (the last prompt token is always computed)."""
    n = index.cb.calls.height
    zero = np.zeros(n)
    if policy.kind == "none" or n == 0:
        return CacheHits(zero.copy(), zero.copy(), zero.copy())
    hbm, evicting = _prefix_tokens(index, hbm_capacity_tokens, input_tokens)
    notes = [_evict_note(hbm_capacity_tokens, index, "LRU evictions apply")] if evicting else []
    return CacheHits(hbm, zero.copy(), zero.copy(), notes + index.no_hash_note())


def cached_tokens_tiered(index: PrefixIndex, hbm_capacity_tokens: float, cpu_capacity_tokens: float,
                         input_tokens: np.ndarray) -> CacheHits:
    """Cached tokens per call with the HBM prefix cache backed by a CPU tier that keeps every block written (as
    LMCache stores each computed chunk): both LRU, so a call's leading run found in the larger tier contains the one
    found in HBM (LRU stacks are inclusive), the CPU tier serves the difference. Exact from the same stack
    distances as :func:`cached_tokens`."""
    if index.cb.calls.height == 0:
        return cached_tokens(index, CachePolicy("prefix"), hbm_capacity_tokens, input_tokens)
    hbm, evicting = _prefix_tokens(index, hbm_capacity_tokens, input_tokens)
    total, _ = _prefix_tokens(index, max(cpu_capacity_tokens, hbm_capacity_tokens), input_tokens)
    notes = ([_evict_note(hbm_capacity_tokens, index, "evicted blocks are served from the CPU tier while it holds "
                                                      "them")] if evicting else [])
    return CacheHits(hbm, np.maximum(total - hbm, 0.0), np.zeros_like(hbm), notes + index.no_hash_note())
