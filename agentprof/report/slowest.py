"""The slowest tools (grouped by tool name) and the slowest single model and tool calls of a span table."""

from __future__ import annotations

from typing import Any

import polars as pl

from agentprof import semconv as sc

_TOOL_PREFIX = sc.OP_EXECUTE_TOOL + " "


def _timed(spans: pl.DataFrame) -> pl.DataFrame:
    return spans.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()).with_columns(
        ((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("dur_s")
    )


def _tool_name() -> pl.Expr:
    """The tool's name: ``gen_ai.tool.name`` when recorded, else the span name without ``execute_tool``."""
    from_attr = pl.col("attributes").str.json_path_match(f"$['{sc.TOOL_NAME}']")
    from_name = pl.when(pl.col("name").str.starts_with(_TOOL_PREFIX)).then(
        pl.col("name").str.slice(len(_TOOL_PREFIX))).otherwise(pl.col("name"))
    return pl.coalesce(from_attr, from_name).alias("tool")


def slow_tools(spans: pl.DataFrame, top: int = 15) -> list[dict[str, Any]]:
    """Tools by total time: calls, total, mean, median, max seconds and errors."""
    t = _timed(spans.filter(pl.col("kind") == "tool"))
    if t.height == 0:
        return []
    g = t.with_columns(_tool_name()).group_by("tool").agg(
        pl.len().alias("calls"),
        pl.col("dur_s").sum().alias("total_s"),
        pl.col("dur_s").mean().alias("mean_s"),
        pl.col("dur_s").median().alias("median_s"),
        pl.col("dur_s").max().alias("max_s"),
        (pl.col("status") == "error").sum().alias("errors"),
    ).sort(["total_s", "tool"], descending=[True, False]).head(top)
    return [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()} for r in g.iter_rows(named=True)]


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
