"""Calls beyond the served window on the shipped kv-cache-tester sessions (three of them hold prompts past Kimi
K2.5's 262K context): compacted, rejected, or served by a stand-in that covers them; counted either way."""

from __future__ import annotations

import numpy as np
import pytest

from agentprof.catalog import CatalogError
from agentprof.replay import replay
from agentprof.replay.context import beyond_context
from agentprof.replay.serving import ServingConfig, simulate
from agentprof.replay.serving.overflow import KEPT_TOKENS, POST_TOKENS, SUMMARY_OUT, TRIGGER_SHARE, apply
from tests.replay.spans import agent, span, trace

WINDOW = 262_144.0


def test_compaction_keeps_every_call_within_the_window(plan) -> None:
    ov = apply(plan, WINDOW, "the model's context window", "compact")
    served = ov.plan
    need = served.input_tokens + served.output_tokens
    assert need.max() <= WINDOW
    # counted on the recorded calls: the same count the replay's context check gives
    over = plan.input_tokens + plan.output_tokens > WINDOW
    assert ov.calls == int(over.sum()) > 0 and ov.beyond.sum() == 3 and not ov.failed.any()
    # every recorded call is still sent once, in order, plus the summarizing calls the compactions added
    src = ov.source
    assert np.array_equal(src[src >= 0], np.arange(plan.n_calls))
    inserted = np.flatnonzero(src < 0)
    assert inserted.size and (served.output_tokens[inserted] == SUMMARY_OUT).all()
    assert ov.compactions >= inserted.size
    # a summarizing call reads the previous call's context (all cached) and is followed by the compacted prompt
    for j in inserted.tolist():
        assert served.input_tokens[j] == served.input_tokens[j - 1] + served.output_tokens[j - 1]
        assert served.input_tokens[j + 1] >= POST_TOKENS and served.input_tokens[j + 1] < served.input_tokens[j]
        prev = served.node_ids[served.node_offsets[j - 1]:served.node_offsets[j]]
        mine = served.node_ids[served.node_offsets[j]:served.node_offsets[j + 1]]
        assert np.array_equal(prev, mine)
        # after the compaction the cache keeps at most the head shared with the session's first call
        nxt = served.node_ids[served.node_offsets[j + 1]:served.node_offsets[j + 2]]
        shared = np.cumprod(nxt[:prev.size] == prev[:nxt.size]).sum() if nxt.size and prev.size else 0
        assert shared * served.block_size <= KEPT_TOKENS
    # a session that never passes the trigger is sent unchanged
    untouched = [s for s in range(plan.n_sessions)
                 if (plan.input_tokens[plan.calls_of(s).start:plan.calls_of(s).stop]
                     + plan.output_tokens[plan.calls_of(s).start:plan.calls_of(s).stop] <= TRIGGER_SHARE * WINDOW).all()]
    assert untouched
    for s in untouched:
        a, b = plan.calls_of(s).start, plan.calls_of(s).stop
        sa, sb = served.calls_of(s).start, served.calls_of(s).stop
        assert np.array_equal(plan.input_tokens[a:b], served.input_tokens[sa:sb])


def test_reject_ends_the_session_at_its_first_call_beyond(plan) -> None:
    ov = apply(plan, WINDOW, "the model's context window", "reject")
    served = ov.plan
    assert (served.input_tokens + served.output_tokens).max() <= WINDOW
    assert np.array_equal(ov.failed, ov.beyond) and ov.failed.sum() == 3
    for s in np.flatnonzero(ov.failed).tolist():
        a = plan.calls_of(s).start
        first_over = int(np.argmax(plan.input_tokens[plan.calls_of(s)] + plan.output_tokens[plan.calls_of(s)] > WINDOW))
        assert served.calls_of(s).stop - served.calls_of(s).start == first_over
        assert a >= 0


def test_simulation_reports_beyond_context_and_the_figures_without_those_sessions(plan, resolved) -> None:
    r = resolved("h200+x86")
    comp = simulate(plan, r, ServingConfig(concurrency=4)).serving
    rej = simulate(plan, r, ServingConfig(concurrency=4, overflow="reject")).serving
    for d, policy in ((comp, "compact"), (rej, "reject")):
        b = d["beyond_context"]
        assert b["policy"] == policy and b["sessions"] == 3 and b["window_tokens"] == int(WINDOW)
        assert b["count"] == beyond_context(r.model, plan.input_tokens, plan.output_tokens)["calls"]
        assert b["without"]["sessions"] == plan.n_sessions - 3
        assert b["without"]["ttft_s"]["p99"] is not None
        assert "beyond" in " ".join(d["notes"])
    # rejected sessions free their slot but are not completed tasks
    assert rej["beyond_context"]["failed_sessions"] == 3 and comp["beyond_context"]["failed_sessions"] == 0
    assert rej["sessions"] == plan.n_sessions - 3 and comp["sessions"] == plan.n_sessions


def test_a_small_pool_is_a_window_too(plan, resolved) -> None:
    # the same sessions where one replica's KV pool is smaller than the model's context: the pool is the window
    ov = apply(plan, 100_000.0, "one replica's KV pool", "compact")
    assert (ov.plan.input_tokens + ov.plan.output_tokens).max() <= 100_000
    assert ov.beyond.sum() > 3 and ov.summary("compact")["window"] == "one replica's KV pool"


def test_hundred_sessions_at_fifty_concurrent_get_first_tokens_in_minutes(plan, resolved) -> None:
    # the sessions cycled to 100 (two per slot): no call beyond the window is served, so none runs alone after a
    # drain and sets the tail
    d = simulate(plan, resolved("h200+x86"), ServingConfig(concurrency=50, sessions=100)).serving
    assert d["ttft_s"]["p99"] <= 900.0
    assert d["tasks_completed"] >= 10 and d["tasks_per_hour"] > 0
    assert d["beyond_context"]["count"] > 0 and "oversize" not in " ".join(d["notes"])
    assert not any("ran alone" in n for n in d["notes"])


def call(sid: str, start: float, end: float, inp: int) -> dict:
    return span(sid, "model", start, end, name="chat mystery", model="mystery", input_tokens=inp, output_tokens=300)


def test_stand_in_picks_a_model_whose_window_covers_the_trace() -> None:
    # GPT-OSS 120B (131K) stands in for an unknown model; a 200K-token prompt needs Kimi K2.5 (262K)
    t = trace([agent(0, 100), call("m1", 0, 10, 20_000),
               call("m2", 20, 30, 200_000)])
    res = replay(t, ["b200+x86"], serving=ServingConfig(concurrency=2, overflow="stand-in"), bands=False)
    assert res.systems[0].deployments[0]["model"] == "kimi-k2.5"
    assert any("--overflow stand-in" in n for n in res.notes)
    assert res.systems[0].serving["beyond_context"]["count"] == 0
    # where no catalog model covers the trace, a clear error
    t2 = trace([agent(0, 100), call("m1", 0, 10, 900_000)])
    with pytest.raises(CatalogError, match="no catalog model's context covers"):
        replay(t2, ["b200+x86"], serving=ServingConfig(concurrency=2, overflow="stand-in"), bands=False)
