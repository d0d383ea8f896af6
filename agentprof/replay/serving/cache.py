"""The shared prefix cache of the serving simulation: an HBM tier per replica plus LMCache-style CPU and disk
tiers shared by the system's replicas, block-granular, LRU with an optional provider-style TTL.

Blocks are dense node ids of chained prefix keys (equal id = equal token prefix through that block), so a
call's hit is the leading run of its blocks present in HBM, continued from the CPU tier and then the disk tier
(LMCache serves the chunks after the engine's own prefix hit). Stores are write-through (LMCache stores KV on
prefill). Within a prompt the first block is stamped most recently used, so eviction takes the deepest blocks
of the least recently used prompts first and shared prefixes (system prompt, tools) survive longest. Evicting
runs per step in bulk (``np.argpartition`` over the resident set), not per block.
"""

from __future__ import annotations

import math

import numpy as np

TIERS = ("hbm", "cpu", "disk")


class Tier:
    """One LRU tier over ``n_nodes`` possible blocks with a capacity in blocks (``inf`` = unbounded)."""

    __slots__ = ("present", "stamp", "used_t", "res", "count", "capacity", "clock", "ttl_s", "evicted")

    def __init__(self, n_nodes: int, capacity: float, ttl_s: float | None) -> None:
        self.present = np.zeros(n_nodes, dtype=bool)
        self.stamp = np.zeros(n_nodes, dtype=np.float64)
        self.used_t = np.zeros(n_nodes, dtype=np.float64)
        self.res: list[np.ndarray] = []
        self.count = 0
        self.capacity = capacity
        self.clock = 0.0
        self.ttl_s = ttl_s
        self.evicted = 0

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
        new = ids[~self.present[ids]]
        if new.size:
            self.present[new] = True
            self.res.append(new)
            self.count += int(new.size)
        n = ids.size
        self.stamp[ids] = self.clock + np.arange(n, 0, -1, dtype=np.float64)
        self.clock += n + 1
        self.used_t[ids] = now
        if self.count > self.capacity:
            self.evict(self.capacity)

    def evict(self, capacity: float) -> None:
        """Drop the least recently used blocks down to ``capacity`` (one partial sort over the resident set)."""
        if self.count <= capacity:
            return
        res = np.concatenate(self.res) if len(self.res) > 1 else self.res[0]
        target = max(int(math.floor(capacity)), 0) if math.isfinite(capacity) else self.count
        k = self.count - target
        if k >= res.size:
            drop, keep = res, res[:0]
        else:
            part = np.argpartition(self.stamp[res], k)
            drop, keep = res[part[:k]], res[part[k:]]
        self.present[drop] = False
        self.evicted += int(drop.size)
        self.res = [keep]
        self.count = int(keep.size)


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

    def store(self, replica: int, ids: np.ndarray, now: float) -> None:
        """The prompt's blocks are in HBM now, and written through to the lower tiers."""
        self.hbm[replica].touch(ids, now)
        self.cpu.touch(ids, now)
        self.disk.touch(ids, now)

    def affinity(self, ids: np.ndarray, now: float) -> list[int]:
        """Leading HBM blocks of ``ids`` on each replica (what a KV-aware router scores)."""
        return [t.leading(ids, now) for t in self.hbm]
