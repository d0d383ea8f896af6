"""``analyze``: bad input becomes diagnostics while the rest of the corpus is analyzed; the ``--json`` shape."""

from __future__ import annotations

import json

from agentprof.analysis import analyze
from agentprof.analysis.analyzer import dumps
from agentprof.trace import Trace, TraceMeta, empty_spans

from .analysis_helpers import TraceBuilder

SUMMARY = {"n", "mean", "median", "p10", "p25", "p75", "p90"}


def _good(b: TraceBuilder, sid: str = "good") -> None:
    b.session(sid, 0, 100)
    p = list(range(500))
    for i, extra in enumerate((0, 200, 450)):
        b.model(sid, 10 * i, 10 * i + 2, tokens=p + list(range(9000, 9000 + extra)), input_tokens=520 + extra,
                cache_read=0 if i == 0 else 400)
        b.span(sid, "tool", 10 * i + 3, 10 * i + 6)


def test_empty_trace_gives_diagnostics_not_an_error():
    a = analyze(Trace(TraceMeta(), empty_spans()))
    d = json.loads(dumps(a))
    assert (d["sessions"], d["conversations"], d["model_calls"]) == (0, 0, 0)
    assert d["time"]["wall_s"] == 0 and d["redundancy"]["prefix_reuse_prev"]["median"] is None
    kinds = {x["kind"] for x in d["diagnostics"]}
    assert {"empty_trace", "no_model_calls"} <= kinds


def test_bad_sessions_are_reported_and_the_rest_is_analyzed():
    b = TraceBuilder()
    _good(b)
    b.session("no-calls", 0, 50)  # a session with tools only
    b.span("no-calls", "tool", 5, 25)
    b.session("no-hashes", 0, 50)  # calls without prompt hashes
    b.model("no-hashes", 1, 2, input_tokens=1000, cache_read=0)
    b.model("no-hashes", 3, 4, input_tokens=1100, cache_read=900)
    b.session("zero", 0, 50)  # zero-length prompts
    b.model("zero", 1, 2, hashes=[], prompt_tokens=0)
    b.model("zero", 3, 4, hashes=[], prompt_tokens=0)
    mixed = analyze(b.trace())
    alone_b = TraceBuilder()
    _good(alone_b)
    alone = analyze(alone_b.trace())

    diag = {(x["kind"], x.get("session_id")) for x in mixed.diagnostics}
    assert ("no_model_calls", "no-calls") in diag
    assert ("missing_hashes", "no-hashes") in diag
    assert any(x["kind"] == "zero_length_prompt" for x in mixed.diagnostics)

    def good_rows(a):
        return a.calls.filter(a.calls["session_id"] == "good").drop("line_id", "conversation_id").to_dicts()

    assert good_rows(mixed) == good_rows(alone)
    conv = {r["conversation_id"]: r for r in mixed.conversations.to_dicts()}
    assert conv["good"]["session_hit_rate"] == alone.conversations.to_dicts()[0]["session_hit_rate"]
    assert conv["no-hashes"]["session_hit_rate"] is None
    rows = {r["session_id"]: r for r in mixed.sessions.to_dicts()}
    assert rows["no-calls"]["tool_s"] == 20 and rows["no-calls"]["wall_s"] == 50
    assert rows["no-hashes"]["provider_cache_read_share_weighted"] == 900 / 2100
    assert mixed.to_dict()["sessions"] == 4


def test_json_keys():
    b = TraceBuilder()
    _good(b)
    d = json.loads(dumps(analyze(b.trace())))
    for k in ("sessions", "conversations", "model_calls", "time", "redundancy", "cache_misses", "per_session"):
        assert k in d
    for k in ("wall_s", "model_s", "tool_s", "parse_s", "orchestration_s", "wait_s", "critical_path_s",
              "amdahl_bound_s"):
        assert isinstance(d["time"][k], float)
    for k in ("prefix_reuse_prev", "session_hit_rate", "provider_cache_read_share"):
        assert set(d["redundancy"][k]) == SUMMARY
    assert d["redundancy"]["prefix_reuse_prev"]["median"] is not None
    assert d["per_session"][0]["session_id"] == "good"

