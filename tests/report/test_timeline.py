"""The Gantt's data: session order and nesting, rows, aggregation of large traces, opt-in text."""

from __future__ import annotations

import copy
import random

import polars as pl
import pytest

from agentprof.report.timeline import _aggregate, build_timeline, session_table, span_depths

from .report_support import SEC, T0, make_trace, span, synthetic_session


def _row_spans(tl):
    S = tl["spans"]
    rows: dict[int, list[tuple[int, int]]] = {}
    for s, d, r in zip(S["start"], S["dur"], S["row"], strict=True):
        rows.setdefault(r, []).append((s, s + d))
    return rows


def test_sessions_ordered_with_subagents_nested_after_their_parent():
    tr = synthetic_session()
    order = [s.session_id for s in session_table(tr.spans)]
    assert order == ["s1", "s2"]
    tl = build_timeline(tr.spans)
    main, sub = tl["sessions"]
    assert (main["parent"], main["level"], main["role"]) == (-1, 0, "main")
    assert (sub["parent"], sub["level"], sub["role"]) == (0, 1, "subagent")
    assert sub["row0"] == main["row0"] + main["rows"]
    assert tl["rows"] == main["rows"] + sub["rows"]


def test_every_timed_non_agent_span_is_shipped_once_with_exact_microseconds():
    tr = synthetic_session()
    tl = build_timeline(tr.spans)
    body = tr.spans.filter(pl.col("kind") != "agent")
    assert len(tl["spans"]["start"]) == body.height == tl["n_spans_total"]
    t0 = tr.spans.get_column("start_ns").min()
    expected = sorted(((s - t0) // 1000, (e - t0) // 1000 - (s - t0) // 1000)
                      for s, e in body.select("start_ns", "end_ns").iter_rows())
    got = sorted(zip(tl["spans"]["start"], tl["spans"]["dur"], strict=True))
    assert got == expected
    # the model calls' token details travel along
    assert len(tl["calls"]["span"]) == body.filter(pl.col("kind") == "model").height
    assert sum(v for v in tl["calls"]["input"] if v is not None) == body.get_column("input_tokens").sum()


def test_rows_do_not_overlap_and_nested_spans_sit_below_their_parent():
    tr = synthetic_session(turns=30)
    tl = build_timeline(tr.spans)
    for ivs in _row_spans(tl).values():
        ivs.sort()
        for (_, e1), (s2, _) in zip(ivs, ivs[1:], strict=False):
            assert s2 >= e1
    S, names = tl["spans"], tl["names"]
    rows_of = {}
    for i, n in enumerate(S["name"]):
        rows_of.setdefault(names[n], set()).add(S["row"][i])
    # parse spans (children of tool spans) are on rows below every direct child of the agent
    assert min(rows_of["parse tool result"]) > max(rows_of["chat model-x"])
    # the parallel Read calls need a second row at depth 0
    assert len(rows_of["execute_tool Read"]) >= 2


def test_span_depths_follow_parent_links_and_stop_at_the_agent():
    tr = synthetic_session(turns=8)
    d = dict(zip(tr.spans.get_column("span_id").to_list(), span_depths(tr.spans, clamp=False), strict=True))
    assert d["root"] == -1 and d["m0"] == 0 and d["t0"] == 0 and d["p0"] == 1
    assert d["sroot"] == -1 and d["sm1"] == 0  # the subagent's root is an agent span: depth restarts


def test_untimed_spans_are_counted_not_drawn():
    recs = [span("s", "a", None, "agent", "invoke_agent x", T0, T0 + 10 * SEC),
            span("s", "m1", "a", "model", "chat m", T0, T0 + SEC),
            span("s", "m2", "a", "model", "chat m", None, None)]
    tl = build_timeline(make_trace(recs).spans)
    assert tl["n_untimed"] == 1
    assert len(tl["spans"]["start"]) == 1


def test_no_times_at_all_still_lists_sessions():
    recs = [span("s", "a", None, "agent", "invoke_agent x", None, None), span("s", "m", "a", "model", "chat m", None, None)]
    tl = build_timeline(make_trace(recs).spans)
    assert tl["t0_ns"] is None and tl["spans"]["start"] == []
    assert [s["id"] for s in tl["sessions"]] == ["s"]


def test_large_traces_are_aggregated_within_budget_and_counts_are_kept():
    recs = [span("s", "a", None, "agent", "invoke_agent x", T0, T0 + 20_000 * 1_000_000)]
    for i in range(20_000):  # 20,000 model/tool spans of 0.4 ms every 1 ms
        kind = "model" if i % 2 else "tool"
        recs.append(span("s", f"x{i}", "a", kind, f"{kind} {i % 7}", T0 + i * 1_000_000, T0 + i * 1_000_000 + 400_000))
    tr = make_trace(recs)
    full = build_timeline(tr.spans)
    assert len(full["spans"]["start"]) == 20_000 and full["aggregated"] == {"span": [], "count": []}
    small = build_timeline(tr.spans, max_spans=2_000)
    n = len(small["spans"]["start"])
    assert n <= 2_000
    agg = dict(zip(small["aggregated"]["span"], small["aggregated"]["count"], strict=True))
    assert sum(agg.values()) + (n - len(agg)) == 20_000  # every original span is behind exactly one drawn span
    assert all("aggregated" in small["names"][small["spans"]["name"][i]] for i in agg)


def test_text_only_when_asked():
    recs = [span("s", "a", None, "agent", "invoke_agent x", T0, T0 + 10 * SEC),
            span("s", "m", "a", "model", "chat m", T0, T0 + SEC,
                 **{"gen_ai.input.messages": "secret prompt", "gen_ai.output.messages": "the answer"})]
    tr = make_trace(recs)
    assert "text" not in build_timeline(tr.spans)
    tl = build_timeline(tr.spans, include_text=True)
    assert tl["text"] == {"span": [0], "input": ["secret prompt"], "output": ["the answer"]}


def test_nested_sessions_are_labelled_by_their_own_part_of_the_id():
    recs = [span("main-1", "a", None, "agent", "invoke_agent coder", T0, T0 + 100 * SEC),
            span("main-1/compact-1", "b", None, "agent", "invoke_agent coder", T0 + 50 * SEC, T0 + 100 * SEC,
                 **{"agentprof.session.parent_id": "main-1", "agentprof.session.role": "compaction"}),
            span("main-1/agent-7", "c", None, "agent", "invoke_agent coder", T0 + 60 * SEC, T0 + 70 * SEC,
                 **{"agentprof.session.parent_id": "main-1/compact-1"}),
            span("other", "d", None, "agent", "invoke_agent helper", T0 + 5 * SEC, T0 + 9 * SEC,
                 **{"agentprof.session.parent_id": "main-1"})]
    got = [(s.label, s.role) for s in session_table(make_trace(recs).spans)]
    assert got == [("coder · main-1", "main"), ("helper · other", "subagent"), ("compact-1", "compaction"),
                   ("agent-7", "subagent")]


def _aggregate_reference(cols: dict[str, list[int]], budget: int, extent_us: int) -> dict[int, int]:
    """The merge rule spelled out row by row (the plain loop ``_aggregate`` must equal)."""
    res = max(1, extent_us // max(1, budget))
    counts = [1] * len(cols["start"])
    while len(cols["start"]) > budget and res <= 2 * extent_us + 2:
        rows: dict[int, list[int]] = {}
        for i, r in enumerate(cols["row"]):
            rows.setdefault(r, []).append(i)
        runs: list[tuple[int, int, int, dict[int, int]]] = []  # (first span, end, count, time per kind)
        for idx in rows.values():
            idx.sort(key=lambda i: cols["start"][i])
            for i in idx:
                s, d, k = cols["start"][i], cols["dur"][i], cols["kind"][i]
                if runs and cols["row"][runs[-1][0]] == cols["row"][i] and s + d - cols["start"][runs[-1][0]] <= res \
                        and s - runs[-1][1] <= res:
                    first, end, n, kt = runs[-1]
                    kt[k] = kt.get(k, 0) + max(1, d)
                    runs[-1] = (first, max(end, s + d), n + counts[i], kt)
                else:
                    runs.append((i, s + d, counts[i], {k: max(1, d)}))
        runs.sort(key=lambda run: (cols["start"][run[0]], cols["row"][run[0]]))
        new = {c: [v[run[0]] for run in runs] for c, v in cols.items()}
        new["dur"] = [end - cols["start"][first] for first, end, _, _ in runs]
        new["kind"] = [max(kt.items(), key=lambda kv: kv[1])[0] for _, _, _, kt in runs]
        counts = [n for _, _, n, _ in runs]
        cols.clear()
        cols.update(new)
        res *= 2
    return {i: c for i, c in enumerate(counts) if c > 1}


@pytest.mark.parametrize("seed", range(6))
def test_aggregation_equals_the_rule_spelled_out(seed):
    # random spans with ties in start, zero durations and several kinds, at budgets that need 1 to many rounds
    rnd = random.Random(seed)
    n = rnd.choice([50, 400, 3000])
    start = sorted(rnd.choice([rnd.randrange(0, 10_000), rnd.randrange(0, 50)]) for _ in range(n))
    cols = {"start": start, "dur": [rnd.choice([0, rnd.randrange(1, 400)]) for _ in range(n)],
            "row": [rnd.randrange(0, 12) for _ in range(n)], "kind": [rnd.randrange(0, 4) for _ in range(n)],
            "name": [rnd.randrange(0, 9) for _ in range(n)], "src": list(range(n))}
    for budget in (n + 1, n // 2, n // 10, 3, 1):
        a, b = copy.deepcopy(cols), copy.deepcopy(cols)
        assert _aggregate(a, budget, 10_400) == _aggregate_reference(b, budget, 10_400)
        assert a == b
