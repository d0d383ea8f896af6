"""Real ``litellm.completion`` / ``acompletion`` against the loopback server, for ``openai/`` and ``anthropic/``.

Each call must be exactly one model span (LiteLLM's inner openai SDK call is not counted again), with the
token figures the server counted (cached tokens in both providers' conventions), TTFT for streams, and
errors recorded while LiteLLM's exception reaches the agent unchanged.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

import agentprof
from agentprof.demo.model_server import ErrorReply, Latency, ModelServer, Reply

from ..lazy_import import LazyModule
from .capture_helpers import attrs, load, of_kind

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None,
                                reason="litellm is not installed (pip install agentprof[test])")
litellm = LazyModule("litellm")


@pytest.fixture(autouse=True, scope="module")
def _litellm_imported() -> None:
    """litellm imported before the first test's profile starts, as an application imports it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download
    litellm.load()

TTFT = 0.03
SYSTEM = "You review code carefully and explain briefly. " * 20
TOOLS = [{"type": "function", "function": {"name": "grep", "description": "search", "parameters": {
    "type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}]
PROVIDERS = [("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4-6")]


def messages(turn):
    system = {"role": "system", "content": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]}
    return [system, {"role": "user", "content": f"question {turn}"}]


def kwargs_for(server, prov, model):
    base = server.openai_base_url if prov == "openai" else server.base_url
    return dict(model=f"{prov}/{model}", api_base=base, api_key="test", max_tokens=64, tools=TOOLS, num_retries=0)


def check(models, log, prov, model):
    assert len(models) == len(log)
    for row, served in zip(models, log, strict=True):
        assert row["provider"] == prov and row["name"] == f"chat {model}"
        assert row["input_tokens"] == served.prompt_tokens  # cached included (OTel meaning)
        assert row["cache_read_tokens"] == served.cached_tokens
        assert row["output_tokens"] == served.output_tokens
        assert row["stream"] is served.stream
        if prov == "anthropic":
            assert row["cache_write_tokens"] == served.cache_write_tokens


def drain(stream):
    text = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
    return "".join(text)


@pytest.mark.parametrize(("prov", "model"), PROVIDERS)
def test_sync_plain_and_stream(tmp_path, prov, model):
    with ModelServer(script=lambda req: Reply(text="all good here"),
                     latency=lambda *a: Latency(TTFT, 0.0005)) as server:
        kw = kwargs_for(server, prov, model)
        with agentprof.profile(f"litellm-{prov}", out=tmp_path) as run:
            a = litellm.completion(messages=messages(1), **kw)
            b = litellm.completion(messages=messages(2), **kw)
            c = drain(litellm.completion(messages=messages(3), stream=True,
                                         stream_options={"include_usage": True}, **kw))
        log = list(server.log)
    assert a.choices[0].message.content == b.choices[0].message.content == c == "all good here"
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    check(models, log, prov, model)
    # the server's cache: the first call writes (anthropic) or misses, later ones read the system prompt
    assert log[0].cached_tokens == 0 and log[1].cached_tokens > 0 and log[2].cached_tokens > 0
    if prov == "anthropic":
        assert log[0].cache_write_tokens > 0
    assert [m["ttft_s"] is None for m in models] == [True, True, False]
    assert TTFT <= models[2]["ttft_s"] < (models[2]["end_ns"] - models[2]["start_ns"]) / 1e9
    assert all(m["status"] != "error" for m in models)


@pytest.mark.parametrize(("prov", "model"), PROVIDERS)
def test_async_plain_and_stream(tmp_path, prov, model):
    with ModelServer(script=lambda req: Reply(text="async answer"),
                     latency=lambda *a: Latency(TTFT, 0.0)) as server:
        kw = kwargs_for(server, prov, model)

        async def agent():
            a = await litellm.acompletion(messages=messages(1), **kw)
            text = []
            stream = await litellm.acompletion(messages=messages(2), stream=True,
                                               stream_options={"include_usage": True}, **kw)
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    text.append(chunk.choices[0].delta.content)
            return a.choices[0].message.content, "".join(text)

        with agentprof.profile(f"litellm-async-{prov}", out=tmp_path) as run:
            a, b = asyncio.run(agent())
        log = list(server.log)
    assert a == b == "async answer"
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    check(models, log, prov, model)
    assert models[0]["ttft_s"] is None and models[1]["ttft_s"] >= TTFT


@pytest.mark.parametrize(("prov", "model"), PROVIDERS)
def test_error_propagates_and_is_recorded(tmp_path, prov, model):
    with ModelServer(script=lambda req: ErrorReply(400, "max_tokens too large")) as server:
        kw = kwargs_for(server, prov, model)
        with agentprof.profile("err", out=tmp_path) as run, \
                pytest.raises(litellm.exceptions.BadRequestError) as caught:
            litellm.completion(messages=messages(1), **kw)
    _, rows = load(run.path)
    (span,) = of_kind(rows, "model")
    assert span["status"] == "error"
    assert span["error_type"] == f"{type(caught.value).__module__}.{type(caught.value).__qualname__}"
    assert attrs(span)["http.response.status_code"] == caught.value.status_code == 400
    assert span["provider"] == prov and span["name"] == f"chat {model}"


def test_no_profile_no_span_and_nothing_changed(tmp_path):
    with ModelServer(script=lambda req: Reply(text="plain")) as server:
        kw = kwargs_for(server, "anthropic", "claude-haiku-4-5")
        r = litellm.completion(messages=messages(1), **kw)
        with agentprof.profile("after", out=tmp_path) as run:
            model = kw.pop("model")
            litellm.completion(model, messages(2), **kw)  # positional model, messages
        log = list(server.log)
    assert r.choices[0].message.content == "plain"
    _, rows = load(run.path)
    (span,) = of_kind(rows, "model")  # only the call made inside the profile
    assert span["name"] == "chat claude-haiku-4-5" and span["provider"] == "anthropic"
    assert span["input_tokens"] == log[1].prompt_tokens and span["prompt_tokens_hashed"] > 0
    assert getattr(litellm.completion, "__agentprof_original__", None) is not None


def test_sdk_call_inside_litellm_counted_once(tmp_path):
    """A LiteLLM custom provider that calls the openai SDK (as LiteLLM versions before its own HTTP path did):
    one span, from LiteLLM's hook; the openai hook stands aside."""
    import openai

    with ModelServer(script=lambda req: Reply(text="via the sdk")) as server:
        sdk = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)

        class ViaSDK(litellm.CustomLLM):
            def completion(self, *args, **kwargs):
                r = sdk.chat.completions.create(model="gpt-4o-mini", messages=kwargs["messages"])
                return litellm.ModelResponse(**r.model_dump())

        saved = litellm.custom_provider_map
        litellm.custom_provider_map = [{"provider": "viasdk", "custom_handler": ViaSDK()}]
        try:
            with agentprof.profile("nested", out=tmp_path) as run:
                r = litellm.completion(model="viasdk/gpt-4o-mini", messages=messages(1))
                sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(2))  # direct: its own span
        finally:
            litellm.custom_provider_map = saved
        log = list(server.log)
    assert r.choices[0].message.content == "via the sdk" and len(log) == 2
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    assert [m["provider"] for m in models] == ["viasdk", "openai"]
    assert [m["input_tokens"] for m in models] == [s.prompt_tokens for s in log]


# --- the Responses API (litellm.responses / aresponses): LiteLLM's own HTTP client for every provider ------
def responses_input(turn):
    system = {"role": "system", "content": [{"type": "input_text", "text": SYSTEM,
                                             "cache_control": {"type": "ephemeral"}}]}
    return [system, {"role": "user", "content": f"question {turn}"}]


def responses_kwargs(server, prov, model):
    base = server.openai_base_url if prov == "openai" else server.base_url
    return dict(model=f"{prov}/{model}", api_base=base, api_key="test", max_output_tokens=64)


def output_text(response):
    return "".join(part.text for item in response.output for part in (getattr(item, "content", None) or ())
                   if getattr(part, "text", None))


@pytest.mark.parametrize(("prov", "model"), PROVIDERS)
def test_responses_sync_async_and_streams(tmp_path, prov, model):
    with ModelServer(script=lambda req: Reply(text="responses answer"),
                     latency=lambda *a: Latency(TTFT, 0.0005)) as server:
        kw = responses_kwargs(server, prov, model)

        async def agent():
            a = await litellm.aresponses(input=responses_input(4), **kw)
            stream = await litellm.aresponses(input=responses_input(5), stream=True, **kw)
            return output_text(a), [event async for event in stream]

        with agentprof.profile(f"litellm-responses-{prov}", out=tmp_path) as run:
            first = litellm.responses(input=responses_input(1), **kw)
            second = litellm.responses(responses_input(2), kw.pop("model"), **kw)  # positional input, model
            kw["model"] = f"{prov}/{model}"
            events = list(litellm.responses(input=responses_input(3), stream=True, **kw))
            async_text, async_events = asyncio.run(agent())
        log = list(server.log)
    assert output_text(first) == output_text(second) == async_text == "responses answer"
    assert events[-1].type == async_events[-1].type == "response.completed"  # a str enum in LiteLLM
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    check(models, log, prov, model)  # one span per request, the server's token counts, cached in both conventions
    assert log[1].cached_tokens > 0  # the system prompt was cached by the first call
    if prov == "anthropic":
        assert log[0].cache_write_tokens > 0
    assert [m["ttft_s"] is None for m in models] == [True, True, False, True, False]
    for m in (models[2], models[4]):
        assert TTFT <= m["ttft_s"] < (m["end_ns"] - m["start_ns"]) / 1e9
    assert all(m["status"] != "error" and m["prompt_tokens_hashed"] > 0 for m in models)


def test_responses_error_propagates_and_is_recorded(tmp_path):
    with ModelServer(script=lambda req: ErrorReply(400, "bad input")) as server:
        kw = responses_kwargs(server, "openai", "gpt-4o-mini")
        with agentprof.profile("responses-err", out=tmp_path) as run, \
                pytest.raises(litellm.exceptions.BadRequestError) as caught:
            litellm.responses(input="hello", **kw)
    _, rows = load(run.path)
    (span,) = of_kind(rows, "model")
    assert span["status"] == "error" and attrs(span)["http.response.status_code"] == caught.value.status_code
