"""The prefix-caching loopback server, driven by the real openai SDK: block-hash hits, sessions kept apart,
replies of max_tokens, the vLLM-style /tokenize and the served-calls log."""

from __future__ import annotations

import httpx
import openai
import pytest

from agentprof.demo.prefix_server import BlockPrefixCache, PrefixCachingServer

WORDS = " alpha beta gamma delta"


@pytest.fixture(scope="module")
def server():
    with PrefixCachingServer(block=4, base_s=0.0, prefill_s_per_token=0.0, decode_s=0.0) as s:
        yield s


def _ask(server, text: str, user: str, max_tokens: int = 5, model: str = "m"):
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="x", max_retries=0)
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                            max_tokens=max_tokens, stream=True, user=user,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    return chunks[-1].usage, "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_repeated_prefix_hits_whole_blocks_and_reply_is_max_tokens_long(server):
    base = WORDS * 10
    u1, text = _ask(server, base, "s1", max_tokens=7, model="a")
    assert u1.prompt_tokens_details.cached_tokens == 0
    assert u1.completion_tokens == 7 and text == " ok" * 7
    u2, _ = _ask(server, base + " extra words here", "s1", model="a")
    cached = u2.prompt_tokens_details.cached_tokens
    # whole blocks, up to where the first prompt's text ended (its message's closing JSON follows)
    assert cached % 4 == 0 and u1.prompt_tokens - 16 <= cached < u1.prompt_tokens
    row = server.served()[-1]
    assert row["max_tokens"] == 5 and row["session"] == "s1" and row["cross_session_cached_tokens"] == 0
    assert row["first_byte_s"] is not None and row["first_byte_s"] >= 0


def test_hits_from_another_sessions_blocks_are_counted_apart(server):
    _ask(server, WORDS * 8, "s1", model="b")
    u, _ = _ask(server, WORDS * 8 + " more", "s2", model="b")
    row = server.served()[-1]
    assert u.prompt_tokens_details.cached_tokens > 0
    assert row["cross_session_cached_tokens"] == row["cached_tokens"]


def test_a_different_start_shares_only_the_message_wrapping(server):
    _ask(server, WORDS * 8, "s1", model="c")
    u, _ = _ask(server, " omega" + WORDS * 8, "s1", model="c")
    # the message's JSON opening (a chat template's part) is the one block in common, as on a real server
    assert u.prompt_tokens_details.cached_tokens == 4


def test_tokenize_counts_as_the_chat_endpoint_does(server):
    msgs = [{"role": "user", "content": WORDS * 3}]
    n = httpx.post(server.base_url + "/tokenize", json={"model": "m", "messages": msgs}).json()["count"]
    u, _ = _ask(server, WORDS * 3, "s9", model="d")
    assert n == u.prompt_tokens
    assert httpx.post(server.base_url + "/tokenize", json={"prompt": WORDS}).json()["count"] == 4
    log = httpx.get(server.base_url + "/agentprof/served").json()["served"]
    assert log[-1]["model"] == "d"


def test_capacity_evicts_least_recently_used_blocks():
    cache = BlockPrefixCache(block=2, capacity_blocks=2)
    a = ["x", "y", "z", "w"]
    assert cache.lookup_and_store(("chat", "m"), a, "s") == (0, 0)
    assert cache.lookup_and_store(("chat", "m"), a, "s") == (4, 0)
    cache.lookup_and_store(("chat", "m"), ["p", "q", "r", "s"], "s")  # pushes a's blocks out
    assert cache.lookup_and_store(("chat", "m"), a, "s") == (0, 0)
