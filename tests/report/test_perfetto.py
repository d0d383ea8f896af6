"""Chrome trace-event export: structure, required fields, microsecond times and nesting per thread,
checked on the shared Claude Code session and kv-cache-tester folder (figures recomputed from the raw files)."""

from __future__ import annotations

import json
from collections import defaultdict

import polars as pl
import pytest

from agentprof.report.perfetto import to_trace_events, write_perfetto

from .report_support import KV_FOLDER, SEC, T0, make_trace, span, synthetic_session

REQUIRED = {"X": {"name", "ph", "ts", "dur", "pid", "tid"}, "M": {"name", "ph", "pid", "args"},
            "C": {"name", "ph", "ts", "pid", "args"}}


def validate_trace_events(doc: dict) -> None:
    """The rules of the trace-event format that Perfetto and chrome://tracing rely on."""
    assert isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit") in (None, "ms", "ns")
    threads: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    named_pids, named_tids = set(), set()
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        assert ph in REQUIRED, ev
        missing = REQUIRED[ph] - ev.keys()
        assert not missing, (missing, ev)
        assert isinstance(ev["pid"], int)
        if ph == "M":
            assert ev["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
            if ev["name"] == "process_name":
                named_pids.add(ev["pid"])
            if ev["name"] == "thread_name":
                named_tids.add((ev["pid"], ev["tid"]))
            continue
        assert isinstance(ev["ts"], int) and ev["ts"] >= 0  # integer microseconds
        if ph == "C":
            assert all(isinstance(v, (int, float)) for v in ev["args"].values())
            continue
        assert isinstance(ev["dur"], int) and ev["dur"] >= 0
        assert isinstance(ev["tid"], int)
        assert isinstance(ev["name"], str) and isinstance(ev.get("args", {}), dict)
        threads[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"], ev["name"]))
    for key, slices in threads.items():
        assert key[0] in named_pids and key in named_tids
        # complete events on one thread must nest: a slice that starts inside another ends inside it
        slices.sort(key=lambda x: (x[0], -x[1]))
        stack: list[int] = []
        for s, e, name in slices:
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], (key, name, s, e, stack[-1])
            stack.append(e)


def test_big_session_export_is_valid_and_complete(big_session, tmp_path):
    out = tmp_path / "cc.trace.json"
    stats = write_perfetto(big_session, out)
    doc = json.loads(out.read_text())
    validate_trace_events(doc)
    spans = big_session.spans
    timed = spans.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert stats["slices"] == len(xs) == timed.height
    assert stats["sessions"] == spans.get_column("session_id").n_unique() == len({e["pid"] for e in xs})
    # every slice keeps its span's duration in microseconds, and model slices carry their token counts
    t0 = timed.get_column("start_ns").min()
    want = sorted(((s - t0) // 1000, (e - t0) // 1000) for s, e in timed.select("start_ns", "end_ns").iter_rows())
    assert sorted((e["ts"], e["ts"] + e["dur"]) for e in xs) == want
    model = [e for e in xs if e["cat"] == "model"]
    assert sum(e["args"].get("input_tokens", 0) for e in model) == spans.get_column("input_tokens").sum()
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert any("subagent" in n for n in names)


def test_kv_cache_tester_slices_last_api_time(kv_folder):
    doc = to_trace_events(kv_folder)
    validate_trace_events(doc)
    raw = json.loads((KV_FOLDER / "trace_0001.json").read_text())
    api = sorted(round(r["api_time"] * 1e6) for r in raw["requests"] if r.get("api_time") is not None)
    pid = next(e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name" and "trace_0001" in e["args"]["name"])
    durs = sorted(e["dur"] for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "model"
                  and e["args"].get("timing") == "measured")
    assert len(durs) == len(api)
    assert all(abs(a - b) <= 1 for a, b in zip(durs, api, strict=True))


def test_partly_overlapping_children_go_to_a_second_thread():
    recs = [span("s", "a", None, "agent", "invoke_agent x", T0, T0 + 20 * SEC),
            span("s", "t1", "a", "tool", "execute_tool A", T0, T0 + 10 * SEC),
            span("s", "p1", "t1", "parse", "parse", T0 + SEC, T0 + 2 * SEC),
            span("s", "t2", "a", "tool", "execute_tool B", T0 + 5 * SEC, T0 + 15 * SEC),
            span("s", "m", "a", "model", "chat m", T0 + 15 * SEC, T0 + 20 * SEC)]
    doc = to_trace_events(make_trace(recs))
    validate_trace_events(doc)
    tid = {e["name"]: e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert tid["invoke_agent x"] == tid["execute_tool A"] == tid["parse"] == tid["chat m"] == 1
    assert tid["execute_tool B"] == 2
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"main", "parallel 1"}


@pytest.mark.parametrize("turns", [1, 25])
def test_counter_track_follows_prompt_size(turns):
    tr = synthetic_session(turns=turns, subagent=False)
    doc = to_trace_events(tr)
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    calls = tr.spans.filter(pl.col("kind") == "model").sort("start_ns")
    assert [c["args"]["prompt"] for c in sorted(counters, key=lambda c: c["ts"])] == calls.get_column("input_tokens").to_list()
