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
    note = [n for n in res.notes if "context [" in n]
    assert len(note) == 1 and f"{WINDOW:,}-token context" in note[0] and "2 of 3" in note[0]
    assert res.to_dict()["beyond_context"] == res.beyond_context
    # the prompt jumps past the window even compacted (--overflow compact): the session's task fails there
    row = res.systems[0].beyond_context
    assert (row["count"], row["failed_sessions"], row["policy"]) == (2, 1, "compact")
    assert [n for n in res.notes if n.startswith("h200+x86: 1 session(s) fail")]
    assert res.calls["replayed_s"].to_list()[1:] == [0.0, 0.0]


def test_calls_within_the_window_get_no_note() -> None:
    res = replay(trace(_records([(20_000, 300), (WINDOW - 5_000, 4_000)])), ["h200+x86"], bands=False)
    assert res.beyond_context == [] and not [n for n in res.notes if "context [" in n]
    # past the compaction trigger, but compacting would not shorten the prompt (it grew by more than a compacted
    # history): sent as recorded, priced as without the policy, and the record says so
    row = res.systems[0]
    assert (row.beyond_context["count"], row.beyond_context["compactions"]) == (0, 0)
    plain = replay(trace(_records([(20_000, 300), (WINDOW - 5_000, 4_000)])), ["h200+x86"], bands=False,
                   overflow="reject").systems[0]
    assert plain.beyond_context is None and plain.model_calls_s == row.model_calls_s


def test_capacity_says_it_too() -> None:
    t = trace(_records([(20_000, 300), (WINDOW + 1, 10)]))
    res = capacity(t, ["h200+x86"], ["ttft_p99=1h"], max_concurrency=2)
    assert [n for n in res["notes"] if "1 of 2 call(s)" in n and "--overflow compact" in n]
