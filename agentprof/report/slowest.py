"""The slowest tools (grouped by tool name) and the slowest single model and tool calls of a span table."""

from __future__ import annotations

from typing import Any

import polars as pl


def _timed(spans: pl.DataFrame) -> pl.DataFrame:
    return spans.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()).with_columns(
        ((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("dur_s")
    )


def slow_tools(spans: pl.DataFrame, top: int = 15, figures: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Tools by total time: calls, total, mean, median, p95, max seconds and errors — the analysis' per-tool
    figures (``figures``, :func:`agentprof.analysis.tools.tools` of ``spans`` when not given), so a tool's
    numbers here are the ones ``agentprof analyze`` prints."""
    from agentprof.analysis.tools import tools

    rows = figures if figures is not None else tools(spans)
    return [{"tool": r["name"], "calls": r["count"], "total_s": _r(r["total_s"]), "mean_s": _r(r["mean_s"]),
             "median_s": _r(r["p50_s"]), "p95_s": _r(r["p95_s"]), "max_s": _r(r["max_s"]), "errors": r["errors"]}
            for r in rows[:top]]


def _r(v: float | None) -> float | None:
    return round(v, 6) if v is not None else None


def slow_calls(spans: pl.DataFrame, session_labels: dict[str, str] | None = None, t0_ns: int | None = None,
               top: int = 15) -> list[dict[str, Any]]:
    """The longest single model, tool and parse spans with where they sit (session, offset) and their tokens."""
    # the light columns only: filtering and sorting would otherwise gather every block-hash list (73 M ids on
    # 700 kv-cache-tester traces, seconds)
    light = spans.select("kind", "name", "session_id", "start_ns", "end_ns", "input_tokens", "cache_read_tokens",
                         "output_tokens", "status", "error_type")
    t = _timed(light.filter(pl.col("kind").is_in(["model", "tool", "parse"])))
    if t.height == 0:
        return []
    t = t.sort(["dur_s", "start_ns"], descending=[True, False]).head(top)
    base = t0_ns if t0_ns is not None else spans.get_column("start_ns").min()
    labels = session_labels or {}
    out = []
    for r in t.iter_rows(named=True):
        out.append({
            "kind": r["kind"],
            "name": r["name"],
            "session": labels.get(r["session_id"], r["session_id"]),
            "start_s": round((r["start_ns"] - base) / 1e9, 6) if base is not None else None,
            "dur_s": round(r["dur_s"], 6),
            "input_tokens": r["input_tokens"],
            "cache_read_tokens": r["cache_read_tokens"],
            "output_tokens": r["output_tokens"],
            "status": r["status"],
            "error_type": r["error_type"],
        })
    return out
