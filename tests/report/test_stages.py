"""Running the stages for a report: defaults, user mistakes, and failures that leave a note."""

from __future__ import annotations

import pytest

from agentprof.errors import AgentprofError
from agentprof.report.stages import DEFAULT_SYSTEMS, SERVING_CALL_BUDGET, default_concurrency, run_stages

from .report_support import make_trace, span, synthetic_session


def test_defaults_replay_the_default_systems_and_size_the_cache_by_the_stand_in(big_session):
    # one serving point: the default concurrency sweep (1, 4, 16, 50 copies of this long session, Kimi-sized on
    # three systems) costs minutes of simulation; here the point is which systems every stage runs on
    res = run_stages(big_session, serving=[1])
    assert res.analysis is not None and res.replay is not None
    assert [s.name for s in res.replay.systems] == list(DEFAULT_SYSTEMS)
    assert [row["system"] for row in res.serving["systems"]] == list(DEFAULT_SYSTEMS)
    stand_in = res.replay.systems[0].deployments[0]["model"]
    assert res.cache_model == stand_in and len(res.cache) == 2
    assert "default systems" in res.notes["replay"] and stand_in in res.notes["cache"]


def test_named_systems_and_models_are_used_and_wrong_ones_are_errors():
    tr = synthetic_session(turns=6)
    res = run_stages(tr, systems=["jalapeno"], model="gpt-oss-120b")
    assert [s.name for s in res.replay.systems] == ["jalapeno"] and res.cache_model == "gpt-oss-120b"
    assert "replay" not in res.notes and "cache" not in res.notes
    with pytest.raises(AgentprofError, match="unknown system"):
        run_stages(tr, systems=["no-such-system"])
    with pytest.raises(AgentprofError, match="unknown model"):
        run_stages(tr, model="no-such-model")


def test_stages_can_be_skipped_and_a_bare_trace_still_runs():
    recs = [span("s", "a", None, "agent", "invoke_agent x", None, None), span("s", "m", "a", "model", "chat m", None, None)]
    res = run_stages(make_trace(recs), analysis=False, replay=False)
    assert res.analysis is None and res.replay is None and res.cache is None
    assert res.notes["analysis"].startswith("not run") and res.notes["replay"].startswith("not run")
    assert "--model" in res.notes["cache"]


def test_default_serving_concurrency_stays_within_its_call_budget():
    levels = (1, 4, 16, 50)
    # one 156-call session: 156 + 624 calls, and 16 copies would pass the budget
    assert default_concurrency(1, 156, levels) == ([1, 4], [16, 50])
    # a small corpus runs every level; a large one at least the first two
    assert default_concurrency(10, 100, levels) == ([1, 4, 16, 50], [])
    assert default_concurrency(100, 20_000, levels) == ([1, 4], [16, 50])
    for n, calls in ((1, 156), (10, 100), (3, 90)):
        kept, _ = default_concurrency(n, calls, levels)
        if len(kept) > 2:
            assert sum(max(n, c) * calls / n for c in kept) <= SERVING_CALL_BUDGET


def test_the_serving_panel_says_what_it_left_out():
    tr = synthetic_session(turns=30, subagent=False)  # 30 calls: 1, 4, 16 within the budget, 50 not
    res = run_stages(tr, systems=["h200+x86"], model="gpt-oss-120b", analysis=False, cache=False)
    assert res.serving["concurrency"] == [1, 4, 16]
    assert res.serving["not_simulated"]["concurrency"] == [50]
    assert "--serving-concurrency 1,4,16,50" in res.serving["not_simulated"]["reason"]
    assert "--serving-bands" in res.serving["bands"] and "band" not in res.serving["systems"][0]
