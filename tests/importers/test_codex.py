"""Codex CLI rollouts: calls, tools, tokens, prompts, user turns and compaction."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

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
    # the unified exec tool's output header ("Wall time: 1.0016 seconds") times the calls without an end event
    headers = {}
    for r in raw:
        p = r["payload"]
        if r["type"] == "response_item" and p["type"] == "function_call_output" and p["call_id"] not in ends:
            line = next((ln for ln in str(p["output"]).splitlines()[:4] if ln.startswith("Wall time: ")), None)
            if line is not None:
                headers[p["call_id"]] = float(line.split()[2])
    assert headers
    for cid, d in {**headers, **{c: v["secs"] + v["nanos"] / 1e9 for c, v in ends.items()}, **patches}.items():
        timing, secs = got[cid]
        assert timing == "measured" and secs == pytest.approx(d, abs=1e-6)
    assert sum(1 for t, _ in got.values() if t == "measured") == len(ends) + len(patches) + len(headers)


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


def _rec(ts: str, typ: str, payload: dict) -> dict:
    return {"timestamp": f"2026-02-23T11:41:{ts}Z", "type": typ, "payload": payload}


def _usage(inp: int, cached: int, out: int) -> dict:
    return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out, "reasoning_output_tokens": 0,
            "total_tokens": inp + out}


def _tc(ts: str, last: dict, total: dict) -> dict:
    return _rec(ts, "event_msg", {"type": "token_count", "info": {"last_token_usage": last,
                                                                  "total_token_usage": total}})


def test_call_starts_at_its_input_not_at_progress_events(tmp_path):
    """Codex Desktop 0.104 layout (seen in real rollouts): an ``agent_reasoning``/``agent_message`` event
    precedes each output item, a rate-limit ``token_count`` (info null) opens the turn, the same totals are
    reported again after the tool outputs and the next ``turn_context``, and a background command's
    ``exec_command_end`` can land while the next call streams. None of these start a request: a call starts
    at its last input record (tool output, user message, turn_context)."""
    u1, u2 = _usage(17000, 3000, 200), _usage(18000, 17000, 300)
    t1 = u1
    t2 = {k: u1[k] + u2[k] for k in u1}
    recs = [
        _rec("30.000", "session_meta", {"id": "s1", "timestamp": "2026-02-23T11:41:29.000Z", "cli_version": "0.104.0"}),
        _rec("32.241", "response_item", {"type": "message", "role": "user",
                                         "content": [{"type": "input_text", "text": "fix it"}]}),
        _rec("32.241", "event_msg", {"type": "user_message", "message": "fix it"}),
        _rec("32.247", "turn_context", {"model": "gpt-5.3-codex"}),
        _rec("32.787", "event_msg", {"type": "token_count", "info": None, "rate_limits": {}}),
        _rec("37.307", "event_msg", {"type": "agent_reasoning", "text": "thinking"}),
        _rec("37.308", "response_item", {"type": "reasoning", "summary": [], "encrypted_content": "x"}),
        _rec("38.901", "response_item", {"type": "function_call", "name": "exec_command", "arguments": "{}",
                                         "call_id": "c1"}),
        _tc("38.914", u1, t1),
        _rec("39.032", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        _rec("39.037", "turn_context", {"model": "gpt-5.3-codex"}),
        _tc("39.500", u1, t1),  # the same totals again: not a call, not a start
        _rec("41.000", "event_msg", {"type": "exec_command_end", "call_id": "bg", "duration": {"secs": 9}}),
        _rec("42.699", "event_msg", {"type": "agent_reasoning", "text": "more"}),
        _rec("42.700", "response_item", {"type": "reasoning", "summary": [], "encrypted_content": "y"}),
        _rec("44.972", "event_msg", {"type": "agent_message", "message": "done"}),
        _rec("44.973", "response_item", {"type": "message", "role": "assistant",
                                         "content": [{"type": "output_text", "text": "done"}]}),
        _tc("44.974", u2, t2),
    ]
    p = tmp_path / "rollout-2026-02-23T12-41-04-s1.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    m = load_any(p).spans.filter(pl.col("kind") == "model").sort("end_ns")
    assert m.height == 2  # two distinct totals
    base = 1771846860 * 10**9  # 2026-02-23T11:41:00Z
    starts = [(s - base) / 1e9 for s in m.get_column("start_ns").to_list()]
    ends = [(e - base) / 1e9 for e in m.get_column("end_ns").to_list()]
    assert starts == pytest.approx([32.247, 39.037]) and ends == pytest.approx([38.914, 44.974])
    assert m.get_column("input_tokens").to_list() == [17000, 18000]


def test_without_token_counts_a_call_ends_at_its_last_output(tmp_path):
    """Builds that write no token_count: the call closes when the next input arrives, at its last output
    item, not at a later progress event (here the command's end)."""
    recs = [
        _rec("00.000", "session_meta", {"id": "s2", "timestamp": "2026-02-23T11:41:00.000Z"}),
        _rec("01.000", "response_item", {"type": "message", "role": "user",
                                         "content": [{"type": "input_text", "text": "go"}]}),
        _rec("03.000", "response_item", {"type": "function_call", "name": "shell", "arguments": "{}",
                                         "call_id": "c1"}),
        _rec("09.000", "event_msg", {"type": "exec_command_end", "call_id": "c1", "duration": {"secs": 6}}),
        _rec("09.100", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        _rec("12.000", "response_item", {"type": "message", "role": "assistant",
                                         "content": [{"type": "output_text", "text": "done"}]}),
        _rec("13.000", "event_msg", {"type": "task_complete"}),
    ]
    p = tmp_path / "rollout-s2.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    m = load_any(p).spans.filter(pl.col("kind") == "model").sort("end_ns")
    base = 1771846860 * 10**9
    spans = [x for s, e in m.select("start_ns", "end_ns").iter_rows() for x in ((s - base) / 1e9, (e - base) / 1e9)]
    assert spans == pytest.approx([1.0, 3.0, 9.1, 12.0])


def _rec2(ts: str, typ: str, payload: dict) -> dict:
    return {"timestamp": f"2026-05-05T21:{ts}Z", "type": typ, "payload": payload}


def _usage2(inp: int, cached: int, out: int) -> dict:
    return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out, "reasoning_output_tokens": 0,
            "total_tokens": inp + out}


def _tc2(ts: str, total: dict, last: dict) -> dict:
    return _rec2(ts, "event_msg", {"type": "token_count", "info": {"total_token_usage": total,
                                                                   "last_token_usage": last}})


P_ID, C_ID = "019e0000-0000-7000-8000-000000000001", "019e0000-0000-7000-8000-000000000002"


def _spawn_pair() -> tuple[list[dict], list[dict]]:
    """A multi-agent Codex run: the parent calls ``spawn_agent``; the child thread's rollout names its parent
    in ``session_meta.source.subagent.thread_spawn`` and starts with a replay of the parent's records (the
    parent's session_meta, items and token_count) before its own first ``turn_context`` (the layout third-party
    Codex parsers document and guard against double counting)."""
    first = _usage2(10000, 0, 100)
    parent = [
        _rec2("50:00.000", "session_meta", {"id": P_ID, "timestamp": "2026-05-05T21:50:00.000Z", "source": "vscode"}),
        _rec2("50:01.000", "turn_context", {"model": "gpt-5.5"}),
        _rec2("50:01.000", "response_item", {"type": "message", "role": "user",
                                             "content": [{"type": "input_text", "text": "review with a helper"}]}),
        _rec2("50:05.000", "response_item", {"type": "function_call", "name": "spawn_agent", "arguments": "{}",
                                             "call_id": "sp1"}),
        _tc2("50:05.010", first, first),
        _rec2("50:05.200", "response_item", {"type": "function_call_output", "call_id": "sp1", "output": "ok"}),
        _rec2("50:40.000", "response_item", {"type": "message", "role": "assistant",
                                             "content": [{"type": "output_text", "text": "done"}]}),
        _tc2("50:40.010", _usage2(20300, 9900, 150), _usage2(10300, 9900, 50)),
    ]
    child = [
        _rec2("50:05.100", "session_meta", {"id": C_ID, "forked_from_id": P_ID, "source": {"subagent": {
            "thread_spawn": {"parent_thread_id": P_ID, "depth": 1, "agent_nickname": "Hypatia"}}}}),
        _rec2("50:05.101", "session_meta", {"id": P_ID, "source": "vscode"}),
        *[dict(r, timestamp="2026-05-05T21:50:05.102Z") for r in parent[2:5]],  # the replay, stamped at the fork
        _rec2("50:05.200", "turn_context", {"model": "gpt-5.5"}),
        _tc2("50:05.202", first, first),  # the parent's totals reported again: not a call of the child
        _rec2("50:05.300", "response_item", {"type": "message", "role": "user",
                                             "content": [{"type": "input_text", "text": "you review"}]}),
        _rec2("50:09.000", "response_item", {"type": "function_call", "name": "exec_command", "arguments": "{}",
                                             "call_id": "c1"}),
        _tc2("50:09.010", _usage2(20200, 9800, 150), _usage2(10200, 9800, 50)),
        _rec2("50:20.000", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        _rec2("50:30.000", "response_item", {"type": "message", "role": "assistant",
                                             "content": [{"type": "output_text", "text": "LGTM"}]}),
        _tc2("50:30.010", _usage2(30500, 19900, 200), _usage2(10300, 10100, 50)),
    ]
    return parent, child


def test_a_spawned_agent_thread_is_a_linked_child_without_the_replayed_parent_calls(tmp_path):
    parent, child = _spawn_pair()
    (tmp_path / f"rollout-2026-05-05T21-50-00-{P_ID}.jsonl").write_text("\n".join(json.dumps(r) for r in parent))
    (tmp_path / f"rollout-2026-05-05T21-50-05-{C_ID}.jsonl").write_text("\n".join(json.dumps(r) for r in child))
    df = load_any(tmp_path).spans
    calls = df.filter(pl.col("kind") == "model")
    assert dict(calls.group_by("session_id").len().iter_rows()) == {P_ID: 2, C_ID: 2}
    own = [r["payload"]["info"]["last_token_usage"] for r in child[-5:] if r["payload"].get("type") == "token_count"]
    assert calls.filter(pl.col("session_id") == C_ID).get_column("input_tokens").to_list() == \
        [u["input_tokens"] for u in own]
    tools = df.filter(pl.col("kind") == "tool")
    assert dict(tools.group_by("session_id").len().iter_rows()) == {P_ID: 1, C_ID: 1}  # spawn_agent once
    agent = df.filter((pl.col("kind") == "agent") & (pl.col("session_id") == C_ID)).row(0, named=True)
    assert agent["parent_session_id"] == P_ID
    assert json.loads(agent["attributes"])["agentprof.session.role"] == "subagent"
    # its first prompt holds the replayed context
    first = calls.filter(pl.col("session_id") == C_ID).sort("start_ns").row(0, named=True)
    assert first["prompt_tokens_hashed"] > 0 and len(first["segments"]) >= 3


def test_the_replay_is_skipped_also_without_the_parent_file(tmp_path):
    _parent, child = _spawn_pair()
    p = tmp_path / f"rollout-2026-05-05T21-50-05-{C_ID}.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in child))
    calls = load_any(p).spans.filter(pl.col("kind") == "model")
    assert calls.height == 2 and calls.get_column("input_tokens").sum() == 10200 + 10300


# ---- regression fixtures (synthetic, tests/importers/fixtures/README.md): layouts of real public rollouts

FIXTURES = Path(__file__).parent / "fixtures"


def _usage_events(raw: list[dict]) -> list[dict]:
    return [r["payload"]["info"] for r in raw if r["type"] == "event_msg"
            and r["payload"]["type"] == "token_count" and r["payload"].get("info")]


def test_usage_reported_before_the_items_does_not_open_a_second_call():
    """0.4x rollouts write a response's ``token_count`` before its items (reasoning, function_call, message),
    as a published 0.46.0 ``codex exec`` rollout shows: the items after the count belong to that call, so
    every call carries usage and none is left without it at the end of the file."""
    path = FIXTURES / "codex_046_usage_before_items.jsonl"
    raw = jsonl(path)
    counts = _usage_events(raw)
    tr = load_any(path)
    m = tr.spans.filter(pl.col("kind") == "model").sort("end_ns")
    assert m.height == len(counts) == 2
    assert m.get_column("input_tokens").to_list() == [c["last_token_usage"]["input_tokens"] for c in counts]
    assert m.get_column("output_tokens").null_count() == 0
    assert (m.get_column("end_ns") >= m.get_column("start_ns")).all()
    # the second request's prompt holds the first call's items and the tool output recorded after its count
    assert m.get_column("prompt_tokens_hashed").to_list()[1] > m.get_column("prompt_tokens_hashed").to_list()[0]
    tools = tr.spans.filter(pl.col("kind") == "tool")
    assert tools.height == 1 and tools.get_column("timing").to_list() == ["measured"]


def test_token_counts_with_totals_only_give_each_call_its_difference():
    """``token_count`` events that carry ``total_token_usage`` without ``last_token_usage``: each call's usage
    is the difference of consecutive totals (before, these events were ignored and the file had no calls
    closed by usage)."""
    path = FIXTURES / "codex_totals_only.jsonl"
    totals = [c["total_token_usage"] for c in _usage_events(jsonl(path))]
    m = load_any(path).spans.filter(pl.col("kind") == "model").sort("end_ns")
    assert m.height == len(totals) == 2
    prev = {k: 0 for k in totals[0]}
    for row, tot in zip(m.select("input_tokens", "cache_read_tokens", "output_tokens").iter_rows(), totals,
                        strict=True):
        assert row == (tot["input_tokens"] - prev["input_tokens"],
                       tot["cached_input_tokens"] - prev["cached_input_tokens"],
                       tot["output_tokens"] - prev["output_tokens"])
        prev = tot


def test_paginated_rollout_user_turns_and_usage_records():
    """``history_mode: "paginated"`` (0.15x): user turns only as ``item_completed`` UserMessage events, usage in
    ``token_usage_record`` (one per response), thread state in ``world_state``: waits come from the user items,
    calls from the usage records, and the known record kinds raise no diagnostics."""
    path = FIXTURES / "codex_paginated.jsonl"
    raw = jsonl(path)
    records = [r["payload"]["usage"] for r in raw if r["type"] == "token_usage_record"]
    users = [r for r in raw if r["type"] == "event_msg" and r["payload"]["type"] == "item_completed"
             and r["payload"]["item"]["type"] == "UserMessage"]
    tr = load_any(path)
    m = tr.spans.filter(pl.col("kind") == "model").sort("end_ns")
    assert m.height == len(records) == 3
    assert m.get_column("input_tokens").to_list() == [u["input_tokens"] for u in records]
    assert m.get_column("cache_read_tokens").to_list() == [u["cached_input_tokens"] for u in records]
    assert m.get_column("cache_write_tokens").to_list()[1] == records[1]["cache_write_input_tokens"]
    waits = tr.spans.filter((pl.col("kind") == "wait") & (pl.col("name") == "wait user_turn")).sort("end_ns")
    # each wait ends when the user's message opened the turn (its task_started, written just before the item)
    starts = [r["timestamp"] for r in raw if r["type"] == "event_msg" and r["payload"]["type"] == "task_started"]
    assert len(starts) == len(users)
    ends = starts
    base = datetime.fromisoformat(ends[0].replace("Z", "+00:00"))
    got = [(e - int(base.timestamp() * 1e9)) / 1e9 for e in waits.get_column("end_ns").to_list()]
    want = [(datetime.fromisoformat(t.replace("Z", "+00:00")) - base).total_seconds() for t in ends]
    assert got == pytest.approx(want, abs=1e-3)
    assert not [d for d in tr.diagnostics if d.kind == "unknown_record"]


def test_an_interrupted_response_is_its_own_failed_call_not_part_of_the_next():
    """A turn interrupted while the response streams (``turn_aborted``) leaves output items without a
    ``token_count``: that response ends at the interruption as a failed call, and the next turn's call starts
    at its own input, after the user's wait, instead of absorbing the aborted one."""
    path = FIXTURES / "codex_interrupted_turn.jsonl"
    raw = jsonl(path)
    stamp = {r["payload"]["type"]: r["timestamp"] for r in raw if r["type"] == "event_msg"}
    tr = load_any(path)
    m = tr.spans.filter(pl.col("kind") == "model").sort("start_ns")
    assert m.height == 1 + len(_usage_events(raw))
    assert m.get_column("status").to_list() == ["error", "ok"]
    assert m.get_column("error_type").to_list()[0] == "interrupted"

    def ns(iso: str) -> int:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1e9)

    assert m.get_column("end_ns").to_list()[0] == ns(stamp["turn_aborted"])
    waits = tr.spans.filter(pl.col("kind") == "wait").sort("start_ns")
    gap_end = waits.get_column("end_ns").to_list()[-1]
    assert m.get_column("start_ns").to_list()[1] >= gap_end  # the second call does not overlap the user's wait
    assert m.get_column("input_tokens").to_list() == [None, _usage_events(raw)[0]["last_token_usage"]["input_tokens"]]


TRACELAB_ROLLOUT = FIXTURES / "codex_tracelab_0114.jsonl"
"""TraceLab's public Codex CLI 0.114.0 example session (uw-syfi/TraceLab ``example_sessions/codex/trace.json``,
CC BY 4.0), its 72 records rebuilt as JSON Lines with long texts shortened: three user turns, nine responses."""


def _variant(tmp_path, drop) -> Path:
    """The TraceLab rollout without the records ``drop`` selects (the layouts of builds that do not write them)."""
    recs = [r for r in jsonl(TRACELAB_ROLLOUT) if not drop(r)]
    p = tmp_path / "rollout-2026-03-21T10-05-38-01a7c9e4-6d12-7b3a-9f42-8c6d5e1a0b73.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return p


def _ev(r: dict, *types: str) -> bool:
    return r["type"] == "event_msg" and r["payload"]["type"] in types


def _ns(ts: str) -> int:
    from agentprof.importers.timestamps import iso_to_ns

    return iso_to_ns(ts)


def _responses(raw: list[dict]) -> list[tuple[int, int]]:
    """(first output item, last output item) of each response, read off the token_count records that close
    them: the ground truth every layout below must reproduce."""
    out, first, last = [], None, None
    for r in raw:
        p = r["payload"]
        if r["type"] == "response_item" and (p["type"] in ("reasoning", "function_call") or
                                              (p["type"] == "message" and p["role"] == "assistant")):
            first = first if first is not None else _ns(r["timestamp"])
            last = _ns(r["timestamp"])
        elif _ev(r, "token_count"):
            out.append((first, last))
            first = last = None
    return out


@pytest.mark.parametrize("layout", ["with token_count", "no token_count", "no token_count, no task events",
                                    "no token_count, user turns as events only"])
def test_model_calls_follow_the_turn_structure_in_every_layout(tmp_path, layout):
    """A model call never spans a user message or a final answer, with or without ``token_count``,
    ``task_started``/``task_complete`` or user ``response_item``s; the time from each answer to the next user
    message is a ``user_turn`` wait (the issue's 59-minute call came from a rollout without token counts)."""
    drop = {
        "with token_count": lambda r: False,
        "no token_count": lambda r: _ev(r, "token_count"),
        "no token_count, no task events": lambda r: _ev(r, "token_count", "task_started", "task_complete"),
        "no token_count, user turns as events only": lambda r: _ev(r, "token_count") or (
            r["type"] == "response_item" and r["payload"].get("role") == "user"),
    }[layout]
    raw = jsonl(TRACELAB_ROLLOUT)
    truth = _responses(raw)
    assert len(truth) == 9
    tr = load_any(_variant(tmp_path, drop))
    m = tr.spans.filter(pl.col("kind") == "model").sort("start_ns")
    assert m.height == 9  # one per response
    users = [_ns(r["timestamp"]) for r in raw if _ev(r, "user_message")]
    answers = [_ns(r["timestamp"]) for r in raw if r["type"] == "response_item"
               and r["payload"].get("phase") == "final_answer"]
    for (first, last), (s, e) in zip(truth, m.select("start_ns", "end_ns").iter_rows(), strict=True):
        assert s <= first and e >= last  # holds the response's items
        assert e - s < 10 * 10**9  # no response of this session took 10 s
        assert not any(s < u < e for u in users)  # never across a user message
        assert not any(s <= a < e for a in answers if a < last)  # never across an earlier final answer
    w = tr.spans.filter(pl.col("kind") == "wait").sort("start_ns")
    reasons = [json.loads(a)["agentprof.wait.reason"] for a in w.get_column("attributes").to_list()]
    assert reasons == ["user_turn"] * 3
    ends = w.get_column("end_ns").to_list()
    assert all(u - 10**7 <= e <= u for e, u in zip(ends, users, strict=True))  # the turn opens with the message
    starts = w.get_column("start_ns").to_list()
    assert starts[1:] == [pytest.approx(a, abs=10**7) for a in answers[:2]]  # from the answer
    if layout == "with token_count":
        assert m.get_column("input_tokens").to_list() == [
            r["payload"]["info"]["last_token_usage"]["input_tokens"] for r in raw if _ev(r, "token_count")]


def test_an_escalated_command_waits_for_approval_until_it_runs(tmp_path):
    """The issue's 17-minute approval: a command asking to run outside the sandbox
    (``sandbox_permissions: "require_escalated"``, the documented escalation request) returns its output 17 min
    after the model asked for it, with a 5 s ``Wall time``: 17 min of ``approval``, 5 s of tool."""
    args = {"cmd": "npm install", "sandbox_permissions": "require_escalated",
            "justification": "Do you want to install the dependencies?"}
    recs = [
        _rec("00.000", "session_meta", {"id": "s-esc", "timestamp": "2026-02-23T11:41:00.000Z"}),
        _rec("01.000", "response_item", {"type": "message", "role": "user",
                                         "content": [{"type": "input_text", "text": "install"}]}),
        _rec("03.000", "response_item", {"type": "function_call", "name": "exec_command",
                                         "arguments": json.dumps(args), "call_id": "c1"}),
    ]
    out = {"timestamp": "2026-02-23T11:58:08.000Z", "type": "response_item", "payload": {
        "type": "function_call_output", "call_id": "c1",
        "output": "Chunk ID: 1\nWall time: 5.0000 seconds\nProcess exited with code 0\nOutput:\nok\n"}}
    p = tmp_path / "rollout-esc.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in [*recs, out]))
    tr = load_any(p)
    w = tr.spans.filter(pl.col("kind") == "wait").filter(pl.col("attributes").str.contains('"approval"'))
    assert w.height == 1
    assert (w.get_column("end_ns")[0] - w.get_column("start_ns")[0]) / 1e9 == pytest.approx(17 * 60)
    tool = tr.spans.filter(pl.col("kind") == "tool").row(0, named=True)
    assert tool["timing"] == "measured" and (tool["end_ns"] - tool["start_ns"]) / 1e9 == pytest.approx(5.0)
    from agentprof.analysis import analyze

    t = analyze(tr).to_dict()["time"]
    assert t["waits_by_reason"]["approval"] == pytest.approx(17 * 60)
    assert t["agent_active_s"] < 30
