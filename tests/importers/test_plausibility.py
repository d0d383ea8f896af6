"""Plausibility of derived model-call durations: a start the call cannot have had is moved later, the time cut
off becomes an ``idle`` wait (or unattributed orchestration), with a diagnostic; in every importer."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentprof.importers import load_any
from agentprof.importers.plausibility import (
    MAX_TTFT_S,
    MAX_UNKNOWN_OUTPUT_S,
    MIN_DECODE_TOKENS_PER_S,
    clip,
    plausible_max_s,
)
from agentprof.trace.waits import IDLE_GAP_S

S = 10**9


def test_the_rule_on_its_own():
    assert plausible_max_s(1000) == MAX_TTFT_S + 1000 / MIN_DECODE_TOKENS_PER_S
    assert plausible_max_s(None) == MAX_UNKNOWN_OUTPUT_S
    assert clip(0, 30 * S, 100) is None  # 30 s for 100 tokens: fine
    c = clip(0, 3600 * S, 2000)  # an hour for 2,000 tokens: at most 120 + 400 s
    assert c is not None and c.rule == "too_long" and c.new_start_ns == 3600 * S - int(plausible_max_s(2000) * S)
    # a silence of IDLE_GAP_S before the first output item: the request went out after it
    g = clip(0, 700 * S, None, inner_ns=[650 * S, 700 * S])
    assert g is not None and g.rule == "idle_gap" and g.new_start_ns == 650 * S
    assert clip(0, 200 * S, None, inner_ns=[100 * S, 200 * S]) is None


def _codex(ts_min: float, typ: str, payload: dict) -> dict:
    m, s = divmod(ts_min * 60, 60)
    return {"timestamp": f"2026-05-01T10:{int(m):02d}:{s:06.3f}Z", "type": typ, "payload": payload}


def test_a_codex_call_across_an_idle_hour_is_split(tmp_path):
    """The issue's shape, without token counts: the last tool output, then nothing for 59 minutes (the user
    away), then the final answer. The call is the minutes before the answer; the hour is an ``idle`` wait."""
    recs = [
        _codex(0, "session_meta", {"id": "s9", "timestamp": "2026-05-01T10:00:00.000Z"}),
        _codex(0.01, "turn_context", {"model": "gpt-5.4"}),
        _codex(0.02, "response_item", {"type": "message", "role": "user",
                                       "content": [{"type": "input_text", "text": "run it"}]}),
        _codex(0.1, "response_item", {"type": "function_call", "name": "exec_command", "arguments": "{}",
                                      "call_id": "c1"}),
        _codex(0.2, "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        _codex(59.2, "response_item", {"type": "reasoning", "summary": [], "encrypted_content": "x"}),
        _codex(59.5, "response_item", {"type": "message", "role": "assistant",
                                       "content": [{"type": "output_text", "text": "done"}]}),
    ]
    p = tmp_path / "rollout-s9.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    tr = load_any(p)
    m = tr.spans.filter(pl.col("kind") == "model").sort("start_ns")
    assert m.height == 2
    last = m.row(1, named=True)
    assert (last["end_ns"] - last["start_ns"]) / S == pytest.approx(18.0)  # reasoning item -> answer
    assert json.loads(last["attributes"])["agentprof.timing.clipped_s"] == pytest.approx(59 * 60)
    idle = tr.spans.filter(pl.col("kind") == "wait").filter(pl.col("attributes").str.contains('"idle"')).row(
        0, named=True)
    assert (idle["end_ns"] - idle["start_ns"]) / S == pytest.approx(59 * 60)
    assert json.loads(idle["attributes"])["agentprof.plausibility.rule"] == "idle_gap"
    assert [d.kind for d in tr.diagnostics].count("implausible_duration") == 1
    from agentprof.analysis import analyze

    t = analyze(tr).to_dict()["time"]
    assert t["waits_by_reason"]["idle"] == pytest.approx(59 * 60)
    assert t["model_s"] < 60 and t["agent_active_s"] < 120


def test_a_claude_code_response_far_longer_than_its_tokens_is_clipped(tmp_path):
    """Claude Code times a call from its trigger record: a response that arrives 20 minutes after the prompt
    with 40 output tokens cannot have streamed that long; the time before the plausible start is idle."""
    def rec(uuid, parent, typ, ts, content, **kw):
        msg = {"role": typ, "content": content}
        if typ == "assistant":
            msg.update(model="claude-sonnet-4-5-20250929", id=kw.pop("mid"),
                       usage={"input_tokens": 3, "output_tokens": 40})
        return {"parentUuid": parent, "isSidechain": False, "sessionId": "pl", "version": "2.1.7", "type": typ,
                "uuid": uuid, "timestamp": ts, "message": msg, **kw}

    recs = [rec("u0", None, "user", "2026-01-14T19:00:00.000Z", "hello"),
            rec("a1", "u0", "assistant", "2026-01-14T19:20:00.000Z", [{"type": "text", "text": "hi there"}],
                mid="m1")]
    p = tmp_path / "pl.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    tr = load_any(p)
    m = tr.spans.filter(pl.col("kind") == "model").row(0, named=True)
    assert (m["end_ns"] - m["start_ns"]) / S == pytest.approx(plausible_max_s(40))
    w = tr.spans.filter(pl.col("kind") == "wait").row(0, named=True)
    assert json.loads(w["attributes"])["agentprof.wait.reason"] == "idle"
    assert (w["end_ns"] - w["start_ns"]) / S == pytest.approx(1200 - plausible_max_s(40))
    assert 1200 - plausible_max_s(40) >= IDLE_GAP_S


def test_kv_cache_tester_derived_ends_beyond_the_tokens_are_unknown(tmp_path):
    doc = {"id": "pl", "models": ["m"], "block_size": 64, "hash_id_scope": "local", "requests": [
        {"t": 0, "type": "n", "model": "m", "in": 640, "out": 10, "hash_ids": list(range(10))},
        {"t": 5000, "type": "n", "model": "m", "in": 704, "out": 10, "hash_ids": list(range(11))},
        {"t": 5010, "type": "n", "model": "m", "in": 768, "out": 10, "hash_ids": list(range(12)), "think_time": 2},
    ]}
    p = tmp_path / "pl.json"
    p.write_text(json.dumps(doc))
    tr = load_any(p)
    m = tr.spans.filter(pl.col("kind") == "model").sort("start_ns")
    assert m.get_column("timing").to_list() == ["unknown", "derived", "unknown"]
    assert any(d.kind == "implausible_duration" for d in tr.diagnostics)
