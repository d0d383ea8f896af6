"""``analyze(trace)``: time split, prompt redundancy, kv-cache-tester hit rates and cache-miss explanations.

Bad input never stops the analysis: an empty trace, a session without model calls, calls without block
hashes or with zero-length prompts each become a diagnostic (and empty figures where nothing can be
measured), and everything else is still analyzed.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import polars as pl

from agentprof.analysis.calls import model_calls, session_table
from agentprof.analysis.failures import failures
from agentprof.analysis.hitrate import conversation_hit_rates, walk_counts
from agentprof.analysis.misses import MISS_RATIO, _layout, explain
from agentprof.analysis.redundancy import previous_rows, redundancy_columns
from agentprof.analysis.result import Analysis
from agentprof.analysis.stats import summary
from agentprof.analysis.timesplit import TimeSplit, session_splits
from agentprof.analysis.tools import tools as tool_table
from agentprof.importers.coerce import as_trace
from agentprof.trace.schema import Trace, empty_spans

LATE_CALL_INDEX = 10
"""Calls after this index within their conversation line count as "late" (as in the published figures)."""


def analyze(trace: Trace | pl.DataFrame | str | os.PathLike[str], miss_ratio: float = MISS_RATIO) -> Analysis:
    """Analyze a trace (one session or a whole corpus); see ``docs/ANALYSIS.md`` for every definition. Also
    takes the span table ``agentprof.trace.load`` returns, or a path."""
    trace = as_trace(trace)
    diags: list[dict[str, Any]] = [d.to_dict() for d in trace.diagnostics]
    spans = trace.spans if trace.spans is not None else empty_spans()
    if spans.height == 0:
        diags.append({"kind": "empty_trace", "message": "the trace has no spans; nothing to analyze"})
    sessions = session_table(spans)
    cb = model_calls(trace, sessions)
    red = redundancy_columns(cb)
    hits, counted = walk_counts(cb)
    conv = conversation_hit_rates(cb, hits, counted)
    prev = previous_rows(cb)
    layouts: dict[str, tuple[int, int]] = {}
    for sid, attrs in spans.filter(pl.col("kind") == "agent").select("session_id", "attributes").iter_rows():
        lay = _layout(attrs)
        if lay is not None:
            layouts[sid] = lay
    misses, top, starts = explain(cb, red, prev, layouts, miss_ratio=miss_ratio)
    _new_conversation_notes(starts, diags)
    calls = pl.concat([cb.calls.drop("segments", "attributes"), red], how="horizontal").with_columns(
        pl.Series("kvct_hit_blocks", hits, dtype=pl.Int64),
        pl.Series("kvct_counted_blocks", counted, dtype=pl.Int64),
        pl.Series("miss_cause", top, dtype=pl.Utf8),
    )
    split_df, conv_time = session_splits(spans, sessions, imported=is_imported(trace.meta))
    per_session = _per_session(sessions, calls, split_df, conv, diags)
    time = TimeSplit()
    timed = 0
    summed: dict[str, TimeSplit] = {}
    for cid in sessions.filter(pl.col("is_top_level")).get_column("session_id").to_list():
        ts = conv_time.get(cid)
        if ts is not None and ts.timed:
            time.add(ts)
            summed[cid] = ts
            timed += 1
    untimed = spans.filter(pl.col("start_ns").is_null() | pl.col("end_ns").is_null()).height
    if untimed:
        diags.append({"kind": "untimed_spans", "message": f"{untimed} spans have no start or end time and are left "
                      "out of the time split"})
    _call_diagnostics(calls, diags)
    conv_out = conv.rename({"line_id": "conversation_id"})
    redundancy = _redundancy(calls, conv_out)
    n_conv = conv_out.height if conv_out.height else int(sessions.get_column("primary").sum() or 0)
    a = Analysis(trace.meta, calls, per_session, conv_out, time, redundancy, misses, diags, n_conversations=n_conv,
                 failures=failures(spans), tools=tool_table(spans), profile=_profile(trace, time.orchestration_s if timed else None),
                 conversation_time=summed)
    a.redundancy["timed_conversations"] = timed
    return a


def _new_conversation_notes(starts: list[dict[str, Any]], diags: list[dict[str, Any]]) -> None:
    """One note per session whose calls start new conversations (several agent runs in one profile): those
    calls share only tools and system prompt with the call before by design, and are not cache misses."""
    per: dict[str, list[dict[str, Any]]] = {}
    for st in starts:
        per.setdefault(st["session_id"], []).append(st)
    for sid, calls in per.items():
        diags.append({"kind": "new_conversation", "session_id": sid,
                      "span_ids": [x["span_id"] for x in calls][:20],
                      "message": f"session {sid}: {len(calls)} model call(s) start a new conversation (another agent "
                                 "run in the same profile; calls " + ", ".join(str(x["call_index"] + 1)
                                                                               for x in calls[:10])
                                 + "): they share only the tools and system prompt with the call before, so they are "
                                 "not counted as cache misses"})


def _profile(trace: Trace, orchestration_s: float | None) -> Any:
    """CPU-bound shares and sampled hotspots (None when they cannot be computed; the rest goes on)."""
    from agentprof.analysis.hotspots import profile

    return profile(trace, orchestration_s)


def _per_session(sessions: pl.DataFrame, calls: pl.DataFrame, split_df: pl.DataFrame, conv: pl.DataFrame,
                 diags: list[dict[str, Any]]) -> pl.DataFrame:
    agg = calls.group_by("session_id").agg(
        pl.len().alias("model_calls"),
        pl.col("prompt_tokens").sum().alias("prompt_tokens"),
        pl.col("prefix_reuse_prev").mean().alias("prefix_reuse_prev_mean"),
        pl.col("prefix_reuse_prev").median().alias("prefix_reuse_prev_median"),
        pl.col("best_reuse").mean().alias("best_reuse_mean"),
        (pl.col("cache_read_tokens").sum() / pl.col("input_tokens").filter(pl.col("cache_read_tokens").is_not_null())
         .sum()).alias("provider_cache_read_share_weighted"),
        pl.col("miss_cause").is_not_null().sum().alias("cache_misses"),
    )
    out = (sessions.drop("trace_id")
           .join(agg, on="session_id", how="left")
           .join(split_df, on="session_id", how="left")
           .join(conv.select(pl.col("line_id").alias("session_id"), "session_hit_rate", "strict_share"),
                 on="session_id", how="left")
           .with_columns(pl.col("model_calls").fill_null(0), pl.col("cache_misses").fill_null(0)))
    for sid in out.filter(pl.col("model_calls") == 0).get_column("session_id").to_list():
        diags.append({"kind": "no_model_calls", "message": f"session {sid} has no model calls; only its time is "
                      "analyzed", "session_id": sid})
    return out


def _call_diagnostics(calls: pl.DataFrame, diags: list[dict[str, Any]]) -> None:
    if calls.height == 0:
        diags.append({"kind": "no_model_calls", "message": "the trace has no model calls; redundancy, hit rates "
                      "and cache misses are empty"})
        return
    # a failed attempt's request is often not logged (Claude Code retries): no hashes is expected there
    no_hash = calls.filter(~pl.col("has_hashes") & (pl.col("status") != "error")).group_by(
        "session_id", maintain_order=True).len()
    for sid, n in no_hash.iter_rows():
        diags.append({"kind": "missing_hashes", "message": f"{n} model calls of session {sid} have no prompt block "
                      "hashes; their prefix reuse and hit rates are left empty", "session_id": sid})
    zero = calls.filter(pl.col("has_hashes") & (pl.col("prompt_tokens").fill_null(0) <= 0))
    if zero.height:
        diags.append({"kind": "zero_length_prompt", "message": f"{zero.height} model calls have zero-length "
                      "prompts; their shares are left empty", "span_ids": zero.get_column("span_id").to_list()[:20]})


def _redundancy(calls: pl.DataFrame, conv: pl.DataFrame) -> dict[str, Any]:
    def col(name: str, frame: pl.DataFrame = calls) -> np.ndarray:
        return frame.get_column(name).drop_nulls().to_numpy() if frame.height else np.empty(0)

    late = calls.filter(pl.col("line_index") > LATE_CALL_INDEX) if calls.height else calls
    both = calls.filter(pl.col("cache_read_tokens").is_not_null() & (pl.col("input_tokens") > 0)) \
        if calls.height else calls
    weighted = (float(both.get_column("cache_read_tokens").sum() / both.get_column("input_tokens").sum())
                if both.height else None)
    tokens = {k: int(calls.get_column(c).drop_nulls().sum()) if calls.height else 0
              for k, c in (("prompt", "prompt_tokens"), ("input", "input_tokens"), ("reusable", "reusable_tokens"),
                           ("cached", "cached_tokens"), ("gap", "gap_tokens"))}
    return {
        "prefix_reuse_prev": summary(col("prefix_reuse_prev")),
        "prefix_reuse_prev_late": summary(col("prefix_reuse_prev", late)),
        "best_reuse": summary(col("best_reuse")),
        "session_hit_rate": summary(col("session_hit_rate", conv)),
        "strict_hit_share": summary(col("strict_share", conv)),
        "provider_cache_read_share": summary(col("provider_cache_read_share")),
        "provider_cache_read_share_weighted": weighted,
        "tokens": tokens,
        "block_size_note": "shares are measured in whole blocks of the trace's block size; the unhashed tail of "
                           "each prompt counts as new",
    }


def dumps(a: Analysis) -> str:
    """The ``--json`` text (NaN-free, stable key order)."""
    return json.dumps(a.to_dict(), indent=2, default=str)


_INSTRUMENTED = frozenset({"agentprof", "otlp-json"})


def is_imported(meta) -> bool:  # meta: TraceMeta
    """Whether the trace was read from agents' own logs (not spans an instrumented program recorded), so
    gaps between its spans are the logs' residue or idle time, not orchestration code."""
    formats = meta.extra.get("formats") or [meta.source_format]
    return any(f not in _INSTRUMENTED for f in formats)
