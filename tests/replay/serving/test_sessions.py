"""Sessions as the serving simulation replays them: which reply each call waited for in the recording."""

from __future__ import annotations

import numpy as np

from agentprof.replay.serving import ServingConfig, build_plan, simulate
from tests.replay.spans import agent, model, trace


def test_a_call_started_before_the_latest_reply_waits_for_the_reply_it_had() -> None:
    # a: 0-10 s; b and c side by side after it (c starts before b's reply); d after both
    t = trace([agent(0, 40), model("a", 0, 10), model("b", 12, 20), model("c", 13, 18), model("d", 25, 30),
               model("e", 25.5, 26)])
    plan = build_plan(t)
    assert plan.span_ids == ["a", "b", "c", "d", "e"]
    after, gap = plan.waits_for()
    # b and c wait for a; d for b (the latest reply, at 20 s); e started before d's reply: for b too
    assert after.tolist() == [-1, 0, 0, 1, 1]
    assert np.allclose(gap, [0.0, 2.0, 3.0, 5.0, 5.5])
    assert any("2 call(s) overlapped" in n and "side by side" in n for n in plan.notes)


def test_a_sequential_session_is_a_chain() -> None:
    plan = build_plan(trace([agent(0, 30), model("a", 0, 10), model("b", 12, 20), model("c", 21, 29)]))
    assert plan.after is None  # no call overlapped: each waits for the one before it
    after, gap = plan.waits_for()
    assert after.tolist() == [-1, 0, 1] and np.allclose(gap, [0.0, 2.0, 1.0])


def test_a_branch_started_before_any_reply_is_timed_from_the_session_start() -> None:
    plan = build_plan(trace([agent(0, 30), model("a", 1, 10), model("b", 4, 9), model("c", 12, 20)]))
    after, gap = plan.waits_for()
    assert after.tolist() == [-1, -1, 0]  # c waits for a's reply, the latest (b's came first)
    assert np.allclose(gap, [0.0, 3.0, 2.0])


def test_the_simulation_runs_side_by_side_calls_together(resolved) -> None:
    t = trace([agent(0, 40), model("a", 0, 10), model("b", 12, 20), model("c", 13, 18), model("d", 25, 30)])
    run = simulate(build_plan(t), resolved("h200+x86"), ServingConfig(concurrency=1))
    e = run.engine
    assert run.serving["calls_in_flight_peak"] == 2  # b and c, as recorded
    issue = dict(zip(e.req_call.tolist(), e.issue_t.tolist(), strict=True))
    done = dict(zip(e.req_call.tolist(), e.done_t.tolist(), strict=True))
    assert abs(issue[1] - done[0] - 2.0) < 1e-6  # b 2 s after a's reply
    assert abs(issue[2] - done[0] - 3.0) < 1e-6 and issue[2] < done[1]  # c waits for a only
    assert abs(issue[3] - done[1] - 5.0) < 1e-6  # d for b's reply
    assert e.sess_end[0] >= max(done.values())
