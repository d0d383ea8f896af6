"""Per-call prompt redundancy and provider cache reads: hand-made prompts with known overlaps, and the shared
Claude Code, Codex, OpenHands and mini-swe-agent samples checked against figures computed here from the raw
files."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest

from agentprof.analysis import analyze
from agentprof.analysis.calls import model_calls, rechain
from agentprof.analysis.redundancy import common_prefix

from .analysis_helpers import SAMPLES, TraceBuilder


def _calls(trace):
    return analyze(trace).calls.to_dicts()


def test_append_only_session():
    p1 = list(range(200))
    p2 = p1 + list(range(1000, 1100))
    p3 = p2 + list(range(2000, 2050))
    b = TraceBuilder()
    b.session("s", 0, 10)
    for i, p in enumerate((p1, p2, p3)):
        b.model("s", i, i + 0.5, tokens=p, input_tokens=len(p) + 20, cache_read=[0, 150, 300][i])
    c = _calls(b.trace())
    assert c[0]["prefix_reuse_prev"] is None and c[0]["best_reuse"] is None
    # full 64-token blocks of the previous prompt are reused; its partial tail block is not
    assert c[1]["prefix_blocks_prev"] == 3 and c[1]["prefix_reuse_prev"] == pytest.approx(192 / 300)
    assert c[2]["prefix_blocks_prev"] == 4 and c[2]["prefix_reuse_prev"] == pytest.approx(256 / 350)
    assert c[2]["best_reuse"] == c[2]["prefix_reuse_prev"]
    assert c[1]["provider_cache_read_share"] == pytest.approx(150 / 320)
    reusable = round(192 / 300 * 320)
    assert c[1]["reusable_tokens"] == reusable and c[1]["gap_tokens"] == reusable - 150


def test_best_earlier_call_beats_previous_call_when_prompts_alternate():
    a = list(range(0, 256))
    bb = list(range(5000, 5256))
    b = TraceBuilder()
    b.session("s", 0, 10)
    for i, p in enumerate((a, bb, a + list(range(9000, 9064)), bb + list(range(7000, 7128)))):
        b.model("s", i, i + 0.5, tokens=p)
    c = _calls(b.trace())
    assert c[2]["prefix_reuse_prev"] == 0 and c[2]["best_reuse"] == pytest.approx(256 / 320)
    assert c[3]["prefix_reuse_prev"] == 0 and c[3]["best_reuse"] == pytest.approx(256 / 384)


def test_content_ids_are_rechained_so_a_changed_block_breaks_the_prefix():
    # ids that name a block's content only (like kv-cache-tester's): block 1 changes, block 2 is the same
    b = TraceBuilder(hash_scheme="kv-cache-tester")
    b.session("s", 0, 10)
    b.model("s", 0, 1, hashes=[10, 11, 12], prompt_tokens=192)
    b.model("s", 2, 3, hashes=[10, 99, 12, 13], prompt_tokens=256)
    b.model("s", 4, 5, hashes=[10, 11, 12, 14], prompt_tokens=256)
    c = _calls(b.trace())
    assert c[1]["prefix_blocks_prev"] == 1  # not 2: position 2 matches but its prefix does not
    assert c[2]["prefix_blocks_prev"] == 1 and c[2]["best_blocks"] == 3


def test_rechained_keys_keep_exactly_the_prefix_relations_of_chained_hashes(kvct_trace):
    cb = model_calls(kvct_trace)
    rk = rechain(cb.ids, cb.offsets)
    rows = np.arange(cb.calls.height)
    prev = rows - 1
    prev[cb.calls["line_index"].to_numpy() == 0] = -1
    with_ids = common_prefix(rk, cb.offsets, rows, prev)
    # direct, slow reference: compare raw ids position by position
    ref = []
    for i in rows.tolist():
        p = int(prev[i])
        a = cb.ids[cb.offsets[i]:cb.offsets[i + 1]].tolist()
        b = cb.ids[cb.offsets[p]:cb.offsets[p + 1]].tolist() if p >= 0 else []
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        ref.append(n)
    assert with_ids.tolist() == ref


def test_zero_length_prompt_has_no_share():
    b = TraceBuilder()
    b.session("s", 0, 10)
    b.model("s", 0, 1, hashes=[], prompt_tokens=0)
    b.model("s", 1, 2, hashes=[], prompt_tokens=0)
    c = _calls(b.trace())
    assert c[1]["prefix_reuse_prev"] is None and c[1]["best_reuse"] is None


# --- shared samples: provider cache read share from the raw files ---------------------------------------------


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _line_calls(analysis, line_prefix: str):
    c = analysis.calls
    return c.filter(c["line_id"].str.starts_with(line_prefix)).sort("line_index")


def test_claude_code_cache_read_share_matches_the_raw_usage(sample_analysis):
    a = sample_analysis("claude-code")
    for name, prefix in (("258c7280-ae70-4798-800f-63464d01a85d.jsonl", "258c7280"),
                         ("session-3fe1b6bc.jsonl", "3fe1b6bc")):
        seen, raw = set(), []
        for line in (SAMPLES / "claude-code" / name).read_text().splitlines():
            r = json.loads(line)
            if r.get("type") != "assistant" or r["message"]["id"] in seen:
                continue
            seen.add(r["message"]["id"])
            u = r["message"]["usage"]
            total = u["input_tokens"] + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0)
            raw.append(u.get("cache_read_input_tokens", 0) / total)
        line = _line_calls(a, prefix).filter(~_line_calls(a, prefix)["role"].is_in(["subagent"]))
        ours = line["provider_cache_read_share"].to_list()
        assert len(ours) == len(raw)
        assert ours == pytest.approx(raw)
        # every call after the first has a prefix-reuse figure; late calls are append-only
        reuse = line["prefix_reuse_prev"].to_list()
        assert reuse[0] is None and all(v is not None for v in reuse[1:])
        assert float(np.median(reuse[11:])) > 0.95


def test_codex_cache_read_share_matches_token_count_events(sample_analysis):
    a = sample_analysis("codex")
    path = next((SAMPLES / "codex").glob("*.jsonl"))
    raw = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        p = r["payload"]
        if r["type"] == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            u = p["info"]["last_token_usage"]
            raw.append(u["cached_input_tokens"] / u["input_tokens"])
    ours = a.calls.sort("line_index")["provider_cache_read_share"].to_list()
    assert ours == pytest.approx(raw)
    assert a.calls["prefix_reuse_prev"].null_count() == 1


def test_openhands_cache_read_share_where_the_backend_reported_it(sample_analysis):
    a = sample_analysis("openhands")
    files = sorted((SAMPLES / "openhands" / "django__django-10554").glob("*.json"),
                   key=lambda f: json.loads(f.read_text())["timestamp"])
    raw = []
    for f in files:
        u = json.loads(f.read_text())["response"]["usage"]
        raw.append(u["cache_read_input_tokens"] / u["prompt_tokens"] if "cache_read_input_tokens" in u else None)
    ours = a.calls.sort("end_ns")["provider_cache_read_share"].to_list()
    assert [v is None for v in ours] == [v is None for v in raw]
    assert [v for v in ours if v is not None] == pytest.approx([v for v in raw if v is not None])


def test_mini_swe_agent_token_reuse_tracks_character_reuse(sample_analysis):
    """Token-level prefix reuse (agentprof) against a character-level prefix share computed from the raw
    messages (the method of the published 0.93-0.97 figures): medians agree within 3 points."""
    a = sample_analysis("mini-swe-agent")
    doc = json.loads(next((SAMPLES / "mini-swe-agent").glob("*.traj.json")).read_text())
    msgs = doc["messages"]
    prompts, shares = [], []
    for i, m in enumerate(msgs):
        if m["role"] == "assistant":
            prompts.append("\n".join(f"{x['role']}: {x['content']}" for x in msgs[:i]))
            u = m["extra"]["response"]["usage"]
            shares.append(u["prompt_tokens_details"]["cached_tokens"] / u["prompt_tokens"])
    char = []
    for prev, cur in zip(prompts, prompts[1:], strict=False):
        n = 0
        lim = min(len(prev), len(cur))
        while n < lim and prev[n] == cur[n]:
            n += 1
        char.append(n / len(cur))
    ours = a.calls.sort("line_index")
    assert ours["provider_cache_read_share"].to_list() == pytest.approx(shares)
    tok = ours["prefix_reuse_prev"].to_list()[1:]
    assert len(tok) == len(char)
    assert abs(float(np.median(tok)) - float(np.median(char))) < 0.03
