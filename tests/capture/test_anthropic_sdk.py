"""The anthropic SDK against the loopback server: additive cache accounting normalized to the OTel meaning.

Anthropic reports ``input_tokens`` *without* the cached part; the trace's ``input_tokens`` must be the whole
prompt (``input + cache_read + cache_creation``), which is what the server counted before splitting it.
"""

from __future__ import annotations

import asyncio

import pytest

import agentprof
from agentprof.demo.model_server import ErrorReply, Latency, ModelServer, Reply, ToolCall

from ..lazy_import import LazyModule
from .capture_helpers import attrs, load, of_kind

anthropic = LazyModule("anthropic")  # imported by the first test that uses it

TTFT = 0.04
SYSTEM = [{"type": "text", "text": "You review code carefully and explain briefly. " * 20,
           "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "grep", "description": "search", "input_schema": {
    "type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}]


def script(req):
    if not req.tool_results:
        return Reply(text="Let me search.", tool_calls=[ToolCall("grep", {"pattern": "TODO"})])
    return Reply(text=f"Found {req.tool_results[-1]} matches.")


@agentprof.tool
def grep(pattern):
    text = "TODO one\nnothing\nTODO two\n"
    return str(sum(pattern in line for line in text.splitlines()))


def check(models, log):
    assert len(models) == len(log)
    for row, served in zip(models, log, strict=True):
        assert row["provider"] == "anthropic"
        assert served.usage["input_tokens"] == served.prompt_tokens - served.cached_tokens - served.cache_write_tokens
        assert row["input_tokens"] == served.prompt_tokens  # OTel meaning: cached included
        assert row["cache_read_tokens"] == served.cached_tokens
        assert row["cache_write_tokens"] == served.cache_write_tokens
        assert row["output_tokens"] == served.output_tokens
        assert row["stream"] is served.stream


def agent_turns(client, stream_style):
    messages = [{"role": "user", "content": "Count the TODOs."}]
    for _ in range(3):
        kwargs = dict(model="claude-sonnet-4-6", max_tokens=512, system=SYSTEM, tools=TOOLS, messages=messages)
        if stream_style == "helper":
            with client.messages.stream(**kwargs) as s:
                msg = s.get_final_message()
        elif stream_style == "raw":
            blocks, text, tool = [], [], None
            for ev in client.messages.create(stream=True, **kwargs):
                if ev.type == "content_block_start" and ev.content_block.type == "tool_use":
                    tool = {"type": "tool_use", "id": ev.content_block.id, "name": ev.content_block.name, "json": ""}
                elif ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                    text.append(ev.delta.text)
                elif ev.type == "content_block_delta" and ev.delta.type == "input_json_delta":
                    tool["json"] += ev.delta.partial_json
            blocks.append({"type": "text", "text": "".join(text)})
            if tool:
                blocks.append({"type": "tool_use", "id": tool["id"], "name": tool["name"],
                               "input": agentprof.parse_json(tool["json"])})
            msg = type("M", (), {"content": blocks, "stop_reason": "tool_use" if tool else "end_turn"})()
        else:
            msg = client.messages.create(**kwargs)
        content = [b if isinstance(b, dict) else b.model_dump(exclude_none=True) for b in msg.content]
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            return content[0]["text"]
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u["id"], "content": grep(**u["input"])} for u in uses]})
    return None


@pytest.mark.parametrize("style", ["plain", "raw", "helper"])
def test_tool_agent_cache_accounting(tmp_path, style):
    with ModelServer(script=script, latency=lambda *a: Latency(TTFT, 0.0005)) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
        with agentprof.profile(f"claude-{style}", out=tmp_path) as run:
            answer = agent_turns(client, style)
        log = list(server.log)
    assert answer == "Found 2 matches."
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    assert len(models) == 2 and len(of_kind(rows, "tool")) == 1
    assert len(of_kind(rows, "parse")) == (1 if style == "raw" else 0)
    check(models, log)
    # first call writes the cached system prompt, the second reads it back
    assert log[0].cache_write_tokens > 0 and log[0].cached_tokens == 0
    assert log[1].cached_tokens > 0
    assert models[1]["cache_read_tokens"] == log[1].cached_tokens
    for m in models:
        assert m["name"] == "chat claude-sonnet-4-6"
        if style == "plain":
            assert m["ttft_s"] is None
        else:
            assert TTFT <= m["ttft_s"] < (m["end_ns"] - m["start_ns"]) / 1e9
            assert attrs(m)["gen_ai.response.finish_reasons"]


def test_async_messages(tmp_path):
    with ModelServer(script=lambda req: Reply(text="hello from the async side"),
                     latency=lambda *a: Latency(TTFT, 0.0)) as server:
        client = anthropic.AsyncAnthropic(base_url=server.base_url, api_key="test", max_retries=0)

        @agentprof.profile(out=tmp_path)
        async def async_agent():
            kwargs = dict(model="claude-haiku-4-5", max_tokens=64, system=SYSTEM,
                          messages=[{"role": "user", "content": "hi"}])
            a = await client.messages.create(**kwargs)
            b = []
            async for ev in await client.messages.create(stream=True, **kwargs):
                b.append(ev.type)
            async with client.messages.stream(**kwargs) as s:
                c = await s.get_final_text()
            return a.content[0].text, b, c

        a, b, c = asyncio.run(async_agent())
        log = list(server.log)
    assert a == c == "hello from the async side" and b[-1] == "message_stop"
    files = list(tmp_path.glob("async_agent-*.jsonl"))
    assert len(files) == 1
    _, rows = load(files[0])
    models = of_kind(rows, "model")
    check(models, log)
    assert [m["ttft_s"] is not None for m in models] == [False, True, True]


def test_error_recorded_and_reraised(tmp_path):
    with ModelServer(script=lambda req: ErrorReply(400, "max_tokens too large")) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
        with pytest.raises(anthropic.BadRequestError), agentprof.profile("err", out=tmp_path) as run:
            client.messages.create(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    _, rows = load(run.path)
    (model,) = of_kind(rows, "model")
    assert model["status"] == "error" and model["error_type"] == "anthropic.BadRequestError"
