"""Cache simulator: LMCache's behaviours on hand-made prompts (exact chunk counts), the stack-distance LRU engine
against a plain per-chunk LRU on real traces, and hit rate against capacity."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from agentprof.analysis.cachesim import Tier, _workload, capacity_chunks, capacity_sweep, simulate
from agentprof.catalog import find_model
from agentprof.errors import AgentprofError

from .analysis_helpers import TraceBuilder

MODEL = "mistral-nemo-12b"
SPEC = find_model(MODEL)


def chunk_bytes(block: int, tp: int = 1) -> int:
    b = SPEC.lmcache_chunk_bytes(block, tp=tp)
    return -(-b // 4096) * 4096


def cap(chunks: int, block: int = 64) -> int:
    return chunks * chunk_bytes(block)


def toks(seed: int, n: int) -> list[int]:
    return list(range(seed * 100_000, seed * 100_000 + n))


def build(calls: list[tuple[str, float, list[int]]], model: str = "m", models: list[str] | None = None):
    """calls: (session, start seconds, prompt tokens); each call lasts 1 s."""
    b = TraceBuilder()
    sessions = {}
    for s, t, _ in calls:
        sessions.setdefault(s, [t, t])
        sessions[s][1] = max(sessions[s][1], t + 1)
    for s, (lo, hi) in sessions.items():
        b.session(s, lo, hi)
    for i, (s, t, p) in enumerate(calls):
        b.model(s, t, t + 1, tokens=p, model=models[i] if models else model)
    return b.trace()


def hits(res) -> list[int]:
    return res.per_call["hit_tokens"].to_list()


def test_per_call_columns_and_simulation_order():
    tr = build([("b", 5, toks(1, 128)), ("a", 0, toks(2, 128))])
    res = simulate(tr, MODEL, block=64)
    for col in ("span_id", "session_id", "start_ns", "prompt_tokens", "hit_tokens", "hit_tokens_hbm",
                "hit_tokens_cpu", "hit_tokens_disk", "bytes_loaded_cpu", "bytes_loaded_disk"):
        assert col in res.per_call.columns
    assert res.per_call["session_id"].to_list() == ["a", "b"]  # timestamp order, not file order
    assert res.to_dict()["tiers"][0]["name"] == "cpu"


def test_partial_tail_chunk_is_never_cached():
    p = toks(1, 300)
    res = simulate(build([("a", 0, p), ("a", 10, p)]), MODEL, block=256)
    assert hits(res) == [0, 256]  # 44 tail tokens recomputed every time
    assert res.prompt_tokens == 600 and res.hit_rate == pytest.approx(256 / 600)


def test_hits_are_prefix_only():
    # FIFO evicts the first stored chunk first; the later chunks stay but cannot be used without it
    a = toks(1, 192)
    tr = build([("a", 0, a), ("b", 10, toks(2, 64)), ("a", 20, a)])
    res = simulate(tr, MODEL, [Tier("cpu", cap(3))], block=64, policy="fifo")
    assert hits(res) == [0, 0, 0]
    res = simulate(tr, MODEL, [Tier("cpu", cap(4))], block=64, policy="fifo")
    assert hits(res) == [0, 0, 192]


def test_lru_evicts_deep_chunks_first():
    # capacity 4: after A (3 chunks) and B (2 chunks) one chunk must go. LMCache's engine touches a request's
    # chunks in reverse, so A's deepest chunk goes and A keeps a 2-chunk prefix (forward order would lose
    # chunk 0 and with it every hit).
    a = toks(1, 192)
    tr = build([("a", 0, a), ("b", 10, toks(2, 128)), ("a", 20, a + toks(3, 64))])
    res = simulate(tr, MODEL, [Tier("cpu", cap(4))], block=64)
    assert hits(res) == [0, 0, 128]
    assert res.tier("cpu")["evictions"] == 1 + 2  # one for B, two more to fit A's 4 chunks


def test_ttl_expires_and_is_refreshed_on_use():
    p = toks(1, 128)
    tr = build([("a", 0, p), ("a", 100, p), ("a", 350, p), ("a", 700, p)])
    res = simulate(tr, MODEL, provider=True, ttl_s=300, block=64)
    # 350 s is 349 s after the first store but only 249 s after the refresh at 100 s; 700 s is 349 s after
    assert hits(res) == [0, 128, 128, 0]
    assert simulate(tr, MODEL, provider=True, ttl_s=None, block=64).hit_tokens == 3 * 128


def test_concurrent_sessions_compete_for_capacity():
    a1, b1 = toks(1, 256), toks(2, 256)
    a2 = a1 + toks(3, 64)
    interleaved = build([("a", 0, a1), ("b", 1.5, b1), ("a", 3, a2)])
    apart = build([("a", 0, a1), ("a", 3, a2), ("b", 100, b1)])
    tiers = [Tier("cpu", cap(6))]
    assert hits(simulate(interleaved, MODEL, tiers, block=64)) == [0, 0, 128]  # A kept 2 of 4 chunks
    assert hits(simulate(apart, MODEL, tiers, block=64)) == [0, 256, 0]


def test_store_happens_after_prefill():
    p = toks(1, 256)
    b = TraceBuilder()
    b.session("a", 0, 10)
    b.session("b", 0, 10)
    b.model("a", 0, 5, tokens=p, ttft=2.0, stream=True)  # stored at 2 s
    b.model("b", 1, 2, tokens=p)  # starts before a's prefill ends: nothing to reuse yet
    b.model("b", 3, 4, tokens=p)
    res = simulate(b.trace(), MODEL, block=64)
    assert hits(res) == [0, 0, 256]


def test_capacity_in_chunks_aligns_chunks_to_4096_bytes():
    raw = SPEC.lmcache_chunk_bytes(256, tp=3)
    assert raw % 4096  # 8 KV heads over 3 ranks: not page aligned
    size = 50 * raw + 4096 * 10
    expected = size // (-(-raw // 4096) * 4096)
    assert capacity_chunks(size, raw) == expected
    assert expected < size // raw
    tr = build([("a", 0, toks(1, 512))])
    res = simulate(tr, MODEL, [Tier("cpu", size)], block=256, tp=3)
    assert res.tier("cpu")["capacity_chunks"] == expected and res.chunk_bytes == raw


def test_tier_lookup_order_and_loads():
    p = toks(1, 384)  # 6 chunks
    tr = build([("a", 0, p), ("a", 10, p + toks(2, 64))])
    tiers = [Tier("disk", None), Tier("cpu", cap(4)), Tier("hbm", cap(2))]
    res = simulate(tr, MODEL, tiers, block=64)
    row = res.per_call.row(1, named=True)
    assert (row["hit_tokens_hbm"], row["hit_tokens_cpu"], row["hit_tokens_disk"]) == (128, 128, 128)
    assert row["hit_tokens"] == 384
    raw = SPEC.lmcache_chunk_bytes(64)
    assert row["bytes_loaded_cpu"] == 2 * raw and row["bytes_loaded_disk"] == 2 * raw
    assert [t["name"] for t in res.tiers] == ["hbm", "cpu", "disk"]
    assert res.tier("hbm")["bytes_loaded"] == 0


def test_block_is_coarsened_from_the_trace_hashes():
    p = toks(1, 1000)
    q = p[:700] + toks(2, 400)
    res = simulate(build([("a", 0, p), ("a", 10, q)]), MODEL, block=256)
    assert hits(res) == [0, 512]  # chunks 0-1 (tokens 0-511) are shared, chunk 2 (512-767) differs
    with pytest.raises(AgentprofError, match="multiple of the trace's block size 64"):
        simulate(build([("a", 0, p)]), MODEL, block=100)


def test_minimum_cacheable_prompt():
    small = toks(1, 512)
    tr = build([("a", 0, small), ("a", 10, small)])
    assert simulate(tr, MODEL, block=64, min_cacheable_tokens=1024).hit_tokens == 0
    assert simulate(tr, MODEL, block=64, min_cacheable_tokens=512).hit_tokens == 512


def test_provider_caches_are_per_model():
    p = toks(1, 256)
    tr = build([("a", 0, p), ("a", 10, p)], models=["claude-sonnet-4-5", "claude-opus-4-1"])
    assert simulate(tr, MODEL, provider=True, ttl_s=300, block=64).hit_tokens == 0
    assert simulate(tr, MODEL, block=64).hit_tokens == 256  # one served model: shared


def test_closed_model_uses_a_stated_stand_in():
    res = simulate(build([("a", 0, toks(1, 256))]), "claude-sonnet-4-5", block=64)
    assert res.model_note and "claude-sonnet-4-5" in res.model_note


# --- real traces -----------------------------------------------------------------------------------------------


def naive_lru(trace, block: int, capacity: int) -> tuple[list[int], int]:
    """A plain per-chunk LRU with LMCache's reverse touch order, on the simulator's own event order."""
    w = _workload(trace, block, False, 0)
    od: OrderedDict[int, None] = OrderedDict()
    keys, offs = w.keys.tolist(), w.offsets.tolist()
    out = [0] * w.calls.height
    evictions = 0
    for _, typ, i in w.events:
        ks = keys[offs[i]:offs[i + 1]]
        if typ == 0:
            n = 0
            while n < len(ks) and ks[n] in od:
                n += 1
            out[i] = n * block
        else:
            for k in reversed(ks):
                if k in od:
                    od.move_to_end(k)
                else:
                    od[k] = None
            while len(od) > capacity:
                od.popitem(last=False)
                evictions += 1
    return [out[i] for i in w.order.tolist()], evictions


@pytest.mark.parametrize("chunks", [40, 300])
def test_stack_distance_engine_equals_a_plain_lru(sample_trace, chunks):
    tr = sample_trace("claude-code")
    res = simulate(tr, MODEL, [Tier("cpu", cap(chunks, 256))], block=256)
    ref, ev = naive_lru(tr, 256, chunks)
    assert hits(res) == ref and res.tier("cpu")["evictions"] == ev
    assert sum(ref) > 0


@pytest.mark.parametrize("name", ["kv-cache-tester", "claude-code", "codex"])
def test_hit_rate_is_monotone_in_capacity(sample_trace, name):
    tr = sample_trace(name)
    sweep = capacity_sweep(tr, MODEL, block=256)
    rates = [p["hit_rate"] for p in sweep.points]
    assert rates == sorted(rates) and rates[-1] == sweep.unlimited_hit_rate > 0
    # the sweep's 90 % capacity agrees with full simulations just at and below it
    c = sweep.capacity_at_target_chunks
    at = simulate(tr, MODEL, [Tier("cpu", cap(c, 256))], block=256).hit_rate
    below = simulate(tr, MODEL, [Tier("cpu", cap(c - 1, 256))], block=256).hit_rate
    assert at >= 0.9 * sweep.unlimited_hit_rate > below
    for chunks in (c // 4, c // 2):
        assert simulate(tr, MODEL, [Tier("cpu", cap(chunks, 256))], block=256).hit_rate <= at


def test_other_policies_stay_below_unlimited(sample_trace):
    tr = sample_trace("codex")
    unlimited = simulate(tr, MODEL, block=256).hit_rate
    for policy in ("lfu", "fifo"):
        r = simulate(tr, MODEL, [Tier("cpu", cap(60, 256))], block=256, policy=policy).hit_rate
        assert 0 < r <= unlimited
