"""The run-level stack-distance engine against the plain per-chunk LRU it replaced: random agent-like workloads
(branching, trimmed and shared prompts, interleaved sessions, TTL) and every shipped sample, through the cache
simulator, its capacity sweep and the replay's prefix cache."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from agentprof.analysis import lru_stack as ls
from agentprof.analysis.cachesim import Tier, _workload, capacity_chunks, capacity_sweep, simulate
from agentprof.analysis.calls import CallBlocks, model_calls
from agentprof.catalog import find_model
from agentprof.replay.cachepolicy import PrefixIndex, _leading_hits_lru

from .lru_reference import lru_reference, random_workload

MODEL = "mistral-nemo-12b"
SAMPLES = ["kv-cache-tester", "claude-code", "codex", "openhands", "mini-swe-agent", "swe-agent"]


def _events(seed: int):
    rng = np.random.default_rng(seed)
    return random_workload(rng, sessions=int(rng.integers(1, 14)), calls=int(rng.integers(1, 9)),
                           shared=int(rng.integers(1, 4)), max_chunk=int(rng.integers(4, 60)))


@pytest.mark.parametrize("seed", range(60))
def test_random_workloads_match_the_per_chunk_lru(seed):
    keys, offsets, ev_call, ev_store, ev_time = _events(seed)
    st = ls.lru_stack(keys, offsets, np.array(ev_call), np.array(ev_store))
    n = offsets.size - 1
    distinct = len(set(keys.tolist()))
    assert st.distinct == distinct
    caps = [0, 1, 2, 5, 17, 64, 300, distinct - 1, distinct, math.inf]
    for c in caps:
        ref, evictions = lru_reference(keys, offsets, ev_call, ev_store, c)
        assert ls.leading_hits(st.lookups, n, c).tolist() == ref, c
        got_ev = 0 if math.isinf(c) else max(0, ls.inserts(st.stores, c) - int(min(c, st.distinct)))
        assert got_ev == evictions, c
    # the TTL variant: a chunk last stored more than ttl before its lookup is gone
    evs = np.array(ev_call)
    stores = np.array(ev_store)
    times = np.array(ev_time, dtype=np.int64)
    lookup_ns = np.zeros(n, dtype=np.int64)
    lookup_ns[evs[~stores]] = times[~stores]
    for ttl in (0, 7, 25):
        runs = st.expire(ttl / 1e9, lookup_ns, times[stores])
        for c in (3, 40, math.inf):
            ref, _ = lru_reference(keys, offsets, ev_call, ev_store, c, ttl_ns=ttl, ev_time=ev_time)
            assert ls.leading_hits(runs, n, c).tolist() == ref, (ttl, c)


@pytest.mark.parametrize("seed", range(20))
def test_sweep_helpers_agree_with_per_capacity_runs(seed):
    keys, offsets, ev_call, ev_store, _ = _events(100 + seed)
    st = ls.lru_stack(keys, offsets, np.array(ev_call), np.array(ev_store))
    unlimited = ls.finite_hits(st.lookups)
    assert unlimited == sum(lru_reference(keys, offsets, ev_call, ev_store, math.inf)[0])
    for need in {0, min(1, unlimited), unlimited // 2, unlimited}:
        c = ls.smallest_capacity(st.lookups, need)
        assert sum(lru_reference(keys, offsets, ev_call, ev_store, c)[0]) >= need
        if c > 0:
            assert sum(lru_reference(keys, offsets, ev_call, ev_store, c - 1)[0]) < need


def test_prefix_keys_only_new_chunks_are_ranked():
    # three calls: the second extends the first, the third repeats an older prefix after another prompt
    keys = np.array([1, 2, 3, 1, 2, 3, 4, 9, 8, 1, 2], dtype=np.int64)
    offsets = np.array([0, 3, 7, 9, 11])
    ids, k = ls.dense_ids(keys, offsets)
    assert k == 6
    remap = dict(zip(keys.tolist(), ids.tolist(), strict=True))  # one id per key, consistently
    assert len(set(remap.values())) == 6 and [remap[x] for x in keys.tolist()] == ids.tolist()


def _chunks(capacity_chunks_: int, block: int = 256) -> int:
    b = find_model(MODEL).lmcache_chunk_bytes(block)
    return capacity_chunks_ * (-(-b // 4096) * 4096)


def _reference_sim(trace, block: int, capacity: float, provider: bool = False, ttl_s: float | None = None):
    w = _workload(trace, block, provider, 0)
    lengths = np.diff(w.offsets)
    ev = [(i, typ == 1, t) for t, typ, i in w.events if w.eligible[i] and lengths[i] > 0]
    hits, ev_n = lru_reference(w.keys, w.offsets, [e[0] for e in ev], [e[1] for e in ev], capacity,
                               None if ttl_s is None else ttl_s * 1e9, [e[2] for e in ev])
    return [hits[i] * block for i in w.order.tolist()], ev_n


@pytest.mark.parametrize("name", SAMPLES)
def test_shipped_samples_simulate_as_the_per_chunk_lru(sample_trace, name):
    tr = sample_trace(name)
    for block, chunks in ((256, 30), (256, 500), (64, 200)):
        res = simulate(tr, MODEL, [Tier("cpu", _chunks(chunks, block))], block=block)
        ref, evictions = _reference_sim(tr, block, chunks)
        assert res.per_call["hit_tokens"].to_list() == ref
        assert res.tier("cpu")["evictions"] == evictions
    # provider mode: per-model keys, 5-minute TTL, unlimited
    res = simulate(tr, MODEL, provider=True, ttl_s=300.0, block=64)
    ref, _ = _reference_sim(tr, 64, math.inf, provider=True, ttl_s=300.0)
    assert res.per_call["hit_tokens"].to_list() == ref


@pytest.mark.parametrize("name", ["kv-cache-tester", "claude-code", "codex"])
def test_shipped_sweeps_match_the_per_chunk_lru(sample_trace, name):
    tr = sample_trace(name)
    sw = capacity_sweep(tr, MODEL, block=256)
    prompt = int(model_calls(tr).calls.get_column("prompt_tokens").fill_null(0).sum())
    for p in sw.points[:-1][::3]:
        ref, _ = _reference_sim(tr, 256, p["capacity_chunks"])
        assert p["hit_rate"] == sum(ref) / prompt
    c = sw.capacity_at_target_chunks
    need = math.ceil(sw.target * sum(_reference_sim(tr, 256, math.inf)[0]) / 256 - 1e-9)
    assert sum(_reference_sim(tr, 256, c)[0]) / 256 >= need > sum(_reference_sim(tr, 256, c - 1)[0]) / 256
    assert capacity_chunks(sw.capacity_at_target_bytes, sw.chunk_bytes) == c


@pytest.mark.parametrize("name", ["kv-cache-tester", "claude-code", "codex", "openhands"])
def test_shipped_samples_replay_prefix_cache_as_the_per_chunk_lru(sample_trace, name):
    cb = model_calls(sample_trace(name))
    idx = PrefixIndex(cb)
    rows = np.flatnonzero(cb.lengths > 0).tolist()
    ev_call = [r for r in rows for _ in (0, 1)]
    ev_store = [s for _ in rows for s in (False, True)]
    for c in (7, 60, 900, idx.max_line_blocks - 1):
        ref, _ = lru_reference(idx.keys, cb.offsets, ev_call, ev_store, c)
        assert _leading_hits_lru(idx.keys, cb.offsets, [c + 0.5])[0].tolist() == ref
        got, evicting = idx.leading_hits(c + 0.5)
        assert got.tolist() == ref and evicting == (c + 0.5 < idx.max_line_blocks)


def _by_definition(keys: np.ndarray, offsets: np.ndarray, line: list[str]) -> tuple[list[int], int]:
    """Unbounded leading hits (calls in row order) and the largest line's distinct blocks, key by key."""
    seen: set[int] = set()
    per_line: dict[str, set[int]] = {}
    hits = []
    for x in range(offsets.size - 1):
        ks = keys[offsets[x]:offsets[x + 1]].tolist()
        n = 0
        while n < len(ks) and ks[n] in seen:
            n += 1
        hits.append(n)
        seen.update(ks)
        per_line.setdefault(line[x], set()).update(ks)
    return hits, max((len(v) for v in per_line.values()), default=0)


@pytest.mark.parametrize("name", SAMPLES)
def test_prefix_index_unbounded_answer_and_working_set_by_definition(sample_trace, name):
    cb = model_calls(sample_trace(name))
    idx = PrefixIndex(cb)
    hits, widest = _by_definition(idx.keys, cb.offsets, cb.calls.get_column("line_id").to_list())
    assert idx.max_line_blocks == widest
    got, evicting = idx.leading_hits(widest)
    assert got.tolist() == hits and not evicting


@pytest.mark.parametrize("seed", range(30))
def test_prefix_index_on_random_lines(seed):
    keys, offsets, *_ = _events(300 + seed)
    rng = np.random.default_rng(seed)
    n = offsets.size - 1
    lines = sorted(rng.integers(0, 4, size=n).tolist())  # lines contiguous, as in analysis order
    cb = CallBlocks(pl.DataFrame({"line_id": [f"l{v}" for v in lines], "has_hashes": [True] * n,
                                  "cache_read_tokens": [0] * n}), keys, offsets, 64, "agentprof")
    idx = PrefixIndex(cb)
    hits, widest = _by_definition(keys, offsets, [f"l{v}" for v in lines])
    assert idx.max_line_blocks == widest
    assert idx.leading_hits(widest + 1)[0].tolist() == hits
