"""The plain LRU the stack-distance engine must reproduce, and random agent-like workloads to compare them on.

The reference is the per-chunk ``OrderedDict`` simulation agentprof ran before (``replay.cachepolicy`` and the
tests of ``analysis.cachesim``): a lookup counts the leading chunks present, a store touches the call's chunks
deepest first (chunk 0 ends most recently used) and then evicts the least recently used beyond the capacity.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


def lru_reference(keys: np.ndarray, offsets: np.ndarray, ev_call: list[int], ev_store: list[bool],
                  capacity: float, ttl_ns: float | None = None, ev_time: list[int] | None = None
                  ) -> tuple[list[int], int]:
    """Leading chunks found per call (call rows) and evictions, one chunk at a time."""
    od: OrderedDict[int, None] = OrderedDict()
    stored_at: dict[int, int] = {}
    klist, offs = keys.tolist(), offsets.tolist()
    hits = [0] * (len(offs) - 1)
    evictions = 0
    for e, (x, is_store) in enumerate(zip(ev_call, ev_store, strict=True)):
        ks = klist[offs[x]:offs[x + 1]]
        now = ev_time[e] if ev_time is not None else 0
        if not is_store:
            n = 0
            while n < len(ks) and ks[n] in od and (ttl_ns is None or now - stored_at[ks[n]] <= ttl_ns):
                n += 1
            hits[x] = n
            continue
        for k in reversed(ks):
            if k in od:
                od.move_to_end(k)
            else:
                od[k] = None
            stored_at[k] = now
        while len(od) > capacity:
            od.popitem(last=False)
            evictions += 1
    return hits, evictions


def random_workload(rng: np.random.Generator, sessions: int = 12, calls: int = 8, shared: int = 3,
                    max_chunk: int = 40) -> tuple[np.ndarray, np.ndarray, list[int], list[bool], list[int]]:
    """Chained keys of agent-like sessions (each call extends, trims or branches its line's last prompt; some
    start with one of ``shared`` system prompts), and an interleaved event order with lookup before store.

    Returns keys, offsets, and the events (call row, is-store, time)."""
    trie: dict[tuple[int, int], int] = {}

    def chain(contents: list[int]) -> list[int]:
        out, parent = [], -1
        for c in contents:
            parent = trie.setdefault((parent, c), len(trie) + 1)
            out.append(parent)
        return out

    systems = [list(rng.integers(0, 5, size=int(rng.integers(1, 6)))) for _ in range(shared)]
    prompts: list[list[int]] = []
    owner: list[int] = []
    for s in range(sessions):
        cur = list(systems[int(rng.integers(0, shared))]) if rng.random() < 0.7 else []
        for _ in range(calls):
            move = rng.random()
            if move < 0.7 or not cur:
                cur = cur + list(rng.integers(0, 1000, size=int(rng.integers(0, max_chunk // 4 + 1))))
            elif move < 0.85:
                cur = cur[: int(rng.integers(0, len(cur) + 1))]  # compaction or a retry from earlier
            else:
                cut = int(rng.integers(0, len(cur) + 1))
                cur = cur[:cut] + list(rng.integers(0, 1000, size=int(rng.integers(1, max_chunk // 4 + 2))))
            prompts.append(cur[:max_chunk * 3])
            owner.append(s)
    keys = [chain([int(c) for c in p]) for p in prompts]
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum([len(k) for k in keys], out=offsets[1:])
    flat = np.array([k for ks in keys for k in ks], dtype=np.int64)
    # times: sessions run concurrently; a call's lookup at its start, its store 1..20 units later
    events: list[tuple[int, int, int]] = []
    t_of = {s: int(rng.integers(0, 50)) for s in range(sessions)}
    for x, s in enumerate(owner):
        start = t_of[s]
        store = start + int(rng.integers(1, 21))
        events += [(start, 0, x), (store, 1, x)]
        t_of[s] = store + int(rng.integers(0, 30))
    events.sort()
    return flat, offsets, [x for _, _, x in events], [bool(t) for _, t, _ in events], [t for t, _, _ in events]
