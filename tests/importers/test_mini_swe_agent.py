"""mini-swe-agent trajectories: calls, tokens, tools and the exact linear prompts."""

from __future__ import annotations

import json

import polars as pl

from agentprof.trace.prompt import PromptHasher, openai_chat_segments

from .importer_helpers import SAMPLES, imported, kinds, median_late_share

TRAJ = SAMPLES / "mini-swe-agent" / "django__django-13807.traj.json"


def test_counts_tokens_and_prompts():
    doc = json.loads(TRAJ.read_text())
    assistant = [i for i, m in enumerate(doc["messages"]) if m["role"] == "assistant"]
    assert len(assistant) == doc["info"]["model_stats"]["api_calls"] == 36
    tr = imported("mini-swe-agent")
    k = kinds(tr.spans)
    observations = sum(1 for i in assistant if i + 1 < len(doc["messages"]) and doc["messages"][i + 1]["role"] == "user")
    assert (k["model"], k["tool"], k["agent"]) == (36, observations, 1)
    m = tr.spans.filter(pl.col("kind") == "model").sort("end_ns")
    usages = [doc["messages"][i]["extra"]["response"]["usage"] for i in assistant]
    assert m.get_column("input_tokens").sum() == sum(u["prompt_tokens"] for u in usages)
    assert m.get_column("cache_read_tokens").sum() == sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    assert m.get_column("reasoning_tokens").sum() == sum(u["completion_tokens_details"]["reasoning_tokens"]
                                                         for u in usages)
    # call k's prompt is messages[:i] of its assistant message
    k7 = assistant[7]
    fp = PromptHasher(tr.meta.tokenizer).fingerprint(openai_chat_segments(
        [{"role": x["role"], "content": x["content"]} for x in doc["messages"][:k7]]))
    assert m.get_column("block_hashes").to_list()[7] == fp.block_hashes
    assert 0.93 <= median_late_share(m) <= 0.995
    ends = m.get_column("end_ns").to_list()
    assert ends == [doc["messages"][i]["extra"]["response"]["created"] * 10**9 for i in assistant]
    assert m.get_column("start_ns").to_list()[1:] == ends[:-1]
