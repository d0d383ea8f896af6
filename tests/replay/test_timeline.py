"""Re-assembling sessions along the recorded critical path with replayed durations."""

from __future__ import annotations

import numpy as np
import pytest

from agentprof.replay.timeline import MODEL, ORCH, TOOL, WAIT, assemble, prepare

from .spans import agent, model, span, trace


def _run(records, model_factor: float = 1.0, tool_factor: float = 1.0):
    t = trace(records)
    lay = prepare(t.spans)
    kinds = t.spans.get_column("kind").to_numpy()
    own = lay.excl_old.copy()
    own[kinds == "tool"] *= tool_factor
    mod = lay.old_dur * np.where(kinds == "model", model_factor, 1.0)
    a = assemble(lay, np.stack([lay.excl_old, own], axis=1), np.stack([lay.old_dur, mod], axis=1))
    return lay, a


SEQ = [agent(0, 100), model("m1", 1, 11), span("t1", "tool", 11, 31), model("m2", 32, 52),
       span("w1", "wait", 52, 92), model("m3", 92, 99)]


def test_identity_reproduces_the_recorded_session() -> None:
    lay, a = _run(SEQ)
    assert a.e2e[0, 0] == pytest.approx(100.0)
    cats = a.by_category[0, 0]
    assert cats[MODEL] == pytest.approx(10 + 20 + 7)
    assert cats[WAIT] == pytest.approx(40)
    assert cats[TOOL] == pytest.approx(20)  # the tool, apart from orchestration
    assert cats[ORCH] == pytest.approx(1 + 1 + 1)  # gaps (start, between t1/m2, tail)


def test_sequential_changes_add_up_exactly() -> None:
    _, a = _run(SEQ, model_factor=0.25, tool_factor=0.5)
    assert a.e2e[0, 1] == pytest.approx(100 - 0.75 * 37 - 0.5 * 20)
    assert a.by_category[0, 1, WAIT] == pytest.approx(40)  # waits unchanged
    assert a.by_category[0, 1, TOOL] == pytest.approx(10)  # the halved tool
    assert a.by_category[0, 1].sum() == pytest.approx(a.e2e[0, 1])


def test_parallel_spans_keep_the_recorded_critical_path() -> None:
    # two tools in parallel after a model call; the longer one (t2) owns the overlap
    recs = [agent(0, 50), model("m1", 0, 10), span("t1", "tool", 10, 20), span("t2", "tool", 10, 40),
            model("m2", 40, 50)]
    lay, a = _run(recs, tool_factor=0.5)
    assert a.e2e[0, 0] == pytest.approx(50)
    assert a.e2e[0, 1] == pytest.approx(10 + 15 + 10)  # the critical branch t2 halves; t1 is hidden
    _, b = _run(recs, model_factor=0.0)
    assert b.e2e[0, 1] == pytest.approx(30)


def test_small_overlap_is_owned_by_the_later_span() -> None:
    # kv-cache-tester style: whole-second request times make a wait start before the call ends
    recs = [agent(0, 20), model("m1", 0, 7.3), span("w", "wait", 7.0, 20)]
    _, a = _run(recs, model_factor=0.5)
    assert a.e2e[0, 1] == pytest.approx(20 - 0.5 * 7.0 * (7.3 / 7.3), rel=1e-9)
    assert a.by_category[0, 1, WAIT] == pytest.approx(13.0)


def test_nested_changes_reach_the_top_level_span() -> None:
    # a model call inside an orchestration span (e.g. a planner step)
    recs = [agent(0, 30), span("o", "orchestration", 0, 30), model("m", 5, 25, parent="o")]
    _, a = _run(recs, model_factor=0.1)
    assert a.e2e[0, 1] == pytest.approx(30 - 18)
    assert a.by_category[0, 1, MODEL] == pytest.approx(2.0)
    assert a.by_category[0, 1, ORCH] == pytest.approx(10.0)


def test_subagent_change_propagates_to_the_launching_span() -> None:
    recs = [agent(0, 100), model("m1", 0, 10), span("task", "tool", 10, 90, name="execute_tool Task"),
            model("m9", 90, 100),
            agent(12, 88, session="sub", sid="subroot", parent="task", parent_session="s1"),
            model("sm1", 12, 52, session="sub", parent="subroot"),
            model("sm2", 52, 88, session="sub", parent="subroot")]
    lay, a = _run(recs, model_factor=0.5)
    assert list(lay.top_level) == [True, False]
    assert a.e2e[1, 1] == pytest.approx(76 - 38)  # the sub-agent's own models halve
    assert a.e2e[0, 1] == pytest.approx(100 - 10 - 38)  # and the parent waits that much less in its Task tool
    assert a.by_category[0, 1, MODEL] == pytest.approx(5 + 38 + 5)


def test_unplaced_spans_are_ignored() -> None:
    recs = [agent(0, 10), model("m1", 0, 10), {**model("m2", 0, 0), "start_ns": None, "end_ns": None}]
    lay, a = _run(recs, model_factor=0.5)
    assert not lay.placed[2]
    assert a.e2e[0, 1] == pytest.approx(5)
