"""The load test sends exactly the calls the serving simulation simulates and the replay re-times: one rule
(``trace.schema.has_token_counts``), checked on bundled real sessions where some calls have no token counts."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from agentprof.importers import load_any
from agentprof.loadtest.workload import prepare
from agentprof.replay import replay
from agentprof.replay.serving import build_plan
from agentprof.trace.schema import Trace, has_token_counts

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


@pytest.fixture(scope="module")
def mixed() -> Trace:
    """A Codex session (token counts on every call), an aider history (no token counts at all) and a
    mini-swe-agent run (counts, but one call with no recorded start), read as one trace."""
    return load_any([SAMPLES / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
                     SAMPLES / "aider" / ".aider.llm.history",
                     SAMPLES / "mini-swe-agent" / "django__django-13807.traj.json"])


def test_replay_serving_and_loadtest_run_the_same_calls(mixed: Trace) -> None:
    calls = mixed.model_calls.with_columns(has_token_counts().alias("ok"))
    ok = calls.filter("ok")
    # the rule: aider logs no usage, so exactly its calls are left out; every other call has both counts
    assert set(calls.filter(~pl.col("ok")).get_column("session_id")) == {"aider:aider"}
    assert ok.get_column("input_tokens").min() > 0 and ok.get_column("output_tokens").null_count() == 0
    counted = set(zip(ok.get_column("trace_id"), ok.get_column("span_id"), strict=True))

    plan = build_plan(mixed)
    simulated = {(t, s) for t, s, sim in zip(plan.trace_ids, plan.span_ids, plan.simulated, strict=True) if sim}
    assert simulated == counted

    work = prepare(mixed)
    sent = {(t, s) for t, s, x in zip(work.plan.trace_ids, work.plan.span_ids, work.sent, strict=True) if x}
    assert sent == counted

    # the one-session replay re-times calls in place on the recorded timeline, so it also needs both ends of a
    # call; the closed-loop plan orders an unplaced call after its predecessor and simulates it
    res = replay(mixed, ["h200+x86"])
    retimed = set(zip(res.calls.get_column("session_id"), res.calls.get_column("span_id"), strict=True))
    both_ends = pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()
    placed = ok.filter(both_ends)
    assert retimed == set(zip(placed.get_column("session_id"), placed.get_column("span_id"), strict=True))
    unplaced = ok.filter(~both_ends)
    assert set(unplaced.get_column("session_id")) == {"django__django-13807"}  # the difference is exercised
    assert res.replayed_calls == len(retimed) == len(counted) - unplaced.height
