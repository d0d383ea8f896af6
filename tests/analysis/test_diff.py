"""agentprof.analysis.diff and .active on small synthetic traces and hand-checked statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentprof import semconv as sc
from agentprof.analysis.active import agent_active_s
from agentprof.analysis.diff import adjust, diff, mann_whitney, min_p
from agentprof.errors import AgentprofError
from agentprof.trace import Trace, TraceMeta, spans_from_records

from ..cli_support import run
from ..lazy_import import LazyModule

stats = LazyModule("scipy.stats")  # imported by the first test that uses it

T0 = 1_700_000_000_000_000_000
S = 1_000_000_000


def _span(sess, sid, parent, kind, name, start, end, **attrs):
    return {"record": "span", "trace_id": sess, "span_id": sid, "parent_id": parent, "name": name, "kind": kind,
            "start_ns": start, "end_ns": end, "status": "ok", "error_type": None,
            "attributes": {"agentprof.session.id": sess, **attrs}}


def runs_trace(n: int, tool_s: float, wait_s: float = 0.0, prefix: str = "r", jitter: int = 0,
               ttft_s: float | None = None) -> Trace:
    """``n`` runs (sessions): model 1 s, tool ``tool_s``, a user wait ``wait_s``, each run 0.01 s apart in
    length so runs are not all tied."""
    recs = []
    for i in range(n):
        sess = f"{prefix}{i}"
        t = T0 + i * 1000 * S
        m = S + (i + jitter) * 10_000_000
        usage = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10}
        if ttft_s is not None:
            usage[sc.RESPONSE_TIME_TO_FIRST_CHUNK] = ttft_s
        recs.append(_span(sess, "m", "root", "model", "chat x", t, t + m, **usage))
        tt = int(tool_s * S) + i * 1_000_000
        recs.append(_span(sess, "t", "root", "tool", "execute_tool grep", t + m, t + m + tt,
                          **{"gen_ai.tool.name": "grep"}))
        end = t + m + tt
        if wait_s:
            recs.append(_span(sess, "w", "root", "wait", "wait", end, end + int(wait_s * S),
                              **{"agentprof.wait.reason": "user_turn"}))
            end += int(wait_s * S)
        recs.insert(len(recs) - (3 if wait_s else 2), _span(sess, "root", None, "agent", "invoke_agent a", t, end))
    return Trace(TraceMeta(source_format="agentprof", name="synthetic"), spans_from_records(recs))


def test_agent_active_subtracts_only_waits_outside_the_agent():
    t = {"wall_s": 100.0, "wait_by_reason": {"user": 10.0, "approval": 5.0, "idle": 20.0, "retry": 3.0,
                                             "residue": 2.0, "unrecorded": 1.0}}
    assert agent_active_s(t) == pytest.approx(100 - 10 - 5 - 20 - 1)
    assert agent_active_s({"wall_s": 50.0, "waits_by_reason": '{"user_turn": 20.0}'}) == 30.0
    assert agent_active_s({"wall_s": 50.0, "agent_active_s": 12.5, "wait_by_reason": {"user": 1.0}}) == 12.5


def test_mann_whitney_is_scipys_and_identical_samples_give_1():
    x, y = [1.0, 2.5, 3.0, 4.0], [5.0, 6.0, 2.0, 8.0, 9.0]
    assert mann_whitney(np.array(x), np.array(y)) == pytest.approx(
        stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    assert mann_whitney(np.ones(5), np.ones(3)) == 1.0
    assert mann_whitney(np.empty(0), np.ones(3)) is None
    assert min_p(8, 8) == pytest.approx(2 / math.comb(16, 8))


def test_tied_samples_get_the_p_of_every_split_enumerated():
    """Runs measured to the millisecond tie; the exact p with ties (counted, not enumerated) is scipy's
    permutation test over every split, also past the sizes where enumerating is slow."""
    rng = np.random.default_rng(7)
    for n, m in ((2, 2), (2, 5), (3, 3), (4, 6), (6, 6), (8, 5)):
        x, y = rng.integers(0, 4, n).astype(float), rng.integers(1, 6, m).astype(float)
        every_split = stats.PermutationMethod(n_resamples=math.comb(n + m, n))
        assert mann_whitney(x, y) == pytest.approx(stats.mannwhitneyu(x, y, method=every_split).pvalue, rel=1e-12)
    x, y = np.repeat([1.0, 2.0, 3.0], [6, 5, 5]), np.repeat([2.0, 3.0, 4.0], [5, 5, 6])
    assert mann_whitney(x, y) < 0.01 < mann_whitney(x, x[::-1].copy() + 0.0)  # 16 vs 16, 6e8 splits


def test_holm_and_bh_adjustments():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm by hand: sorted 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone 0.06
    assert adjust(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust(p, "bh") == pytest.approx(list(stats.false_discovery_control(p, method="bh")))
    with pytest.raises(AgentprofError):
        adjust(p, "bonferroni-ish")


def test_a_slower_tool_across_runs_and_the_wait_excluded_from_agent_active():
    base = runs_trace(8, 1.0, wait_s=30.0)
    new = runs_trace(8, 3.0, wait_s=30.0, prefix="n")
    res = diff(base, new)
    assert res.method["across"] == "runs"
    sig = {(c.metric, c.scope) for c in res.significant}
    assert ("tool_time_s", "tool:grep") in sig and ("tool_s", "task") in sig and ("call_s", "tool:grep") in sig
    call = res.change("call_s", "tool:grep")  # one call per run, 8 runs a side: the runs are the samples
    assert call.runs_base == call.n_base == 8 and call.ratio == pytest.approx(3.0, rel=0.01)
    assert ("model_s", "task") not in sig and ("wait_s", "wait:user_turn") not in sig
    wall, active = res.change("wall_s"), res.change("agent_active_s")
    assert active.base == pytest.approx(wall.base - 30.0)
    assert active.ratio > wall.ratio  # the same 2 s more is a larger share of the agent's own time
    assert res.change("wait_s", "wait:user_turn").slower_by() is None  # a person's wait is not "slower"
    failed = res.failures(slower_pct=50)
    assert {(f["metric"], f["scope"]) for f in failed} >= {("tool_time_s", "tool:grep"), ("agent_active_s", "task")}
    assert ("wall_s", "task") not in {(f["metric"], f["scope"]) for f in failed}  # +2 s of ~34 s is under 50 %


def test_one_run_per_side_tests_calls_and_gates_a_single_call_by_the_threshold_alone():
    res = diff(runs_trace(1, 1.0), runs_trace(1, 3.0, prefix="n"))
    assert res.method["across"] == "calls and spans"
    wall = res.change("wall_s")
    assert wall.p is None and not wall.significant and "repeat runs" in wall.note
    per_run = res.change("tool_time_s", "tool:grep")
    assert per_run.p is None and per_run.ratio == pytest.approx(3.0)
    call = res.change("call_s", "tool:grep")  # one call a side: nothing to test
    assert call.threshold_only and call.p is None and call.n_base == call.n_new == 1
    assert any("threshold alone" in n and "tool grep" in n for n in res.notes)
    failed = res.failures(slower_pct=20)
    assert [(f["metric"], f["scope"], f["tested"]) for f in failed] == [("call_s", "tool:grep", False)]
    assert "too few to test: 1 vs 1 calls, threshold alone" in failed[0]["line"]
    assert res.failures(slower_pct=250) == []  # 3x is +200 %


def test_too_few_runs_for_per_run_figures_say_so_while_calls_are_tested():
    res = diff(runs_trace(3, 1.0), runs_trace(3, 3.0, prefix="n"))
    assert not [c for c in res.significant if not c.per_call]
    assert any("smallest possible p-value" in n for n in res.notes)
    assert ("call_s", "tool:grep") in {c.key for c in res.significant}  # 3 runs of one 3x slower call each


def test_cli_needs_two_unambiguous_sides(capsys, tmp_path):
    code, _, err = run(capsys, "diff", str(tmp_path))
    assert code == 2 and err.startswith("error: expected two paths, BASE and NEW, got 1")
    code, _, err = run(capsys, "diff", "a", "b", "--base", "c", "--new", "d")
    assert code == 2 and "not both" in err
    code, _, err = run(capsys, "diff", str(tmp_path / "nope.jsonl"), str(tmp_path))
    assert code == 2 and "no such file or folder" in err and "Traceback" not in err


def test_a_figure_one_side_cannot_measure_is_not_tested_not_zero():
    res = diff(runs_trace(8, 1.0), runs_trace(8, 1.0, prefix="n", ttft_s=0.2))
    ttft = next(c for c in res.changes if c.metric == "ttft_s")
    assert ttft.scope.startswith("model:") and ttft.per_call
    assert ttft.base is None and ttft.new == pytest.approx(0.2)
    assert ttft.p is None and not ttft.significant and "only NEW has it" in ttft.note
    assert not res.significant


def _loaded_run(prefix: str, tool_s: float, runq_s: float, tool_runq_s: float | None = None) -> Trace:
    """One run: three calls of ``grep`` (``tool_s`` each, +1 ms per call) under a root span that records how long
    the agent's thread waited for a CPU; each call records ``tool_runq_s`` of it (None: no per-span record)."""
    t, recs = T0, []
    for i in range(3):
        d = int(tool_s * S) + i * 1_000_000
        rq = {} if tool_runq_s is None else {sc.RUNQ_NS: int(tool_runq_s * S)}
        recs.append(_span(prefix, f"t{i}", "root", "tool", "execute_tool grep", t, t + d,
                          **{"gen_ai.tool.name": "grep", **rq}))
        t += d
    recs.insert(0, _span(prefix, "root", None, "agent", "invoke_agent a", T0, t,
                         **{sc.RUNQ_NS: int(runq_s * S)}))
    return Trace(TraceMeta(source_format="agentprof", name="synthetic"), spans_from_records(recs))


def test_a_slowdown_within_its_own_spans_extra_wait_for_a_cpu_is_the_machine_and_beyond_it_the_agent():
    base = _loaded_run("b", 0.100, runq_s=0.05, tool_runq_s=0.0)
    # 3 calls 100 -> 130 ms add 0.09 s a run; the calls themselves waited 0.15 s more for a CPU: not counted
    res = diff(base, _loaded_run("n", 0.130, runq_s=0.55, tool_runq_s=0.05))
    grep = res.change("call_s", "tool:grep")
    assert grep.p_adjusted < 0.01 and grep.practical and grep.load_explained and not grep.significant
    assert grep.load_s == pytest.approx(grep.added_s) and grep.load_share == pytest.approx(1.0)
    assert res.load["new_minus_base_s"] == pytest.approx(0.5) and res.failures(slower_pct=20) == []
    assert any("NEW's agent thread waited 0.50 s more" in n and "tool grep" in n for n in res.notes)
    back = diff(_loaded_run("n", 0.130, runq_s=0.55, tool_runq_s=0.05), base)
    assert back.change("call_s", "tool:grep").load_explained and not back.significant
    # the machine was as busy, but the calls did not wait for a CPU (they sleep): the slowdown is the tool's
    idle_tool = diff(base, _loaded_run("n", 0.130, runq_s=0.55, tool_runq_s=0.0))
    grep = idle_tool.change("call_s", "tool:grep")
    assert grep.significant and grep.load_s == 0.0 and grep.load_share == 0.0
    assert [f["scope"] for f in idle_tool.failures(slower_pct=20)] == ["tool:grep"]
    # waited 20 ms more in all: 2 x 20 ms of the 90 ms is the machine's, the rest the tool's
    part = diff(base, _loaded_run("n", 0.130, runq_s=0.55, tool_runq_s=0.02 / 3)).change("call_s", "tool:grep")
    assert part.significant and part.load_s == pytest.approx(0.04) and part.load_share == pytest.approx(0.04 / 0.09)
    # the same slowdown with equal waits, and a 5x slowdown beyond the extra wait, are the agent
    assert diff(base, _loaded_run("n", 0.130, runq_s=0.05, tool_runq_s=0.0)).change("call_s", "tool:grep").significant
    res = diff(base, _loaded_run("n", 0.500, runq_s=0.55, tool_runq_s=0.05))
    assert [f["scope"] for f in res.failures(slower_pct=20)] == ["tool:grep"]
    assert res.change("cpu_wait_s").p is None and res.change("cpu_wait_s").slower_by() is None
    assert [c.scope for c in res.changes if c.metric == "cpu_wait_s"] == ["task"]  # the spans' waits: no rows


def test_without_a_wait_per_span_only_the_run_wide_times_are_put_down_to_load():
    res = diff(_loaded_run("b", 0.100, runq_s=0.05), _loaded_run("n", 0.130, runq_s=0.55))
    grep = res.change("call_s", "tool:grep")
    assert grep.significant and grep.load_s is None and not grep.load_explained
    assert res.change("wall_s").load_explained  # 90 ms more within twice the run's 0.5 s more wait
    assert any("recorded no CPU wait per span" in n and "tool grep" in n for n in res.notes)


def test_a_tool_only_new_has_gets_the_load_its_own_calls_waited():
    base = _loaded_run("b", 0.100, runq_s=0.05, tool_runq_s=0.0)
    new = _loaded_run("n", 0.100, runq_s=0.55, tool_runq_s=0.0)
    new.spans = new.spans.with_columns(  # NEW calls its tool "rg": BASE had none of it (0 s, no wait)
        new.spans.get_column("attributes").str.replace('"grep"', '"rg"').alias("attributes"))
    rg = diff(base, new).change("tool_time_s", "tool:rg")
    assert rg.base == 0.0 and rg.added_s > 0.3 and rg.load_s == 0.0 and rg.load_share == 0.0
