from agentprof.trace.usage import normalize_usage


def test_openai_chat_subset_semantics():
    u = normalize_usage({"prompt_tokens": 1000, "completion_tokens": 50,
                         "prompt_tokens_details": {"cached_tokens": 900},
                         "completion_tokens_details": {"reasoning_tokens": 20}})
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) == (1000, 900, 50, 20)
    assert not u.problems


def test_anthropic_additive_semantics():
    u = normalize_usage({"input_tokens": 3, "cache_read_input_tokens": 90_000, "cache_creation_input_tokens": 2_000,
                         "output_tokens": 400}, provider="anthropic")
    assert u.input_tokens == 92_003 and u.cache_read_tokens == 90_000 and u.cache_write_tokens == 2_000
    assert not u.problems


def test_responses_and_codex():
    u = normalize_usage({"input_tokens": 500, "input_tokens_details": {"cached_tokens": 400}, "output_tokens": 30,
                         "output_tokens_details": {"reasoning_tokens": 10}}, provider="openai")
    assert (u.input_tokens, u.cache_read_tokens, u.reasoning_tokens) == (500, 400, 10)
    c = normalize_usage({"input_tokens": 500, "cached_input_tokens": 450, "output_tokens": 30,
                         "reasoning_output_tokens": 12, "total_tokens": 530})
    assert (c.input_tokens, c.cache_read_tokens, c.reasoning_tokens) == (500, 450, 12)
    # LiteLLM's Responses objects for a provider that bills cache writes: inclusive input, writes in the details
    w = normalize_usage({"input_tokens": 276, "input_tokens_details": {"cached_tokens": 240, "cache_write_tokens": 32},
                         "output_tokens": 2}, provider="openai")
    assert (w.input_tokens, w.cache_read_tokens, w.cache_write_tokens, w.convention) == (276, 240, 32,
                                                                                         "openai-responses")
    assert not w.problems


def test_gemini_thoughts_are_added_to_output():
    u = normalize_usage({"promptTokenCount": 100, "cachedContentTokenCount": 60, "candidatesTokenCount": 10,
                         "thoughtsTokenCount": 5})
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) == (100, 60, 15, 5)


def test_openinference_and_otel_names():
    u = normalize_usage({"llm.token_count.prompt": 10, "llm.token_count.prompt_details.cache_read": 4,
                         "llm.token_count.completion": 2})
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens) == (10, 4, 2)
    o = normalize_usage({"gen_ai.usage.input_tokens": 10, "gen_ai.usage.cache_read.input_tokens": 8})
    assert (o.input_tokens, o.cache_read_tokens) == (10, 8)


def test_impossible_values_are_flagged():
    u = normalize_usage({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}})
    assert any("exceeds input" in p for p in u.problems)
    n = normalize_usage({"prompt_tokens": -1, "completion_tokens": 3})
    assert any("negative" in p for p in n.problems)


def test_legacy_and_openllmetry_names():
    # legacy gen_ai names carrying Anthropic's additive input (smaller than its own cached part)
    u = normalize_usage({"gen_ai.usage.prompt_tokens": 3, "gen_ai.usage.cache_read_input_tokens": 9000,
                         "gen_ai.usage.cache_creation_input_tokens": 500, "gen_ai.usage.completion_tokens": 20},
                        provider="anthropic")
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens) == (9503, 9000, 500, 20)
    assert u.convention == "otel-legacy-anthropic" and not u.problems
    # already inclusive (newer OpenLLMetry sums them): kept as is
    i = normalize_usage({"gen_ai.usage.prompt_tokens": 9503, "gen_ai.usage.cache_read_input_tokens": 9000},
                        provider="anthropic")
    assert i.input_tokens == 9503 and not i.problems
    o = normalize_usage({"llm.usage.prompt_tokens": 100, "llm.usage.completion_tokens": 7})
    assert (o.input_tokens, o.output_tokens, o.convention) == (100, 7, "openllmetry")


def test_usable_drops_only_the_impossible_values():
    u = normalize_usage({"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 50},
                         "completion_tokens_details": {"reasoning_tokens": 9}})
    assert len(u.problems) == 2
    c = u.usable()
    assert (c.input_tokens, c.cache_read_tokens, c.output_tokens, c.reasoning_tokens) == (10, None, 5, None)
    n = normalize_usage({"prompt_tokens": -4, "completion_tokens": 3}).usable()
    assert n.input_tokens is None and n.output_tokens == 3


def test_streamed_output_placeholders():
    from agentprof.trace.usage import resolve_streamed_output

    r = resolve_streamed_output([10, 10, 10, 441], visible_tokens=120)
    assert (r.output_tokens, r.source, r.problems) == (441, "final", [])
    p = resolve_streamed_output([2, 2], visible_tokens=5000)
    assert p.output_tokens == 5000 and p.source == "estimate" and p.reported == 2 and p.problems
    ok = resolve_streamed_output([90], visible_tokens=100)  # within the other-tokenizer tolerance
    assert (ok.output_tokens, ok.source) == (90, "only")
    assert resolve_streamed_output([None]).source == "none"


def test_litellm_in_front_of_anthropic_three_conventions():
    """Uncached 3, reads 10,529, writes 406 (a real OpenHands/LiteLLM call's figures), as each LiteLLM
    convention reports them: the prompt is 10,938 tokens every time."""
    def via(prompt_tokens: int):
        return normalize_usage({"prompt_tokens": prompt_tokens, "completion_tokens": 50,
                                "prompt_tokens_details": {"cached_tokens": 10_529},
                                "cache_read_input_tokens": 10_529, "cache_creation_input_tokens": 406})

    inclusive, reads_only, additive = via(3 + 10_529 + 406), via(3 + 10_529), via(3)
    for u in (inclusive, reads_only, additive):
        assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) == (10_938, 10_529, 406)
    assert [u.convention for u in (inclusive, reads_only, additive)] == [
        "litellm-anthropic", "litellm-anthropic-reads-only", "litellm-anthropic-additive"]
    # a first call (nothing read): a total below its own writes left them out (reads-only and additive agree);
    # one above them reads as inclusive, the only reading that needs no assumption
    first = normalize_usage({"prompt_tokens": 300, "completion_tokens": 50, "cache_read_input_tokens": 0,
                             "cache_creation_input_tokens": 406})
    assert (first.input_tokens, first.cache_read_tokens) == (706, 0)
    assert normalize_usage({"prompt_tokens": 1_200, "cache_read_input_tokens": 0,
                            "cache_creation_input_tokens": 406}).input_tokens == 1_200
