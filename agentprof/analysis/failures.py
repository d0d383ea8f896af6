"""Failed model and tool calls: how many, how long they took, and of which error type.

Failed calls are already inside the time split (a rate-limited request is model time, an aborted command
tool time); this summary names them, so time lost to errors is visible at a glance. A span fails when its
``status`` is ``error``; its ``error_type`` is the exception class, the API's error code or the abort reason,
as the capture or importer recorded it.

A library's partial-JSON attempts (``agentprof.parse.partial``: LangChain re-parsing streamed tool arguments on
every chunk) are not failures, even on text that is not yet a whole document: they are counted apart
(``partial_parses``), and their time stays parse time.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from agentprof import semconv as sc

KINDS = ("model", "tool")


def counted(spans: pl.DataFrame) -> pl.DataFrame:
    """The spans :func:`failures` reads: failed model and tool calls, and partial-JSON parse attempts."""
    return spans.filter(((pl.col("status") == "error") & pl.col("kind").is_in(KINDS))
                        | ((pl.col("kind") == "parse") & pl.col("attributes").str.contains(sc.PARSE_PARTIAL,
                                                                                            literal=True)))


def failures(spans: pl.DataFrame) -> dict[str, Any]:
    """``{model_calls, model_s, tool_calls, tool_s, untimed, by_error_type: [{kind, error_type, count,
    time_s}], partial_parses: {count, incomplete, time_s}}`` over the failed model and tool spans (``time`` sums
    the spans that have both ends) and the partial-JSON parse attempts."""
    partial = spans.filter((pl.col("kind") == "parse") & pl.col("attributes").str.contains(sc.PARSE_PARTIAL,
                                                                                            literal=True))
    failed = spans.filter((pl.col("status") == "error") & pl.col("kind").is_in(KINDS)).with_columns(
        ((pl.col("end_ns") - pl.col("start_ns")).clip(lower_bound=0) / 1e9).alias("dur_s"),
        pl.col("error_type").fill_null("unknown"))
    out: dict[str, Any] = {"untimed": int(failed.get_column("dur_s").null_count())}
    for kind in KINDS:
        part = failed.filter(pl.col("kind") == kind)
        out[f"{kind}_calls"] = part.height
        out[f"{kind}_s"] = float(part.get_column("dur_s").sum() or 0.0)
    groups = (failed.group_by("kind", "error_type")
              .agg(pl.len().alias("count"), pl.col("dur_s").sum().alias("time_s"))
              .sort(["count", "time_s", "kind", "error_type"], descending=[True, True, False, False]))
    out["by_error_type"] = [{"kind": k, "error_type": e, "count": int(c), "time_s": float(t or 0.0)}
                            for k, e, c, t in groups.iter_rows()]
    outcome = partial.get_column("attributes").str.json_path_match(f"$['{sc.PARSE_PARTIAL}']")
    out["partial_parses"] = {"count": partial.height, "incomplete": int((outcome == "incomplete").sum()),
                             "time_s": float(((partial.get_column("end_ns") - partial.get_column("start_ns"))
                                              .clip(lower_bound=0) / 1e9).sum() or 0.0)}
    return out
