"""The trace model: one polars table of spans, the contract every stage reads and writes.

Each row is one span. Model calls carry normalized token usage (OTel meaning: ``input_tokens`` includes
cached tokens) and the chained block hashes of their prompt. See ``docs/ARCHITECTURE.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from agentprof.trace.meta import Diagnostic, TraceMeta

KINDS = ("agent", "model", "tool", "parse", "orchestration", "wait")
TIMINGS = ("measured", "derived", "unknown")
STATUSES = ("ok", "error")

SEGMENT_DTYPE = pl.Struct({"kind": pl.Utf8, "role": pl.Utf8, "tokens": pl.Int64, "hash": pl.Int64})

SCHEMA: dict[str, pl.DataType] = {
    "trace_id": pl.Utf8(),
    "span_id": pl.Utf8(),
    "parent_id": pl.Utf8(),
    "session_id": pl.Utf8(),
    "parent_session_id": pl.Utf8(),
    "kind": pl.Utf8(),
    "name": pl.Utf8(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "timing": pl.Utf8(),
    "provider": pl.Utf8(),
    "model": pl.Utf8(),
    "input_tokens": pl.Int64(),
    "cache_read_tokens": pl.Int64(),
    "cache_write_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "reasoning_tokens": pl.Int64(),
    "ttft_s": pl.Float64(),
    "stream": pl.Boolean(),
    "status": pl.Utf8(),
    "error_type": pl.Utf8(),
    "cpu_ns": pl.Int64(),
    "block_hashes": pl.List(pl.Int64),
    "prompt_tokens_hashed": pl.Int64(),
    "segments": pl.List(SEGMENT_DTYPE),
    "attributes": pl.Utf8(),
}
"""Column name -> dtype. ``attributes`` is a JSON object of every attribute not mapped to a column."""

REQUIRED_NOT_NULL = ("trace_id", "span_id", "session_id", "kind", "name", "timing", "status")


@dataclass
class Trace:
    """A loaded trace: metadata, the span table and what was noticed while reading it."""

    meta: TraceMeta
    spans: pl.DataFrame
    diagnostics: list[Diagnostic] = field(default_factory=list)
    samples: Any = None
    """Stack samples of captured runs (:class:`agentprof.trace.samples.Samples`), None when not sampled."""

    @property
    def model_calls(self) -> pl.DataFrame:
        return self.spans.filter(pl.col("kind") == "model")

    def sessions(self) -> list[str]:
        return self.spans.get_column("session_id").unique(maintain_order=True).to_list()


def has_token_counts() -> pl.Expr:
    """Model calls replay, serving and loadtest re-run: timing one needs both token counts, input above 0."""
    inp, out = pl.col("input_tokens").cast(pl.Float64), pl.col("output_tokens").cast(pl.Float64)
    return (inp.is_finite() & out.is_finite() & (inp > 0)).fill_null(False)


def empty_spans() -> pl.DataFrame:
    """An empty span table with the canonical schema."""
    return pl.DataFrame(schema=SCHEMA)


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """Add missing columns as nulls, cast to canonical dtypes and order the columns as in ``SCHEMA``."""
    exprs = []
    for name, dtype in SCHEMA.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


def validate(df: pl.DataFrame) -> list[str]:
    """Return the problems that make ``df`` not a valid span table (empty list when valid)."""
    problems: list[str] = []
    for name, dtype in SCHEMA.items():
        if name not in df.columns:
            problems.append(f"missing column {name!r}")
        elif df.schema[name] != dtype:
            problems.append(f"column {name!r} has dtype {df.schema[name]}, expected {dtype}")
    if problems:
        return problems
    for name in REQUIRED_NOT_NULL:
        n = df.get_column(name).null_count()
        if n:
            problems.append(f"column {name!r} has {n} null values")
    bad_kind = df.filter(~pl.col("kind").is_in(KINDS))
    if bad_kind.height:
        problems.append(f"unknown span kind {bad_kind.get_column('kind')[0]!r} (expected one of {', '.join(KINDS)})")
    bad_timing = df.filter(~pl.col("timing").is_in(TIMINGS))
    if bad_timing.height:
        problems.append(f"unknown timing {bad_timing.get_column('timing')[0]!r}")
    backwards = df.filter(pl.col("end_ns") < pl.col("start_ns"))
    if backwards.height:
        problems.append(f"{backwards.height} spans end before they start (first: {backwards.get_column('span_id')[0]})")
    dup = df.height - df.select(pl.struct("trace_id", "span_id").n_unique()).item()
    if dup:
        problems.append(f"{dup} duplicate (trace_id, span_id) pairs")
    negative = df.filter(
        pl.any_horizontal(
            [pl.col(c) < 0 for c in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")]
        )
    )
    if negative.height:
        problems.append(f"{negative.height} spans have negative token counts")
    return problems
