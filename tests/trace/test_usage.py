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
