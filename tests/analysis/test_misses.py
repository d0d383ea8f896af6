"""Cache-miss explainer: each cause on a hand-made prompt pair, and the model-switch, compaction and idle-gap
misses of the shared samples, located in the raw files by the tests themselves."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import pytest

from agentprof.analysis import analyze
from agentprof.analysis.misses import FIXES
from agentprof.importers import load_any

from .analysis_helpers import SAMPLES, TraceBuilder, segmented_prompt

TOOLS = list(range(10_000, 10_300))
SYSTEM = list(range(20_000, 20_200))
SYSTEM2 = list(range(20_000, 20_100)) + list(range(29_000, 29_100))  # e.g. a timestamp changed mid-prompt


def _msg(seed: int, n: int = 300) -> list[int]:
    return list(range(seed * 1000, seed * 1000 + n))


def _pair(first, second, *, model2="claude-sonnet-4-5", gap=5.0, cache2=None, input2=None, attrs1=None):
    """Two calls of one session built from (kind, role, tokens) parts."""
    b = TraceBuilder()
    b.session("s", 0, 10_000)
    t1, s1 = segmented_prompt(first)
    t2, s2 = segmented_prompt(second)
    b.model("s", 0, 1, tokens=t1, segments=s1, model="claude-sonnet-4-5", input_tokens=len(t1) + 10,
            cache_read=0, **(attrs1 or {}))
    b.model("s", 1 + gap, 2 + gap, tokens=t2, segments=s2, model=model2,
            input_tokens=input2 if input2 is not None else len(t2) + 10, cache_read=cache2)
    a = analyze(b.trace())
    return a, [m for m in a.cache_misses if m["line_index"] == 1]


BASE = [("tools", "", TOOLS), ("system", "system", SYSTEM), ("message", "user", _msg(1)),
        ("message", "assistant", _msg(2)), ("message", "user", _msg(3))]


def _top(records):
    assert len(records) == 1
    r = records[0]
    causes = [c["cause"] for c in r["causes"]]
    assert all(c["fix"] == FIXES[c["cause"]] for c in r["causes"])
    assert [c["score"] for c in r["causes"]] == sorted((c["score"] for c in r["causes"]), reverse=True)
    return r, causes


def test_system_prompt_change():
    second = [BASE[0], ("system", "system", SYSTEM2), *BASE[2:], ("message", "assistant", _msg(4))]
    r, causes = _top(_pair(BASE, second)[1])
    assert causes[0] == "system_changed"
    assert r["location"]["where"] == "system prompt" and r["trigger"][0] == "prefix_break"
    assert r["first_diverging_block"] == (300 + 100) // 64  # the first block holding a changed token


def test_tool_set_change():
    second = [("tools", "", TOOLS[:200] + list(range(50_000, 50_150))), *BASE[1:]]
    r, causes = _top(_pair(BASE, second)[1])
    assert causes[0] == "tools_changed" and r["location"]["where"] == "tool definitions"


def test_history_edit_names_the_message():
    second = [*BASE[:3], ("message", "assistant", _msg(2)[:100] + _msg(7, 50)), BASE[4], ("message", "user", _msg(5))]
    r, causes = _top(_pair(BASE, second)[1])
    assert causes[0] == "history_edited"
    assert r["location"]["where"] == "history message 1" and r["location"]["message_index"] == 1


def test_compaction_and_truncation_are_told_apart():
    long = [*BASE[:2]] + [("message", "user" if i % 2 else "assistant", _msg(10 + i, 400)) for i in range(10)]
    compacted = [*BASE[:2], ("message", "user", _msg(99, 300))]
    r, causes = _top(_pair(long, compacted)[1])
    assert causes[0] == "history_compacted"
    truncated = [*BASE[:2]] + long[6:] + [("message", "user", _msg(60))]
    r, causes = _top(_pair(long, truncated)[1])
    assert causes[0] == "history_truncated"


def test_model_switch_explains_a_provider_miss_on_an_unchanged_prefix():
    second = [*BASE, ("message", "assistant", _msg(4))]
    r, causes = _top(_pair(BASE, second, model2="claude-opus-4-1", cache2=0)[1])
    assert r["trigger"] == ["provider_miss"] and causes[0] == "model_switch"


def test_idle_gap_beyond_the_ttl_and_the_one_hour_cache():
    second = [*BASE, ("message", "assistant", _msg(4))]
    r, causes = _top(_pair(BASE, second, gap=400, cache2=0)[1])
    assert causes[0] == "idle_gap_ttl" and r["idle_gap_s"] > 300 and r["cache_ttl_s"] == 300
    # the same pause with 1-hour cache writes in the conversation is within the TTL
    r, causes = _top(_pair(BASE, second, gap=400, cache2=0, attrs1={"agentprof.usage.cache_write_1h": 900})[1])
    assert "idle_gap_ttl" not in causes and causes[0] == "provider_miss" and r["cache_ttl_s"] == 3600


def test_prompt_below_the_provider_minimum():
    small = [("system", "system", SYSTEM), ("message", "user", _msg(1, 300))]
    second = [*small, ("message", "assistant", _msg(2, 200))]
    r, causes = _top(_pair(small, second, cache2=0)[1])  # 500 then 700 tokens; Sonnet 4.5 caches from 1024
    assert causes[0] == "below_minimum"


def test_provider_miss_without_textual_change():
    second = [*BASE, ("message", "assistant", _msg(4))]
    r, causes = _top(_pair(BASE, second, cache2=0)[1])
    assert causes == ["provider_miss"]
    assert r["gap_tokens"] == r["reusable_tokens"] > 0


def test_a_hit_and_a_tail_only_break_are_not_misses():
    second = [*BASE, ("message", "assistant", _msg(4))]
    a, recs = _pair(BASE, second, cache2=1300)
    assert recs == [] and a.calls["miss_cause"].to_list() == [None, None]
    # only the previous prompt's last full block differs (a re-tokenized boundary): not listed
    last = [*BASE[:4], ("message", "user", _msg(3)[:-10] + [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])]
    assert _pair(BASE, last)[1] == []


# --- shared samples --------------------------------------------------------------------------------------------


def _causes(a, session_suffix: str | None = None):
    out = {}
    for m in a.cache_misses:
        if session_suffix is None or m["session_id"].endswith(session_suffix):
            out[(m["session_id"], m["line_index"])] = m
    return out


def test_openhands_model_switch_misses(sample_analysis):
    """The LiteLLM proxy alternated between Anthropic's API (which reports cache reads) and Bedrock: a call back
    on Anthropic after Bedrock calls reads only the shared system prompt."""
    a = sample_analysis("openhands")
    docs = [json.loads(f.read_text()) for f in (SAMPLES / "openhands" / "django__django-10554").glob("*.json")]
    docs.sort(key=lambda d: d["timestamp"])
    attempts, cur = [], []
    for d in docs:
        if cur and len(d["messages"]) < len(cur[-1]["messages"]):  # the runtime restarted
            attempts.append(cur)
            cur = []
        cur.append(d)
    attempts.append(cur)
    assert [len(x) for x in attempts] == [5, 35]
    expected = set()
    for k, d in enumerate(attempts[1]):
        u = d["response"]["usage"]
        prev_model = attempts[1][k - 1]["response"]["model"] if k else None
        if k and d["response"]["model"] != prev_model and "cache_read_input_tokens" in u \
                and u["cache_read_input_tokens"] < 0.5 * u["prompt_tokens"]:
            expected.add(k)
    assert len(expected) == 5
    found = {m["line_index"] for m in a.cache_misses
             if m["session_id"].endswith("attempt-2") and m["causes"][0]["cause"] == "model_switch"}
    assert found == expected
    for m in a.cache_misses:
        if m["line_index"] in expected and m["session_id"].endswith("attempt-2"):
            assert "bedrock" in m["causes"][0]["detail"] or "anthropic." in m["causes"][0]["detail"]


def test_claude_code_compaction_miss(sample_analysis):
    a = sample_analysis("claude-code")
    seen, boundary_at = set(), None
    for line in (SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary":
            boundary_at = len(seen)  # calls before the boundary
        elif r.get("type") == "assistant":
            seen.add(r["message"]["id"])
    assert boundary_at == 102
    hits = [m for m in a.cache_misses if m["line_index"] == boundary_at and m["session_id"].startswith("258c7280")]
    assert len(hits) == 1
    m = hits[0]
    assert m["causes"][0]["cause"] == "history_compacted" and "prefix_break" in m["trigger"]
    assert m["location"]["where"].startswith("history message")
    assert m["prompt_tokens"] < 0.5 * m["previous_prompt_tokens"]


def test_codex_idle_gap_miss(sample_analysis):
    a = sample_analysis("codex")
    path = next((SAMPLES / "codex").glob("*.jsonl"))
    stamps, cached = [], []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        p = r["payload"]
        if r["type"] == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            stamps.append(datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")).timestamp())
            cached.append(p["info"]["last_token_usage"]["cached_input_tokens"])
    expected = {k for k in range(1, len(stamps)) if stamps[k] - stamps[k - 1] > 300 and cached[k] == 0}
    assert expected == {3}
    found = {m["line_index"] for m in a.cache_misses if m["causes"][0]["cause"] == "idle_gap_ttl"}
    assert found == expected
    m = next(m for m in a.cache_misses if m["line_index"] == 3)
    assert m["idle_gap_s"] > 300 and m["cached_tokens"] == 0


def test_claude_code_one_hour_cache_keeps_a_long_pause_warm(sample_analysis):
    """258c7280 writes 1-hour cache entries; its ~10-minute pause before call 151 is no TTL miss."""
    a = sample_analysis("claude-code")
    for m in a.cache_misses:
        if m["session_id"].startswith("258c7280"):
            assert all(c["cause"] != "idle_gap_ttl" for c in m["causes"])
            assert m["cache_ttl_s"] == 3600
    line = a.calls.filter(a.calls["line_id"].str.starts_with("258c7280") & (a.calls["line_index"] == 151))
    assert line["miss_cause"].to_list() == [None]


def _kvct_trace(requests: list[tuple[float, str, list[int]]], tool_tokens: int = 8014, system_tokens: int = 1210):
    """A kv-cache-tester-like session: (start s, model, block ids) per request, tools+system recorded."""
    b = TraceBuilder(hash_scheme="kv-cache-tester")
    b.session("kv", 0, 1000, **{"agentprof.prompt.tool_tokens": tool_tokens,
                                "agentprof.prompt.system_tokens": system_tokens})
    for t, model, ids in requests:
        n = 64 * len(ids) + 20
        b.model("kv", t, t + 3, hashes=ids, prompt_tokens=n, model=model, input_tokens=n)
    return b.trace()


def test_interleaved_streams_are_judged_against_the_prompt_they_extend():
    """Parallel requests of two agents logged in one conversation (as kv-cache-tester trace_0303: an Opus
    stream and a Haiku stream sharing the tool prefix, requests at the same second). A request that repeats
    an earlier request of its own stream is not a prefix break, and no model switch is claimed for it."""
    a = list(range(1, 193))                                   # opus prompt
    h = list(range(1, 126)) + list(range(900, 966))           # haiku: same first 125 blocks
    a2, h2 = a + [2000], h + [3000]
    tr = _kvct_trace([(0, "opus", a), (0, "haiku", h), (4, "haiku", h2), (5, "opus", a2)])
    misses = analyze(tr).cache_misses
    assert [m["line_index"] for m in misses] == [1]           # only the haiku stream's first request
    assert all(c["cause"] != "model_switch" or m["line_index"] == 1 for m in misses for c in m["causes"])


def test_a_block_across_the_tools_and_system_boundary_names_both():
    """Divergence in the block that holds the last tool tokens and the first system tokens (tools end at
    8014, the block covers 8000-8063): either may have changed, neither is claimed with certainty."""
    a = list(range(1, 193))
    h = list(range(1, 126)) + list(range(900, 966))           # first diverging block 125 = tokens 8000-8063
    r, causes = _top([m for m in analyze(_kvct_trace([(0, "opus", a), (10, "opus", h)])).cache_misses])
    assert r["location"]["where"] == "tool definitions or system prompt"
    assert set(causes[:2]) == {"tools_changed", "system_changed"} and {c["score"] for c in r["causes"][:2]} == {0.6}
    inside = list(range(1, 101)) + list(range(900, 990))     # block 100 = tokens 6400-6463: inside the tools
    r, causes = _top([m for m in analyze(_kvct_trace([(0, "opus", a), (10, "opus", inside)])).cache_misses])
    assert r["location"]["where"] == "tool definitions" and causes[0] == "tools_changed"


def test_claude_code_text_turn_with_thinking_is_named(sample_analysis):
    """In 258c7280 the provider read only the tools + system breakpoint (21,460 tokens) on the calls whose
    triggering user turn holds text (an interruption, a <task-notification>) in a conversation with thinking
    blocks; the explainer names that, and does not name it for the calls triggered by tool results alone."""
    a = sample_analysis("claude-code")
    path = SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    first_of_message: dict[str, int] = {}
    for k, r in enumerate(recs):
        if r.get("type") == "assistant" and r["message"].get("model") != "<synthetic>":
            first_of_message.setdefault(r["message"]["id"], k)
    expected_lines = set()
    for k in first_of_message.values():
        usage = recs[k]["message"]["usage"]
        total = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
        if usage["cache_read_input_tokens"] >= 0.5 * total:
            continue
        j = k - 1  # the user records right before the message (its trigger)
        kinds = set()
        while j >= 0 and recs[j].get("type") in ("user", "progress", "queue-operation", "system"):
            if recs[j].get("type") == "user":
                content = recs[j]["message"]["content"]
                kinds |= {"text"} if isinstance(content, str) else {b.get("type") for b in content}
            j -= 1
        if kinds and kinds != {"tool_result"} and usage["cache_read_input_tokens"] > 0:
            expected_lines.add(k + 1)
    assert expected_lines  # the sample holds such calls
    trace = load_any([path])
    line_of = {sid: json.loads(attrs).get("agentprof.source.line")
               for sid, attrs in zip(trace.spans["span_id"], trace.spans["attributes"], strict=True) if attrs}
    named = {line_of[m["span_id"]] for m in a.cache_misses if m["session_id"].startswith("258c7280")
             and not m["session_id"].endswith("subagents") and m["span_id"] in line_of
             and any(c["cause"] == "thinking_stripped" for c in m["causes"])}
    assert named == expected_lines
    for m in a.cache_misses:
        if any(c["cause"] == "thinking_stripped" for c in m["causes"]):
            assert m["cached_tokens"] < 0.5 * m["reusable_tokens"]


FINAL = {"gen_ai.response.finish_reasons": ["stop"]}


def test_a_second_run_in_the_same_session_is_a_new_conversation_not_a_miss():
    first = [*BASE[:2], ("message", "user", _msg(1)), ("message", "assistant", _msg(2)),
             ("message", "tool", _msg(3, 2000))]
    second = [*BASE[:2], ("message", "user", _msg(9))]
    a, records = _pair(first, second, attrs1=FINAL, cache2=500)
    assert records == []
    note = [d for d in a.diagnostics if d["kind"] == "new_conversation"]
    assert len(note) == 1 and "call(s) start a new conversation" in note[0]["message"] and "calls 2" in note[0]["message"]
    assert a.calls.get_column("miss_cause").to_list() == [None, None]
    # the same prompts while the previous call asked for a tool (mid-run): a compaction, a miss with its fix
    _, records = _pair(first, second, attrs1={"gen_ai.response.finish_reasons": ["tool_calls"]}, cache2=500)
    assert _top(records)[1][0] == "history_compacted"
    # a new first message after a model reply is kept (an edited history, not a new run)
    _, records = _pair(first, [*BASE[:2], ("message", "user", _msg(9)), ("message", "assistant", _msg(2))],
                       attrs1=FINAL)
    assert records and records[0]["causes"][0]["cause"] != "new_conversation"


def test_two_openai_agents_runs_in_one_profile(tmp_path):
    """A real openai-agents agent run twice in one profile against the loopback server: the second run's first
    call is a new conversation, not a cache miss."""
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    import agentprof
    from agentprof.demo.model_server import ModelServer, Reply, ToolCall

    def script(req):
        if not req.tool_results:
            return Reply(tool_calls=[ToolCall("lookup", {"city": "Oslo"}, id="c1")])
        return Reply(text="done " * 40)

    def lookup(city: str) -> str:
        """Facts about a city."""
        return f"{city}: " + "fact " * 400

    with ModelServer(script=script) as server:
        agents.set_trace_processors([])
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        model = agents.OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
        agent = agents.Agent(name="helper", instructions="Use the tool. " * 150, model=model,
                             tools=[agents.function_tool(lookup)])

        async def go():
            await agents.Runner.run(agent, "tell me about Oslo " * 20)
            await agents.Runner.run(agent, "and about Bergen " * 20)

        with agentprof.profile("two-runs", out=tmp_path) as run:
            asyncio.run(go())
    a = analyze(load_any([run.path]))
    assert a.n_model_calls == 4 and a.cache_misses == []
    note = [d for d in a.diagnostics if d["kind"] == "new_conversation"]
    assert len(note) == 1 and "calls 3" in note[0]["message"]
