"""Codex CLI rollouts: calls, tools, tokens, prompts, user turns and compaction."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentprof.importers import load_any

from .importer_helpers import SAMPLES, imported, jsonl, kinds, median_late_share

ROLLOUT = next((SAMPLES / "codex").glob("rollout-*.jsonl"))
CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")


def test_counts_and_tokens_against_the_rollout():
    """66 calls and 102 tool calls (traces.md), recounted from token_count events and call items."""
    raw = jsonl(ROLLOUT)
    token_counts = [r["payload"]["info"] for r in raw if r["type"] == "event_msg"
                    and r["payload"]["type"] == "token_count" and r["payload"].get("info")]
    calls = [r for r in raw if r["type"] == "response_item" and r["payload"]["type"] in CALL_ITEMS]
    assert len(token_counts) == 66 and len(calls) == 102
    tr = imported("codex")
    k = kinds(tr.spans)
    assert (k["model"], k["tool"], k["agent"]) == (66, 102, 1)
    m = tr.spans.filter(pl.col("kind") == "model")
    total = token_counts[-1]["total_token_usage"]
    assert m.get_column("input_tokens").sum() == total["input_tokens"]
    assert m.get_column("cache_read_tokens").sum() == total["cached_input_tokens"]
    assert m.get_column("output_tokens").sum() == total["output_tokens"]
    assert m.get_column("reasoning_tokens").sum() == total["reasoning_output_tokens"]
    assert set(m.get_column("model").unique()) == {r["payload"]["model"] for r in raw if r["type"] == "turn_context"}


def test_tool_durations_from_exec_command_end_and_patch_metadata():
    raw = jsonl(ROLLOUT)
    ends = {r["payload"]["call_id"]: r["payload"]["duration"] for r in raw if r["type"] == "event_msg"
            and r["payload"]["type"] == "exec_command_end"}
    patches = {r["payload"]["call_id"]: json.loads(r["payload"]["output"])["metadata"]["duration_seconds"]
               for r in raw if r["type"] == "response_item" and r["payload"]["type"] == "custom_tool_call_output"}
    tools = imported("codex").spans.filter(pl.col("kind") == "tool")
    got = {json.loads(a)["gen_ai.tool.call.id"]: (t, (e - s) / 1e9 if s is not None and e is not None else None)
           for a, t, s, e in zip(*[tools.get_column(c).to_list() for c in ("attributes", "timing", "start_ns", "end_ns")], strict=False)}
    for cid, d in {**{c: v["secs"] + v["nanos"] / 1e9 for c, v in ends.items()}, **patches}.items():
        timing, secs = got[cid]
        assert timing == "measured" and secs == pytest.approx(d, abs=1e-6)
    assert sum(1 for t, _ in got.values() if t == "measured") == len(ends) + len(patches)


def test_prompts_are_append_only_and_in_the_band():
    m = imported("codex").spans.filter(pl.col("kind") == "model")
    assert 0.93 <= median_late_share(m) <= 0.995
    tokens = m.sort("start_ns").get_column("prompt_tokens_hashed").to_list()
    assert tokens == sorted(tokens)


def test_user_waits_and_ttft_from_task_complete():
    raw = jsonl(ROLLOUT)
    tr = imported("codex")
    waits = tr.spans.filter(pl.col("kind") == "wait")
    assert waits.height == sum(1 for r in raw if r["type"] == "event_msg" and r["payload"]["type"] == "user_message")
    ttfts = sorted(r["payload"]["time_to_first_token_ms"] / 1000 for r in raw if r["type"] == "event_msg"
                   and r["payload"]["type"] == "task_complete")
    got = sorted(tr.spans.get_column("ttft_s").drop_nulls().to_list())
    assert got == pytest.approx(ttfts)


def test_user_turns_logged_only_as_events_get_a_synthetic_user_item(tmp_path):
    """Some Codex builds log the user turn only as event_msg/user_message: the prompt must still hold it."""
    lines = ROLLOUT.read_text().splitlines()
    kept = [ln for ln in lines if not (json.loads(ln)["type"] == "response_item" and
            json.loads(ln)["payload"].get("type") == "message" and json.loads(ln)["payload"].get("role") == "user"
            and "show tools" in ln)]
    assert len(kept) == len(lines) - 1
    p = tmp_path / "rollout-x.jsonl"
    p.write_text("\n".join(kept) + "\n")
    a = imported("codex").spans.filter(pl.col("kind") == "model").sort("start_ns")
    b = load_any(p).spans.filter(pl.col("kind") == "model").sort("start_ns")
    assert b.get_column("block_hashes").to_list() == a.get_column("block_hashes").to_list()


def test_compacted_record_starts_a_child_session(tmp_path):
    lines = ROLLOUT.read_text().splitlines()
    raw = [json.loads(ln) for ln in lines]
    cut = next(i for i, r in enumerate(raw) if r["type"] == "event_msg" and r["payload"]["type"] == "task_started"
               and i > 5)
    ts = raw[cut]["timestamp"]
    summary = {"timestamp": ts, "type": "compacted", "payload": {"message": "Summary of the work so far."}}
    p = tmp_path / "rollout-c.jsonl"
    p.write_text("\n".join(lines[:cut] + [json.dumps(summary)] + lines[cut:]) + "\n")
    tr = load_any(p)
    sessions = tr.spans.filter(pl.col("kind") == "agent").to_dicts()
    assert len(sessions) == 2
    child = next(s for s in sessions if s["parent_session_id"])
    assert json.loads(child["attributes"])["agentprof.session.role"] == "compaction"
    before = sum(1 for r in raw[:cut] if r["type"] == "event_msg" and r["payload"]["type"] == "token_count")
    m = tr.spans.filter(pl.col("kind") == "model")
    assert m.filter(pl.col("session_id") == child["session_id"]).height == 66 - before
    # the history restarted: the first call after compaction is far smaller than the last one before
    first_after = m.filter(pl.col("session_id") == child["session_id"]).sort("start_ns").row(0, named=True)
    last_before = m.filter(pl.col("session_id") != child["session_id"]).sort("start_ns").row(-1, named=True)
    assert first_after["prompt_tokens_hashed"] < last_before["prompt_tokens_hashed"]
