"""The shared prefix cache of the serving simulation: an HBM tier per replica plus LMCache-style CPU and disk
tiers shared by the system's replicas, block-granular, LRU with an optional provider-style TTL.

Blocks are dense node ids of chained prefix keys (equal id = equal token prefix through that block), so a
call's hit is the leading run of its blocks present in HBM, continued from the CPU tier and then the disk tier
(LMCache serves the chunks after the engine's own prefix hit). Stores are write-through (LMCache stores KV on
prefill) for the blocks past the HBM hit. A prompt's blocks are stamped when it is admitted, the first block most recently used, so eviction takes the deepest blocks
of the least recently used prompts first and shared prefixes (system prompt, tools) survive longest. Eviction
walks a recency log (:class:`Tier`), never a per-block Python loop or a sort.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

TIERS = ("hbm", "cpu", "disk")


class Tier:
    """One LRU tier over ``n_nodes`` possible blocks with a capacity in blocks (``inf`` = unbounded).

    Recency is a log of touched blocks in stamp order (a queue of arrays); eviction pops the oldest entries
    whose stamp is still current, so it costs what it evicts plus the stale entries it skips, never a sort."""

    __slots__ = ("present", "stamp", "used_t", "log", "head", "logged", "count", "capacity", "clock", "ttl_s",
                 "evicted", "track")

    def __init__(self, n_nodes: int, capacity: float, ttl_s: float | None) -> None:
        self.present = np.zeros(n_nodes, dtype=bool)
        self.stamp = np.zeros(n_nodes, dtype=np.float64)
        self.used_t = np.zeros(n_nodes, dtype=np.float64)
        self.log: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self.head = 0
        self.logged = 0
        self.count = 0
        self.capacity = capacity
        self.clock = 0.0
        self.ttl_s = ttl_s
        self.evicted = 0
        self.track = math.isfinite(capacity)  # an unbounded tier never evicts: no log

    def leading(self, ids: np.ndarray, now: float) -> int:
        """Leading blocks of ``ids`` held (and, with a TTL, used within it)."""
        if not ids.size or self.capacity <= 0:
            return 0
        m = self.present[ids]
        if self.ttl_s is not None:
            m &= (now - self.used_t[ids]) <= self.ttl_s
        return int(ids.size) if m.all() else int(m.argmin())

    def touch(self, ids: np.ndarray, now: float) -> None:
        """Insert or refresh ``ids`` (one prompt, in order): the first block ends most recently used."""
        if not ids.size or self.capacity <= 0:
            return
        self.count += int(ids.size - np.count_nonzero(self.present[ids]))
        self.present[ids] = True
        if self.ttl_s is not None:
            self.used_t[ids] = now
        if self.track:
            rev = ids[::-1]
            st = self.clock + np.arange(1, ids.size + 1, dtype=np.float64)
            self.stamp[rev] = st
            self.clock += ids.size + 1
            self.log.append((rev, st))
            self.logged += int(ids.size)
            if self.logged > 2 * self.count + (1 << 16):
                self._compact()
        if self.count > self.capacity:
            self.evict(self.capacity)

    def _compact(self) -> None:
        """Drop stale log entries (blocks touched again later or evicted); the log stays in stamp order."""
        a = np.concatenate([x[0] for x in self.log])[self.head:]
        st = np.concatenate([x[1] for x in self.log])[self.head:]
        live = self.present[a] & (self.stamp[a] == st)
        self.log = deque([(a[live], st[live])])
        self.head = 0
        self.logged = int(live.sum())

    def evict(self, capacity: float) -> None:
        """Drop the least recently used blocks down to ``capacity``."""
        k = self.count - max(int(math.floor(capacity)), 0)
        while k > 0 and self.log:
            a, st = self.log[0]
            start = self.head
            end = min(a.size, start + max(4 * k, 4096))  # a window: never rescan a long live head
            seg, sst = a[start:end], st[start:end]
            idx = np.flatnonzero(self.present[seg] & (self.stamp[seg] == sst))
            if idx.size <= k:
                drop = seg[idx]
                if end == a.size:
                    self.log.popleft()
                    self.head = 0
                else:
                    self.head = end
                self.logged -= end - start
            else:
                drop = seg[idx[:k]]
                step = int(idx[k - 1]) + 1
                self.head += step
                self.logged -= step
            self.present[drop] = False
            self.count -= int(drop.size)
            self.evicted += int(drop.size)
            k -= int(drop.size)


class TieredCache:
    """HBM per replica, CPU and disk shared (capacities in blocks; 0 = no such tier)."""

    def __init__(self, n_nodes: int, replicas: int, hbm_blocks: float, cpu_blocks: float, disk_blocks: float,
                 ttl_s: float | None = None) -> None:
        self.hbm = [Tier(n_nodes, hbm_blocks, ttl_s) for _ in range(replicas)]
        self.cpu = Tier(n_nodes, cpu_blocks, ttl_s)
        self.disk = Tier(n_nodes, disk_blocks, ttl_s)

    def lookup(self, replica: int, ids: np.ndarray, now: float) -> tuple[int, int, int]:
        """Leading blocks served by HBM, then the CPU tier, then disk."""
        h = self.hbm[replica].leading(ids, now)
        c = self.cpu.leading(ids[h:], now) if self.cpu.capacity > 0 else 0
        d = self.disk.leading(ids[h + c:], now) if self.disk.capacity > 0 else 0
        return h, c, d

    def store(self, replica: int, ids: np.ndarray, now: float, hbm_hit: int = 0) -> None:
        """The prompt's blocks are in HBM now; the blocks after its HBM hit are the ones LMCache looked up or
        stored (written through to the lower tiers, which refreshes their recency there)."""
        self.hbm[replica].touch(ids, now)
        rest = ids[hbm_hit:]
        self.cpu.touch(rest, now)
        self.disk.touch(rest, now)

    def affinity(self, ids: np.ndarray, now: float) -> list[int]:
        """Leading HBM blocks of ``ids`` on each replica (what a KV-aware router scores)."""
        return [t.leading(ids, now) for t in self.hbm]
