"""The one-session replay applies ``--overflow`` as the serving simulation does, on the shipped kv-cache-tester
sessions (three of them hold prompts up to 713K tokens, past Kimi K2.5's 262K context)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from agentprof.importers import load_any
from agentprof.replay.compaction import client_calls
from agentprof.replay.replay import replay
from agentprof.replay.serving import ServingConfig, build_plan
from agentprof.replay.serving.overflow import KEPT_TOKENS, SUMMARY_OUT

ROOT = Path(__file__).resolve().parents[2]
KVCT = ROOT / "traces" / "samples" / "kv-cache-tester"
CLAUDE = ROOT / "traces" / "samples" / "claude-code"
WINDOW = 262_144.0


@pytest.fixture(scope="module")
def kvct():
    return load_any(str(KVCT))


@pytest.fixture(scope="module")
def runs(kvct):
    """One-session and one-slot serving replays on Jalapeño under compact and reject."""
    return {(p, mode): replay(kvct, ["jalapeno"], overflow=p, bands=False,
                              serving=ServingConfig(concurrency=1) if mode == "served" else None)
            for p in ("compact", "reject") for mode in ("alone", "served")}


def test_compact_matches_the_one_slot_simulation(runs) -> None:
    res, served = runs[("compact", "alone")], runs[("compact", "served")]
    row, srow = res.systems[0], served.systems[0]
    b = row.to_dict()["beyond_context"]
    assert b["policy"] == "compact" and b["count"] > 0 and b["compactions"] > 0 and b["failed_sessions"] == 0
    # the same record the simulation reports (it adds the figures without those sessions)
    assert b == {k: v for k, v in srow.serving["beyond_context"].items() if k != "without"}
    # the per-model list counts the same calls against the same window
    (d,) = res.beyond_context
    assert d["calls"] == b["count"] and d["context_tokens"] == b["window_tokens"]
    # one policy, one figure: the model-call time the simulation gives one session
    assert row.model_calls_s == pytest.approx(srow.model_calls_s, rel=0.01)
    assert sum(row.waiting_for.values()) == pytest.approx(row.model_calls_s, rel=1e-9)
    note = [n for n in res.notes if "context [" in n]
    assert len(note) == 1 and "--overflow compact" in note[0] and "extrapolate" not in note[0]


def test_no_sent_call_passes_the_window(kvct, runs) -> None:
    plan = build_plan(kvct)
    c = client_calls(plan, np.arange(plan.n_calls), plan.n_calls, WINDOW, float("inf"), "compact")
    assert (plan.input_tokens + plan.output_tokens).max() > 2 * WINDOW
    assert (c.inp + c.out).max() <= WINDOW and not c.unserved.any()
    # each summarizing call is priced onto the call it precedes: two sent calls for one recorded call (a
    # compaction right after a call whose context leaves no room for the summary has none)
    twice = np.flatnonzero(np.bincount(c.pos, minlength=plan.n_calls) == 2)
    assert 0 < twice.size <= c.record["compactions"]
    first = np.searchsorted(c.pos, twice)  # the summarizing call, then the compacted call
    # the summarizing call reads the history cached (all but the last reply's tokens)
    assert (c.out[first] == SUMMARY_OUT).all() and (c.own_hits[first] > 0.95 * c.inp[first]).all()
    assert (c.own_hits[first + 1] <= KEPT_TOKENS).all() and (c.inp[first + 1] < c.inp[first]).all()
    # the replay prices exactly these prompts (its call table holds each call with its summarizing call)
    frame = runs[("compact", "alone")].calls
    assert frame["input_tokens"].sum() == pytest.approx(c.inp.sum())


def test_reject_fails_the_sessions_at_their_first_call_beyond(runs) -> None:
    res, served = runs[("reject", "alone")], runs[("reject", "served")]
    b = res.systems[0].beyond_context
    assert b["policy"] == "reject" and b["failed_sessions"] == 3 and b["compactions"] == 0
    assert [n for n in res.notes if "3 session(s) fail" in n and "not served" in n]
    # the refused call and the rest of each session take no time, in both replays
    frame = res.calls
    lost = frame.filter(pl.col("replayed_s") == 0)
    assert lost.height > 0 and lost["session_id"].n_unique() == 3
    # one session at a time, the same model time; within 2 %, not 1: the simulation runs the recording's
    # side-by-side sub-agent calls together (1.5 % apart on Jalapeño), the one-session replay one by one
    assert res.systems[0].model_calls_s == pytest.approx(served.systems[0].model_calls_s, rel=0.02)
    assert res.systems[0].model_calls_s < runs[("compact", "alone")].systems[0].model_calls_s
    # the failed sessions' tools and waits stay as recorded: the task speed-up stays within the Amdahl bound
    assert res.systems[0].speedup_vs_recorded <= res.recorded.amdahl_bound


def test_stand_in_picks_a_model_whose_window_covers_the_trace(kvct) -> None:
    # the sessions that fit Kimi K2.5's window, recorded by a model the catalog does not know (its stand-in,
    # GPT-OSS 120B, has a 131K window)
    spans = kvct.spans
    need = (pl.col("input_tokens") + pl.col("output_tokens")).max()
    long = spans.filter(pl.col("kind") == "model").group_by("session_id").agg(need.alias("n"))
    keep = long.filter(pl.col("n") <= WINDOW)["session_id"]
    sub = spans.filter(pl.col("session_id").is_in(keep.implode())).with_columns(
        pl.when(pl.col("kind") == "model").then(pl.lit("mystery")).otherwise(pl.col("model")).alias("model"))
    t = type(kvct)(kvct.meta, sub, kvct.diagnostics)
    compact = replay(t, ["jalapeno"], bands=False)
    assert compact.systems[0].deployments[0]["model"] == "gpt-oss-120b"
    assert compact.systems[0].beyond_context["compactions"] > 0
    res = replay(t, ["jalapeno"], overflow="stand-in", bands=False)
    assert res.systems[0].deployments[0]["model"] == "kimi-k2.5"
    assert any("--overflow stand-in" in n for n in res.notes) and res.beyond_context == []
    assert (res.systems[0].beyond_context or {}).get("count", 0) == 0


def test_a_trace_below_the_trigger_is_the_same_under_every_policy() -> None:
    t = load_any(str(CLAUDE))
    out = [replay(t, ["jalapeno"], overflow=p, bands=False).to_dict() for p in ("compact", "reject", "stand-in")]
    assert out[0] == out[1] == out[2]
    assert "beyond_context" not in out[0]["systems"][0] and out[0]["beyond_context"] == []
