"""TraceLab's normalized round trace (uw-syfi/TraceLab ``example_sessions/sanitized/round_trace.jsonl``, CC BY
4.0): rows import with their tokens, tool latencies and timing, and agree with the Codex log of the same session
(TraceLab's ``example_sessions/codex/trace.json``, rebuilt in ``fixtures/codex_tracelab_0114.jsonl``)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentprof.importers import detect_format, load_any
from agentprof.importers.timestamps import iso_to_ns

from .importer_helpers import SAMPLES, jsonl

ROUNDS = SAMPLES / "tracelab" / "round_trace.jsonl"
CODEX_LOG = SAMPLES.parents[1] / "tests" / "importers" / "fixtures" / "codex_tracelab_0114.jsonl"


@pytest.fixture(scope="module")
def tl():
    return load_any(ROUNDS)


def test_detected_and_every_row_is_one_call_with_its_tokens(tl):
    assert detect_format(ROUNDS) == "tracelab"
    raw = jsonl(ROUNDS)
    m = tl.spans.filter(pl.col("kind") == "model")
    assert m.height == len(raw) == 19
    assert sorted(m.get_column("session_id").unique().to_list()) == sorted({r["session_id"] for r in raw})
    assert m.get_column("input_tokens").sum() == sum(r["input_tokens_total"] for r in raw)
    assert m.get_column("cache_read_tokens").sum() == sum(r["prefix_tokens"] for r in raw)
    assert m.get_column("output_tokens").sum() == sum(r["output_tokens"] for r in raw)
    assert m.get_column("cache_write_tokens").sum() == sum(r["claude_cache_creation_input_tokens"] or 0 for r in raw)
    assert m.get_column("reasoning_tokens").sum() == sum(r["reasoning_output_tokens"] or 0 for r in raw)
    assert m.get_column("block_hashes").drop_nulls().len() == 0
    assert any(d.kind == "no_block_hashes" and "no block hashes" in d.message for d in tl.diagnostics)


def test_tools_keep_their_latencies(tl):
    raw = jsonl(ROUNDS)
    tools = [t for r in raw for t in r["tools"]]
    got = tl.spans.filter(pl.col("kind") == "tool")
    assert got.height == len(tools)
    by_id = {json.loads(a)["gen_ai.tool.call.id"]: (s, e, timing, status) for a, s, e, timing, status in
             got.select("attributes", "start_ns", "end_ns", "timing", "status").iter_rows()}
    for t in tools:
        s, e, timing, status = by_id[t["tool_call_id"]]
        assert e == iso_to_ns(t["result_at"])
        if t["tool_internal_latency_ms"] is not None:
            assert (timing, (e - s) / 1e6) == ("measured", pytest.approx(t["tool_internal_latency_ms"]))
        else:
            assert (timing, (e - s) / 1e6) == ("derived", pytest.approx(t["tool_wall_latency_ms"]))
        assert (status == "error") == (t["is_error"] is True)


def test_calls_are_timed_from_their_input_to_their_usage_report(tl):
    raw = jsonl(ROUNDS)
    m = tl.spans.filter(pl.col("kind") == "model")
    span = {json.loads(a)["agentprof.tracelab.round_id"]: (s, e) for a, s, e in
            m.select("attributes", "start_ns", "end_ns").iter_rows()}
    for r in raw:
        ev = r["timing_events"]
        first_out = next(i for i, e in enumerate(ev) if e["event_type"] in ("reasoning", "text", "tool_call"))
        start = max(iso_to_ns(e["timestamp"]) for e in ev[:first_out] if e["event_type"] in ("user_message",
                                                                                              "tool_result"))
        ends = [e["timestamp"] for e in ev if e["event_type"] == "usage_report"] or \
            [e["timestamp"] for e in ev if e["event_type"] in ("reasoning", "text", "tool_call")]
        assert span[r["round_id"]] == (start, iso_to_ns(ends[-1]))


def test_rounds_agree_with_the_codex_log_of_the_same_session(tl):
    """TraceLab derived its Codex rows from the rollout agentprof reads directly: calls, tokens, tool times and
    user waits agree (the TraceLab ids are pseudonymized, so rows pair by order)."""
    log = load_any(CODEX_LOG).spans
    rows = tl.spans.filter(pl.col("session_id").str.starts_with("codex:"))
    cols = ["input_tokens", "cache_read_tokens", "output_tokens", "reasoning_tokens", "start_ns", "end_ns"]
    a = rows.filter(pl.col("kind") == "model").sort("start_ns").select(cols)
    b = log.filter(pl.col("kind") == "model").sort("start_ns").select(cols)
    assert a.height == b.height == 9
    assert a.drop("start_ns", "end_ns").equals(b.drop("start_ns", "end_ns"))  # tokens: exactly
    for (s1, e1), (s2, e2) in zip(a.select("start_ns", "end_ns").iter_rows(), b.select("start_ns", "end_ns").iter_rows(),
                                  strict=True):
        assert abs(s1 - s2) <= 10**6 and abs(e1 - e2) <= 10**6  # timing: the same records, to the millisecond
    ta = rows.filter(pl.col("kind") == "tool").sort("end_ns")
    tb = log.filter(pl.col("kind") == "tool").sort("end_ns")
    assert ta.height == tb.height == 10
    da = ((ta.get_column("end_ns") - ta.get_column("start_ns")) / 1e6).to_list()
    db = ((tb.get_column("end_ns") - tb.get_column("start_ns")) / 1e6).to_list()
    assert da == pytest.approx(db, abs=1.0)  # runner durations, TraceLab rounds them to whole ms
    assert ta.get_column("timing").to_list() == tb.get_column("timing").to_list()
    wa = rows.filter(pl.col("kind") == "wait").sort("start_ns").select("start_ns", "end_ns").rows()
    wb = log.filter(pl.col("kind") == "wait").sort("start_ns").select("start_ns", "end_ns").rows()
    # the log also has the wait from the session's start to the first message, which the rows cannot show;
    # the later ones end at the turn's first record (task_started) in the log, at the user message in the rows
    assert len(wa) == 2 and len(wb) == 3
    for (s1, e1), (s2, e2) in zip(wa, wb[1:], strict=True):
        assert abs(s1 - s2) <= 2 * 10**6 and 0 <= e1 - e2 <= 10 * 10**6


def test_the_analysis_runs_on_rounds(tl):
    from agentprof.analysis import analyze

    d = analyze(tl).to_dict()
    assert d["model_calls"] == 19
    assert d["time"]["waits_by_reason"]["user_turn"] > 0
    assert d["redundancy"]["provider_cache_read_share"]["n"] > 0
    assert any(x["kind"] == "missing_hashes" for x in d["diagnostics"])


CC_PROJECT = SAMPLES.parents[1] / "tests" / "importers" / "fixtures" / "cc_tracelab"


def test_rounds_agree_with_the_claude_code_log_of_the_same_session(tl):
    """TraceLab's Claude Code 2.1.157 example (its 64 raw records rebuilt in ``fixtures/cc_tracelab``, a
    project folder whose session file opens with ``mode``/``permission-mode`` records, as in the issue): the
    folder imports, and its calls, tokens, tool times and user wait agree with TraceLab's Claude rows."""
    log = load_any(CC_PROJECT).spans  # the folder, as users import ~/.claude/projects/<project>/
    rows = tl.spans.filter(pl.col("session_id").str.starts_with("claude:"))
    cols = ["input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"]
    a = rows.filter(pl.col("kind") == "model").sort("end_ns")
    b = log.filter(pl.col("kind") == "model").sort("end_ns")
    assert a.height == b.height == 10
    assert a.select(cols).equals(b.select(cols))
    assert a.get_column("end_ns").to_list() == b.get_column("end_ns").to_list()  # the last content block
    # the start: TraceLab takes the input event (the prompt, a tool result); Claude Code chains the request to
    # the record its first block points to, which may be a context attachment written milliseconds later
    for s1, s2 in zip(a.get_column("start_ns"), b.get_column("start_ns"), strict=True):
        assert abs(s1 - s2) <= 5 * 10**6
    ta = rows.filter(pl.col("kind") == "tool").sort("end_ns")
    tb = log.filter(pl.col("kind") == "tool").sort("end_ns")
    assert ta.height == tb.height == 9
    assert ta.get_column("end_ns").to_list() == tb.get_column("end_ns").to_list()
    da = ((ta.get_column("end_ns") - ta.get_column("start_ns")) / 1e6).to_list()
    db = ((tb.get_column("end_ns") - tb.get_column("start_ns")) / 1e6).to_list()
    assert da == pytest.approx(db, abs=1.0)
    assert ta.get_column("timing").to_list() == tb.get_column("timing").to_list()
    wa = rows.filter(pl.col("kind") == "wait").select("start_ns", "end_ns").rows()
    wb = log.filter(pl.col("kind") == "wait").select("start_ns", "end_ns").rows()
    # the log's wait starts after the turn's stop hook and turn summary (0.19 s after the answer)
    assert len(wa) == len(wb) == 1 and wa[0][1] == wb[0][1] and 0 <= wb[0][0] - wa[0][0] <= 300 * 10**6
