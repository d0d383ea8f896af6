"""The headline cards: figures read straight off the trace (counts, tokens, wall time), overlaid with the
analysis stage's time split and Amdahl bound when that result is given. Nothing here re-derives analysis.

One name, one number: ``amdahl_bound_s`` / ``max_speedup`` and ``cache_read_share`` (the provider cache read
share, token-weighted over calls that report cache reads) are decided here, and every view of a report (page,
JSON, terminal, notebook) reads them from the headline.
"""

from __future__ import annotations

from typing import Any

import polars as pl

TIME_KEYS = ("model_s", "tool_s", "parse_s", "orchestration_s", "wait_s")


def _int(v: Any) -> int:
    return int(v) if v is not None else 0


def _count(spans: pl.DataFrame, cond: pl.Expr) -> int:
    """Rows where ``cond`` holds, without materializing them (their hash lists)."""
    return int(spans.select(cond.sum()).item()) if spans.height else 0


def trace_figures(spans: pl.DataFrame) -> dict[str, Any]:
    """Counts, tokens and wall time of a span table (wall: the summed extent of top-level sessions)."""
    # the counts need each call's number of block hashes, not the lists (filtering would copy them)
    calls = (spans.select("kind", "input_tokens", "output_tokens", "cache_read_tokens",
                          pl.col("block_hashes").list.len().alias("_n_hashes"))
             .filter(pl.col("kind") == "model"))
    usage = calls.filter(pl.col("input_tokens").is_not_null())
    with_reads = usage.filter(pl.col("cache_read_tokens").is_not_null())
    sessions = spans.select("session_id", "parent_session_id", "start_ns", "end_ns").group_by("session_id").agg(
        pl.col("parent_session_id").drop_nulls().first().alias("parent"),
        pl.col("start_ns").min().alias("start"),
        pl.col("end_ns").max().alias("end"),
    )
    ids = set(sessions.get_column("session_id").to_list())
    top = sessions.filter(pl.col("parent").is_null() | ~pl.col("parent").is_in(list(ids)))
    timed_top = top.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
    wall_ns = timed_top.select((pl.col("end") - pl.col("start")).sum()).item() if timed_top.height else None
    first = spans.get_column("start_ns").min() if spans.height else None
    in_read = with_reads.select(pl.col("input_tokens").sum()).item() if with_reads.height else 0
    read = with_reads.select(pl.col("cache_read_tokens").sum()).item() if with_reads.height else 0
    return {
        "sessions": sessions.height,
        "top_sessions": top.height,
        "subagent_sessions": sessions.height - top.height,
        "model_calls": calls.height,
        "tool_calls": _count(spans, pl.col("kind") == "tool"),
        "calls_with_usage": usage.height,
        "calls_with_cache_reads": with_reads.height,
        "calls_with_hashes": calls.filter(pl.col("_n_hashes") > 0).height,
        "input_tokens": _int(usage.select(pl.col("input_tokens").sum()).item()) if usage.height else None,
        "output_tokens": _int(calls.select(pl.col("output_tokens").sum()).item())
        if calls.filter(pl.col("output_tokens").is_not_null()).height else None,
        "cache_read_tokens": _int(read) if with_reads.height else None,
        "cache_read_share": (read / in_read) if in_read else None,
        "wall_s": wall_ns / 1e9 if wall_ns is not None else None,
        "first_start_ns": str(first) if first is not None else None,
        "spans": spans.height,
        "untimed_spans": _count(spans, pl.col("start_ns").is_null() | pl.col("end_ns").is_null()),
        "derived_spans": _count(spans, pl.col("timing") == "derived"),
    }


def headline(figures: dict[str, Any], analysis: dict[str, Any] | None = None,
             replay: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cards' values: trace figures, with the analysis time split (seconds and shares of wall) when given."""
    out = dict(figures)
    time = (analysis or {}).get("time") or {}
    if time:
        wall = time.get("wall_s")
        if wall is not None:
            out["wall_s"] = wall
        out["time"] = {k: time.get(k) for k in (*TIME_KEYS, "critical_path_s", "amdahl_bound_s", "wall_s",
                                                 "agent_active_s", "amdahl_bound_active_s", "startup_s")}
        out["time"]["waits_by_reason"] = time.get("waits_by_reason") or {}
        out["time"]["shares"] = time.get("shares") or {}
        out["shares"] = {k: (time[k] / wall) if wall and time.get(k) is not None else None for k in TIME_KEYS}
        active = (time.get("shares") or {}).get("of_agent_active") or {}
        # the analysis computed these once (TimeSplit.shares); the cards show them as they are
        out["shares_active"] = {f"{k}_s": active.get(k) for k in ("model", "tool", "parse", "orchestration", "wait")}
        amdahl = time.get("amdahl_bound_s")
        out["amdahl_bound_s"] = amdahl
        out["max_speedup"] = (wall / amdahl) if wall and amdahl else None
        out["agent_active_s"] = time.get("agent_active_s")
        out["amdahl_bound_active_s"] = time.get("amdahl_bound_active_s")
        out["max_speedup_active"] = active.get("max_speedup")
        out["waits_by_reason"] = time.get("waits_by_reason") or {}
    elif replay and isinstance(replay.get("recorded"), dict) and replay["recorded"].get("amdahl_e2e_s"):
        rec = replay["recorded"]  # no analysis: the replay's model-free re-assembly is the only bound there is
        out["amdahl_bound_s"] = rec["amdahl_e2e_s"]
        out["max_speedup"] = rec.get("amdahl_bound")
    red = (analysis or {}).get("redundancy") or {}
    weighted = red.get("provider_cache_read_share_weighted")
    if weighted is not None:  # the analysis computed the same token-weighted share: shown as that one number
        out["cache_read_share"] = weighted
    share = red.get("provider_cache_read_share")
    if isinstance(share, dict) and share.get("mean") is not None:
        out["cache_read_share_mean_per_call"] = share.get("mean")
    return out
