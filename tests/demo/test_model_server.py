"""The loopback model server: wire formats, both cache-accounting conventions, latency model, errors."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import openai
import pytest

from agentprof.demo.model_server import ErrorReply, Latency, ModelServer, Reply, ToolCall, count_pieces

from ..lazy_import import LazyModule

anthropic = LazyModule("anthropic")  # imported by the first test that uses it


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def sse(text):
    """(event, data) pairs of an SSE body."""
    out = []
    for block in text.strip().split("\n\n"):
        event = next((x[7:] for x in block.splitlines() if x.startswith("event: ")), None)
        data = next(x[6:] for x in block.splitlines() if x.startswith("data: "))
        out.append((event, data if data == "[DONE]" else json.loads(data)))
    return out


LONG = "Please review this long request carefully. " * 30


def test_chat_stream_usage_chunk_only_when_asked():
    with ModelServer(script=lambda r: Reply(text="two words")) as s:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        _, ctype, plain = post(s.openai_base_url + "/chat/completions", body)
        _, _, with_usage = post(s.openai_base_url + "/chat/completions",
                                {**body, "stream_options": {"include_usage": True}})
    assert ctype == "text/event-stream"
    events = sse(plain)
    assert events[-1][1] == "[DONE]" and all("usage" not in e for _, e in events[:-1])
    events = sse(with_usage)
    final = events[-2][1]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == len(count_pieces("two words"))
    assert "".join(e["choices"][0]["delta"].get("content") or "" for _, e in events[:-2] if e["choices"]) == \
        "two words"


def test_openai_cached_tokens_are_a_subset():
    with ModelServer(cache_block=8) as s:
        client = openai.OpenAI(base_url=s.openai_base_url, api_key="t", max_retries=0)
        msgs = [{"role": "user", "content": LONG}]
        a = client.chat.completions.create(model="m", messages=msgs)
        b = client.chat.completions.create(model="m", messages=msgs + [{"role": "assistant", "content": "ok"},
                                                                       {"role": "user", "content": "more"}])
        other_model = client.chat.completions.create(model="n", messages=msgs)
    assert a.usage.prompt_tokens_details.cached_tokens == 0
    cached = b.usage.prompt_tokens_details.cached_tokens
    assert cached % 8 == 0 and a.usage.prompt_tokens - 8 < cached <= a.usage.prompt_tokens
    assert b.usage.prompt_tokens > a.usage.prompt_tokens
    assert other_model.usage.prompt_tokens_details.cached_tokens == 0  # caches are per model
    assert s.log[1].cached_tokens == cached


def test_anthropic_cache_is_additive_and_needs_cache_control():
    with ModelServer(cache_block=8) as s:
        client = anthropic.Anthropic(base_url=s.base_url, api_key="t", max_retries=0)
        marked = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
        first = client.messages.create(model="c", max_tokens=10, system=marked, messages=[{"role": "user", "content": "a"}])
        second = client.messages.create(model="c", max_tokens=10, system=marked, messages=[{"role": "user", "content": "b"}])
        unmarked = client.messages.create(model="c", max_tokens=10, system=LONG, messages=[{"role": "user", "content": "a"}])
    u1, u2 = first.usage, second.usage
    assert u1.cache_read_input_tokens == 0 and u1.cache_creation_input_tokens > 0
    assert u2.cache_read_input_tokens > 0
    for u, served in zip((u1, u2), s.log[:2], strict=True):
        total = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
        assert total == served.prompt_tokens  # input_tokens excludes both cache figures
    assert unmarked.usage.cache_read_input_tokens == 0 and unmarked.usage.cache_creation_input_tokens == 0


def test_anthropic_event_stream_order():
    with ModelServer(script=lambda r: Reply(text="hello there", tool_calls=[ToolCall("f", {"a": 1})])) as s:
        _, _, body = post(s.base_url + "/v1/messages", {"model": "c", "max_tokens": 5, "stream": True,
                                                        "messages": [{"role": "user", "content": "x"}]})
    kinds = [e for e, _ in sse(body)]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    data = [d for _, d in sse(body)]
    assert set(data[0]["message"]["usage"]) == {"input_tokens", "cache_creation_input_tokens",
                                                 "cache_read_input_tokens", "output_tokens"}
    assert data[-2]["delta"]["stop_reason"] == "tool_use"
    assert "".join(d["delta"]["partial_json"] for d in data if d.get("delta", {}).get("type") == "input_json_delta") \
        == '{"a": 1}'


def test_responses_api_and_latency_model():
    lat = Latency(ttft_s=0.15, per_token_s=0.01)
    with ModelServer(script=lambda r: Reply(text="one two three"), latency=lambda *a: lat) as s:
        client = openai.OpenAI(base_url=s.openai_base_url, api_key="t", max_retries=0)
        t0 = time.perf_counter()
        stream = client.responses.create(model="r", input="hi", stream=True)
        first_delta = None
        types = []
        for ev in stream:
            types.append(ev.type)
            if ev.type == "response.output_text.delta" and first_delta is None:
                first_delta = time.perf_counter() - t0
        total = time.perf_counter() - t0
        plain = client.responses.create(model="r", input="hi")
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    n = len(count_pieces("one two three"))
    assert first_delta >= lat.ttft_s and total >= lat.ttft_s + (n - 1) * lat.per_token_s
    assert plain.output_text == "one two three" and plain.usage.output_tokens == n


def test_errors_in_provider_format():
    with ModelServer(script=lambda r: ErrorReply(429, "slow down", "rate_limit_error")) as s:
        oc = openai.OpenAI(base_url=s.openai_base_url, api_key="t", max_retries=0)
        ac = anthropic.Anthropic(base_url=s.base_url, api_key="t", max_retries=0)
        with pytest.raises(openai.RateLimitError, match="slow down"):
            oc.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(anthropic.RateLimitError, match="slow down"):
            ac.messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        with pytest.raises(urllib.error.HTTPError):
            post(s.base_url + "/v1/unknown", {})
    assert s.log == []
