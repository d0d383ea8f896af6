from agentprof.trace.prompt import (
    PromptHasher,
    anthropic_segments,
    openai_chat_segments,
    responses_segments,
)
from agentprof.trace.tokenizer import get_tokenizer

HISTORY = [
    {"role": "system", "content": "You are a coding agent. " * 40},
    {"role": "user", "content": "Fix the failing test in utils.py " * 30},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "def f():\n    return 1\n" * 50},
]


def test_append_only_prompts_share_prefix_blocks():
    h = PromptHasher(block_size=16)
    fp1 = h.fingerprint(openai_chat_segments(HISTORY[:2]))
    fp2 = h.fingerprint(openai_chat_segments(HISTORY))
    assert fp2.tokens > fp1.tokens
    n = len(fp1.block_hashes)
    assert n > 0 and fp2.block_hashes[:n] == fp1.block_hashes
    assert [s["kind"] for s in fp2.segments] == ["system", "message", "message", "message"]
    assert sum(s["tokens"] for s in fp2.segments) == fp2.tokens


def test_cache_control_does_not_change_hashes():
    h = PromptHasher(block_size=16)
    plain = [{"role": "user", "content": [{"type": "text", "text": "hello there " * 50}]}]
    marked = [{"role": "user", "content": [{"type": "text", "text": "hello there " * 50,
                                            "cache_control": {"type": "ephemeral"}}]}]
    tools = [{"name": "bash", "input_schema": {"type": "object"}}]
    tools_marked = [{"name": "bash", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}]
    a = h.fingerprint(anthropic_segments("sys", plain, tools))
    b = h.fingerprint(anthropic_segments([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
                                         marked, tools_marked))
    assert a.block_hashes == b.block_hashes and a.tokens == b.tokens


def test_changed_system_prompt_changes_first_block():
    h = PromptHasher(block_size=16)
    a = h.fingerprint(anthropic_segments("Today is Monday. " * 20, HISTORY[1:2]))
    b = h.fingerprint(anthropic_segments("Today is Sunday. " * 20, HISTORY[1:2]))
    assert a.block_hashes[0] != b.block_hashes[0]


def test_responses_items():
    h = PromptHasher(block_size=16)
    segs = responses_segments("be brief", [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi " * 40}]},
        {"type": "function_call", "name": "shell", "arguments": '{"cmd":"ls"}', "call_id": "x"},
        {"type": "function_call_output", "call_id": "x", "output": "a.py\nb.py"},
    ])
    assert [s.role for s in segs] == ["system", "user", "assistant", "tool"]
    assert h.fingerprint(segs).tokens > 40


def test_tokenizers_are_prefix_stable_and_deterministic():
    for spec in ("cl100k", "approx"):
        tok = get_tokenizer(spec)
        a = tok.encode("def main():\n    print('hello world')\n")
        assert a == tok.encode("def main():\n    print('hello world')\n")
        assert len(a) > 5
    assert get_tokenizer("cl100k").exact_for("gpt-4-turbo")
    assert not get_tokenizer("cl100k").exact_for("claude-sonnet-4-5")
