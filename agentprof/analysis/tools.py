"""Per-tool figures: for each tool name, how many calls, their summed span time, median and p95 duration, and
how many failed — the one place ``analyze``, the report's slowest-tools table and ``diff`` take them from.

A tool's name is ``gen_ai.tool.name`` when recorded, else the span name without ``execute_tool``. Times are
summed span durations (tools running in parallel each count their own time), not critical-path time; calls
without both ends are counted (``count``, ``untimed``) but have no duration. Percentiles are linear-interpolated
(numpy's default, as every other distribution in the analysis).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from agentprof import semconv as sc

_TOOL_PREFIX = sc.OP_EXECUTE_TOOL + " "


def tool_name() -> pl.Expr:
    """The tool's name of a span row: ``gen_ai.tool.name`` when recorded, else the span name without the
    ``execute_tool`` prefix."""
    from_attr = pl.col("attributes").str.json_path_match(f"$['{sc.TOOL_NAME}']")
    from_name = pl.when(pl.col("name").str.starts_with(_TOOL_PREFIX)).then(
        pl.col("name").str.slice(len(_TOOL_PREFIX))).otherwise(pl.col("name"))
    return pl.coalesce(from_attr, from_name)


def tool_spans(spans: pl.DataFrame) -> pl.DataFrame:
    """The tool spans as ``tool``, ``dur_s`` (None when untimed) and ``failed`` columns, in span order: all the
    per-tool figures need (a partitioned analysis keeps these rows per partition and merges them)."""
    t = spans.filter(pl.col("kind") == "tool")
    return t.select(tool_name().fill_null("tool").alias("tool"),
                    ((pl.col("end_ns") - pl.col("start_ns")).clip(lower_bound=0) / 1e9).alias("dur_s"),
                    (pl.col("status") == "error").alias("failed"))


def tool_figures(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """``[{name, count, total_s, mean_s, p50_s, p95_s, max_s, errors, untimed}]`` over :func:`tool_spans`
    rows, sorted by total time (then name)."""
    out = []
    if rows.height == 0:
        return out
    for (name,), g in rows.group_by("tool", maintain_order=True):
        d = g.get_column("dur_s").drop_nulls().to_numpy().astype(np.float64)
        p50, p95 = (float(v) for v in np.quantile(d, [0.5, 0.95])) if d.size else (None, None)
        out.append({"name": str(name), "count": g.height, "total_s": float(d.sum()),
                    "mean_s": float(d.mean()) if d.size else None, "p50_s": p50, "p95_s": p95,
                    "max_s": float(d.max()) if d.size else None, "errors": int(g.get_column("failed").sum()),
                    "untimed": int(g.height - d.size)})
    out.sort(key=lambda r: (-r["total_s"], r["name"]))
    return out


def tools(spans: pl.DataFrame) -> list[dict[str, Any]]:
    """Per-tool figures of a span table (see the module docstring)."""
    return tool_figures(tool_spans(spans))
