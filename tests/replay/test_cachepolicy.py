"""Cache policies: parsing, HBM prefix reuse with capacity, and the LMCache tiers."""

from __future__ import annotations

import numpy as np
import pytest

from agentprof.analysis.calls import model_calls
from agentprof.errors import AgentprofError
from agentprof.replay.cachepolicy import PrefixIndex, cached_tokens, parse_policy
from agentprof.replay.replay import replay
from agentprof.trace.hashing import chain_hashes

from .spans import agent, model, trace


def test_parse_policy() -> None:
    assert parse_policy("none").kind == "none" and parse_policy("PREFIX").kind == "prefix"
    p = parse_policy("lmcache:cpu=200GiB,disk=1TB")
    assert p.kind == "lmcache" and p.cpu_bytes == 200 * 2**30 and p.disk_bytes == 1e12
    assert parse_policy("lmcache:cpu=unlimited").cpu_bytes == float("inf")
    for bad in ("lru", "lmcache", "lmcache:gpu=1GB", "lmcache:cpu=lots"):
        with pytest.raises(AgentprofError):
            parse_policy(bad)


def _calls(prompts: list[list[int]], outs: int = 100, session: str = "s1"):
    recs = [agent(0, 10 * len(prompts) + 10, session=session)]
    for i, toks in enumerate(prompts):
        recs.append(model(f"m{i}", 10 * i, 10 * i + 5, inp=len(toks), out=outs, session=session,
                          block_hashes=chain_hashes(toks, 64), prompt_tokens_hashed=len(toks)))
    return trace(recs)


BASE = list(range(6400))                       # 100 blocks
GROWN = BASE + list(range(10**6, 10**6 + 3200))  # the same prefix + 50 new blocks
OTHER = list(range(5 * 10**6, 5 * 10**6 + 6400))


def test_prefix_reuse_unbounded_and_with_eviction() -> None:
    t = _calls([BASE, GROWN, OTHER, GROWN])
    cb = model_calls(t)
    idx = PrefixIndex(cb)
    inp = cb.calls.get_column("input_tokens").to_numpy().astype(float)
    big = cached_tokens(idx, parse_policy("prefix"), 10**9, inp)
    assert list(big.hbm) == [0, 6400, 0, 9600 - 1]  # last prompt token is always computed
    # room for 120 blocks: GROWN's 150 blocks leave its first 120 (deepest evicted first); OTHER's 100 then
    # push out GROWN's blocks 20..119, so GROWN comes back with its first 20 blocks cached
    small = cached_tokens(idx, parse_policy("prefix"), 120 * 64, inp)
    assert list(small.hbm) == [0, 6400, 0, 20 * 64]
    assert small.notes and "LRU" in small.notes[0]
    none = cached_tokens(idx, parse_policy("none"), 10**9, inp)
    assert not none.total.any()


def test_lines_are_exact_when_each_fits() -> None:
    # two conversations each within capacity: the vectorized answer is used (no eviction note)
    t = _calls([BASE, GROWN])
    cb = model_calls(t)
    idx = PrefixIndex(cb)
    hits, evicting = idx.leading_hits(150)
    assert not evicting and list(hits) == [0, 100]


def test_calls_without_hashes_use_provider_cache_reads() -> None:
    recs = [agent(0, 30), model("m0", 0, 5, inp=5000, cache_read_tokens=0),
            model("m1", 10, 15, inp=6000, cache_read_tokens=4800)]
    cb = model_calls(trace(recs))
    res = cached_tokens(PrefixIndex(cb), parse_policy("prefix"), 10**9, np.array([5000.0, 6000.0]))
    assert list(res.hbm) == [0, 4800] and "provider" in res.notes[0]


def test_cache_policy_changes_the_replay() -> None:
    t = _calls([BASE, GROWN, GROWN + list(range(2 * 10**6, 2 * 10**6 + 640))])
    none = replay(t, ["h200+x86"], cache_policy="none").systems[0]
    pref = replay(t, ["h200+x86"], cache_policy="prefix").systems[0]
    assert pref.cache["hit_share"] > 0.5 and none.cache["hit_share"] == 0
    assert pref.model_calls_s < none.model_calls_s
    lm = replay(t, ["h200+x86"], cache_policy="lmcache:cpu=100GiB").systems[0]
    assert lm.cache["hit_share"] > 0.3
