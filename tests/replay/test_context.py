"""Calls beyond the replayed model's context window are counted and said in replay and capacity."""

from __future__ import annotations

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.replay import replay
from agentprof.replay.serving.capacity import capacity

from .spans import agent, model, trace

CAT = load_catalog()
WINDOW = int(CAT.models["gpt-oss-120b"].fields["context"].value)


def _records(prompts: list[tuple[int, int]]) -> list[dict]:
    recs = [agent(0, 10.0 * len(prompts) + 10)]
    for i, (inp, out) in enumerate(prompts):
        recs.append(model(f"m{i}", 10.0 * i + 1, 10.0 * i + 5, inp=inp, out=out))
    return recs


def test_replay_counts_calls_beyond_the_window_and_says_so() -> None:
    # one fits, one prompt is over the window, one fits only without its reply
    t = trace(_records([(20_000, 300), (WINDOW + 9_000, 200), (WINDOW - 500, 2_000)]))
    res = replay(t, ["h200+x86"], bands=False)
    (d,) = res.beyond_context
    assert (d["model"], d["calls"], d["of_calls"]) == ("gpt-oss-120b", 2, 3)
    assert d["max_prompt_tokens"] == WINDOW + 9_000 and d["context_tokens"] == WINDOW
    assert d["context_source"] == CAT.models["gpt-oss-120b"].fields["context"].source
    note = [n for n in res.notes if "context" in n]
    assert len(note) == 1 and f"{WINDOW:,}-token context" in note[0] and "2 of 3" in note[0]
    assert res.to_dict()["beyond_context"] == res.beyond_context


def test_calls_within_the_window_get_no_note() -> None:
    res = replay(trace(_records([(20_000, 300), (WINDOW - 5_000, 4_000)])), ["h200+x86"], bands=False)
    assert res.beyond_context == [] and not [n for n in res.notes if "context" in n]


def test_capacity_says_it_too() -> None:
    t = trace(_records([(20_000, 300), (WINDOW + 1, 10)]))
    res = capacity(t, ["h200+x86"], ["ttft_p99=1h"], max_concurrency=2)
    assert [n for n in res["notes"] if "1 of 2 call(s)" in n and "could not serve them" in n]
