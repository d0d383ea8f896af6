"""Raw-response wrappers (``with_raw_response``, ``with_streaming_response``) of the real SDKs against the
loopback server: the model span carries what a plain ``create`` records, and the agent's objects are unchanged.

Expected token figures are what the server reported for each request (its log), checked in each provider's
convention (OpenAI's cached tokens are part of the prompt; Anthropic's ``input_tokens`` exclude them).
"""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from openai._legacy_response import LegacyAPIResponse

import agentprof
from agentprof.capture.failsafe import CaptureWarning
from agentprof.demo.model_server import Latency, ModelServer, RawReply, Reply

from ..lazy_import import LazyModule
from .capture_helpers import attrs, load, of_kind

anthropic = LazyModule("anthropic")  # imported by the first test that uses it

TTFT = 0.02
MSGS = [{"role": "user", "content": "Explain the build failure in a few words. " * 12}]
SYSTEM = [{"type": "text", "text": "You review code carefully and explain briefly. " * 20,
           "cache_control": {"type": "ephemeral"}}]


def latency(req, prompt, cached, output):
    return Latency(ttft_s=TTFT, per_token_s=0.0)


def script(req):
    return Reply(text="The linker cannot find libfoo; add it to the link line.", reasoning_tokens=3)


def check_usage(models, log, provider):
    """Every model span carries exactly the server's figures for its request, in the OTel meaning."""
    assert len(models) == len(log)
    for row, served in zip(models, log, strict=True):
        assert row["provider"] == provider and row["status"] == "ok"
        assert row["stream"] is served.stream
        assert row["input_tokens"] == served.prompt_tokens  # cached included, whatever the provider's convention
        assert row["cache_read_tokens"] == served.cached_tokens
        assert row["output_tokens"] == served.output_tokens
        if served.api != "responses":  # the Responses API has no finish reason, plain calls record none either
            assert attrs(row)["gen_ai.response.finish_reasons"]
        assert row["model"] == served.model
        if served.stream:
            assert row["ttft_s"] >= TTFT and "agentprof.incomplete" not in attrs(row)
        else:
            assert row["ttft_s"] is None


def check_raw(raw, plain, cls):
    """The agent's raw object is the SDK's own; ``.parse()`` gives one object, equal in content to the plain one."""
    assert type(raw) is cls
    assert raw.headers["content-type"] == "application/json" and raw.status_code == 200
    parsed = raw.parse()
    assert parsed is raw.parse() and type(parsed) is type(plain)
    return parsed


def openai_sync(client):
    """Plain, raw and raw-streamed chat completions and responses; returns (parsed objects, chunks seen)."""
    kw = dict(model="gpt-4o-mini", messages=MSGS)
    plain = client.chat.completions.create(**kw)
    raw = client.chat.completions.with_raw_response.create(**kw)
    chat = check_raw(raw, plain, LegacyAPIResponse)
    assert chat.choices[0].message == plain.choices[0].message and chat.usage.prompt_tokens == plain.usage.prompt_tokens
    sraw = client.chat.completions.with_raw_response.create(stream=True, stream_options={"include_usage": True}, **kw)
    stream = sraw.parse()
    assert stream is sraw.parse() and type(stream) is openai.Stream
    chunks = list(stream)
    rkw = dict(model="gpt-4.1", instructions="Be brief.", input=MSGS[0]["content"])
    rplain = client.responses.create(**rkw)
    rraw = client.responses.with_raw_response.create(**rkw)
    resp = check_raw(rraw, rplain, LegacyAPIResponse)
    assert resp.output_text == rplain.output_text
    events = list(client.responses.with_raw_response.create(stream=True, **rkw).parse())
    assert events[-1].type == "response.completed"
    return [plain, chat, None, rplain, resp, None], [None, None, len(chunks), None, None, len(events)]


async def openai_async(client):
    kw = dict(model="gpt-4o-mini", messages=MSGS)
    plain = await client.chat.completions.create(**kw)
    raw = await client.chat.completions.with_raw_response.create(**kw)
    chat = check_raw(raw, plain, LegacyAPIResponse)
    sraw = await client.chat.completions.with_raw_response.create(stream=True, stream_options={"include_usage": True},
                                                                  **kw)
    stream = sraw.parse()
    assert stream is sraw.parse() and type(stream) is openai.AsyncStream
    chunks = [c async for c in stream]
    rkw = dict(model="gpt-4.1", instructions="Be brief.", input=MSGS[0]["content"])
    rplain = await client.responses.create(**rkw)
    resp = check_raw(await client.responses.with_raw_response.create(**rkw), rplain, LegacyAPIResponse)
    events = [e async for e in (await client.responses.with_raw_response.create(stream=True, **rkw)).parse()]
    await client.close()
    return [plain, chat, None, rplain, resp, None], [None, None, len(chunks), None, None, len(events)]


def check_spans(models, log, parsed, chunks, provider):
    check_usage(models, log, provider)
    for row, obj, n in zip(models, parsed, chunks, strict=True):
        if obj is not None:
            assert attrs(row)["gen_ai.response.id"] == obj.id  # read from the very object the agent got
        if n is not None:
            assert attrs(row)["agentprof.stream.chunks"] == n  # every chunk the agent iterated was seen


def run_sync_and_async(tmp_path, provider, clients, sync_calls, async_calls):
    """Both clients' calls inside one profile against the loopback server: (model span rows, server log)."""
    with ModelServer(script=script, latency=latency) as server:
        sync, aclient = clients(server)
        with agentprof.profile(f"raw-{provider}", out=tmp_path) as run:
            parsed, chunks = sync_calls(sync)
            aparsed, achunks = asyncio.run(async_calls(aclient))
        log = list(server.log)
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    check_spans(models, log, parsed + aparsed, chunks + achunks, provider)
    return models, log


def test_openai_raw_calls_record_what_plain_calls_do(tmp_path):
    models, log = run_sync_and_async(tmp_path, "openai", lambda server: (
        openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0),
        openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)), openai_sync, openai_async)
    # the raw calls repeat the plain call's prompt, so the server served part of it from its cache
    assert log[1].cached_tokens > 0 and models[1]["cache_read_tokens"] == log[1].cached_tokens
    assert log[4].cached_tokens > 0 and models[4]["cache_read_tokens"] == log[4].cached_tokens
    assert models[1]["reasoning_tokens"] == log[1].reasoning_tokens == 3
    assert [m["name"] for m in models[:3]] == ["chat gpt-4o-mini"] * 3


def anthropic_sync(client):
    kw = dict(model="claude-sonnet-4-6", max_tokens=256, system=SYSTEM, messages=MSGS)
    plain = client.messages.create(**kw)
    msg = check_raw(client.messages.with_raw_response.create(**kw), plain, anthropic._response.APIResponse)
    assert msg.content == plain.content
    sraw = client.messages.with_raw_response.create(stream=True, **kw)
    stream = sraw.parse()
    assert stream is sraw.parse() and type(stream) is anthropic.Stream
    events = list(stream)
    assert events[-1].type == "message_stop"
    return [plain, msg, None], [None, None, len(events)]


async def anthropic_async(client):
    kw = dict(model="claude-sonnet-4-6", max_tokens=256, system=SYSTEM, messages=MSGS)
    plain = await client.messages.create(**kw)
    raw = await client.messages.with_raw_response.create(**kw)
    assert type(raw) is anthropic._response.AsyncAPIResponse and raw.headers["content-type"] == "application/json"
    msg = await raw.parse()
    assert msg is await raw.parse() and type(msg) is type(plain) and msg.content == plain.content
    sraw = await client.messages.with_raw_response.create(stream=True, **kw)
    stream = await sraw.parse()
    assert stream is await sraw.parse() and type(stream) is anthropic.AsyncStream
    events = [e async for e in stream]
    await client.close()
    return [plain, msg, None], [None, None, len(events)]


def test_anthropic_raw_calls_record_what_plain_calls_do(tmp_path):
    models, log = run_sync_and_async(tmp_path, "anthropic", lambda server: (
        anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0),
        anthropic.AsyncAnthropic(base_url=server.base_url, api_key="test", max_retries=0)),
        anthropic_sync, anthropic_async)
    for row, served in zip(models, log, strict=True):
        # Anthropic's own figure excludes the cache; the span's is the whole prompt
        assert served.usage["input_tokens"] == served.prompt_tokens - served.cached_tokens - served.cache_write_tokens
        assert row["cache_write_tokens"] == served.cache_write_tokens
    assert log[0].cache_write_tokens > 0 and all(s.cached_tokens > 0 for s in log[1:])


def _error_of(fn):
    try:
        fn()
    except Exception as e:
        return type(e)
    return None


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_broken_raw_body_warns_and_never_reaches_the_agent(tmp_path, provider):
    with ModelServer(script=lambda req: RawReply("{this is not json")) as server:
        if provider == "openai":
            client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
            call = lambda: client.chat.completions.with_raw_response.create(model="m", messages=MSGS)  # noqa: E731
        else:
            client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
            call = lambda: client.messages.with_raw_response.create(model="m", max_tokens=8, messages=MSGS)  # noqa: E731
        expected = _error_of(call().parse)  # what the agent's .parse() does without agentprof
        with pytest.warns(CaptureWarning, match="raw response"), agentprof.profile("broken", out=tmp_path) as run:
            raw = call()
        assert raw.text == "{this is not json" if provider == "openai" else raw.text() == "{this is not json"
        assert expected is not None and _error_of(raw.parse) is expected
    _, rows = load(run.path)
    (model,) = of_kind(rows, "model")
    assert model["status"] == "ok" and model["input_tokens"] is None and model["output_tokens"] is None


def test_streaming_response_reads_nothing_before_the_agent(tmp_path):
    with ModelServer(script=script, latency=latency) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        aclient = anthropic.AsyncAnthropic(base_url=server.base_url, api_key="test", max_retries=0)
        seen = {}

        async def anthropic_part():
            async with aclient.messages.with_streaming_response.create(model="claude-sonnet-4-6", max_tokens=64,
                                                                       messages=MSGS) as r:
                seen["anthropic unread"] = not r.is_closed
                parsed = await r.parse()
            await aclient.close()
            return parsed

        with agentprof.profile("streaming-response", out=tmp_path) as run:
            with client.chat.completions.with_streaming_response.create(model="gpt-4o", messages=MSGS) as r:
                seen["parse unread"] = not r.is_closed
                parsed = r.parse()
            with client.chat.completions.with_streaming_response.create(
                    model="gpt-4o", messages=MSGS, stream=True, stream_options={"include_usage": True}) as r:
                seen["stream unread"] = not r.is_closed
                chunks = list(r.parse())
            with client.chat.completions.with_streaming_response.create(model="gpt-4o", messages=MSGS) as r:
                seen["json unread"] = not r.is_closed
                body = json.loads(r.read())  # the agent reads the bytes itself: no parsed object to read usage from
            aparsed = asyncio.run(anthropic_part())
        log = list(server.log)
    assert all(seen.values()), seen
    assert body["usage"]["prompt_tokens"] == log[2].prompt_tokens
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    assert len(models) == 4
    for i in (0, 1):
        check_usage([models[i]], [log[i]], "openai")
    check_usage([models[3]], [log[3]], "anthropic")
    assert attrs(models[0])["gen_ai.response.id"] == parsed.id and attrs(models[3])["gen_ai.response.id"] == aparsed.id
    assert attrs(models[1])["agentprof.stream.chunks"] == len(chunks)
    untouched = models[2]
    assert untouched["status"] == "ok" and untouched["input_tokens"] is None
    assert "agentprof.incomplete" not in attrs(untouched) and untouched["end_ns"] > untouched["start_ns"]
