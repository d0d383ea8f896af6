"""A whole load test against the prefix-caching server on loopback, checked against what the server itself saw."""

from __future__ import annotations

import uuid
from collections import defaultdict

import numpy as np
import pytest

from agentprof.errors import AgentprofError
from agentprof.loadtest import loadtest
from agentprof.loadtest.client import Endpoint
from agentprof.loadtest.run import probe_tokenize
from agentprof.loadtest.workload import prepare
from agentprof.trace.schema import Trace
from tests.loadtest.conftest import served


@pytest.fixture(scope="module")
def four_run(server_url, four_sessions):
    """4 sessions, 4 at once, gaps capped at 0.05 s, each session's first 4 calls."""
    model = f"m-{uuid.uuid4().hex[:8]}"  # the server caches per model: this run starts cold
    res = loadtest(four_sessions, Endpoint(server_url, model), concurrency=4, max_calls=4, cap_wait=0.05)
    return res, served(server_url, model)


def test_every_call_is_sent_and_answered_and_every_task_completes(four_run):
    res, log = four_run
    d = res.to_dict()
    n = int(res.workload.sent.sum())
    assert n == 16
    assert d["calls"] == {"sent": n, "ok": n, "failed": 0}
    assert len(log) == n
    assert d["tasks"]["completed"] == 4 and d["sessions"] == 4
    assert set(d["tasks"]) == {"completed", "task_s"} and set(d["calls"]) == {"sent", "ok", "failed"}
    assert all(np.isfinite(d["tasks"]["task_s"][q]) for q in ("p50", "p90", "p99"))


def test_max_tokens_and_prompt_lengths_are_as_recorded(four_run):
    res, log = four_run
    plan = res.workload.plan
    by_session = defaultdict(list)
    for row in log:
        by_session[row["session"]].append(row)
    for inst in range(plan.n_sessions):
        calls = [c for c in plan.calls_of(inst) if np.isnan(plan.fixed_s[c])]
        got = by_session[f"agentprof-loadtest-{inst}"]
        assert [r["max_tokens"] for r in got] == [int(plan.output_tokens[c]) for c in calls]
        assert [r["output_tokens"] for r in got] == [int(plan.output_tokens[c]) for c in calls]
        # the server's own count of each prompt (chat template included) is the recorded length
        assert [r["prompt_tokens"] for r in got] == [int(plan.input_tokens[c]) for c in calls]


def test_server_prefix_hits_match_the_traces_blocks_and_none_cross_sessions(four_run):
    res, log = four_run
    server_share = sum(r["cached_tokens"] for r in log) / sum(r["prompt_tokens"] for r in log)
    reuse = res.measured["trace_reuse_share"]
    assert reuse == pytest.approx(res.workload.trace_reuse_share())  # no blocks shared across these sessions
    assert reuse > 0.5  # agent sessions: most of each later prompt repeats the previous one
    assert abs(server_share - reuse) < 0.05
    assert sum(r["cross_session_cached_tokens"] for r in log) == 0
    # the client's cache_read_share is what the server reported
    assert abs(res.measured["cache_read_share"] - server_share) < 0.02


def test_ttft_p50_is_what_the_server_delivered(four_run):
    res, log = four_run
    server_p50 = float(np.median([r["first_byte_s"] for r in log]))
    assert abs(res.measured["ttft_s"]["p50"] - server_p50) < 0.2 * server_p50


def test_template_tokens_are_asked_of_the_servers_tokenize(server_url):
    from agentprof.loadtest.prompts import WORDS

    overhead, per_word = probe_tokenize(Endpoint(server_url, "x"), WORDS)
    assert per_word == 1.0
    assert overhead is not None and 0 < overhead < 40


def test_copies_fill_the_slots_without_sharing_blocks(server_url, four_sessions):
    """More slots than recorded sessions: copies run too, and their prompts never hit the originals' blocks."""
    model = f"m-{uuid.uuid4().hex[:8]}"
    one = four_sessions.spans.filter(four_sessions.spans["session_id"] == "trace_0121")
    trace = Trace(four_sessions.meta, one, [])
    res = loadtest(trace, Endpoint(server_url, model), concurrency=3, max_calls=2, cap_wait=0.0)
    log = served(server_url, model)
    assert res.measured["tasks"]["completed"] == 3
    assert res.workload.labels == ["trace_0121", "trace_0121#2", "trace_0121#3"]
    assert len(log) == 6
    assert sum(r["cross_session_cached_tokens"] for r in log) == 0
    firsts = [r for r in log if r["cached_tokens"] == 0]
    assert len(firsts) == 3  # each copy's first call is cold


def test_workload_caps_and_scales_the_gaps(four_sessions):
    full = prepare(four_sessions, concurrency=1)
    capped = prepare(four_sessions, concurrency=1, cap_wait=1.0, time_scale=0.5)
    assert capped.plan.n_calls == full.plan.n_calls
    np.testing.assert_allclose(capped.plan.gap_s, np.minimum(full.plan.gap_s * 0.5, 1.0))
    assert full.plan.gap_s.max() > 2.0  # the samples have long gaps, so the cap did something


def test_each_run_has_its_own_text_unless_the_seed_repeats(server_url, four_sessions):
    """Runs one after another on one server: a new run finds nothing of the last one cached; the same seed does."""
    model = f"m-{uuid.uuid4().hex[:8]}"
    one = Trace(four_sessions.meta, four_sessions.spans.filter(four_sessions.spans["session_id"] == "trace_0610"), [])
    for seed in (None, None, 7, 7):
        loadtest(one, Endpoint(server_url, model), max_calls=1, cap_wait=0.0, seed=seed)
    cached = [r["cached_tokens"] for r in served(server_url, model)]
    assert cached[:3] == [0, 0, 0] and cached[3] > 0.9 * served(server_url, model)[3]["prompt_tokens"]


def test_workload_selects_sessions_and_refuses_impossible_settings(four_sessions):
    wl = prepare(four_sessions, concurrency=8, sessions=2, max_calls=1)
    assert wl.labels == ["trace_0062", "trace_0121"] and wl.concurrency == 2 and wl.plan.n_calls == 2
    for kw, msg in (({"concurrency": 0}, "--concurrency"), ({"sessions": 0}, "--sessions"),
                    ({"cap_wait": -1.0}, "--cap-wait"), ({"time_scale": -1.0}, "--time-scale"),
                    ({"max_calls": 0}, "--max-calls")):
        with pytest.raises(AgentprofError, match=msg):
            prepare(four_sessions, **kw)
