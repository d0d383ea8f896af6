"""The trace model shared by every stage: a polars span table plus metadata. See ``docs/ARCHITECTURE.md``."""

from __future__ import annotations

import os

import polars as pl

from agentprof.trace.files import (
    JsonlTraceWriter,
    concat,
    is_agentprof_jsonl,
    read,
    read_jsonl,
    read_parquet,
    write,
    write_jsonl,
    write_parquet,
)
from agentprof.trace.records import records_from_spans, spans_from_records
from agentprof.trace.schema import KINDS, SCHEMA, Diagnostic, Trace, TraceMeta, conform, empty_spans, validate


def load(path: str | os.PathLike[str], skip_bad_lines: bool = False) -> pl.DataFrame:
    """Load an agentprof trace file and return its validated canonical span table."""
    return read(path, skip_bad_lines=skip_bad_lines).spans


__all__ = [
    "KINDS", "SCHEMA", "Diagnostic", "JsonlTraceWriter", "Trace", "TraceMeta", "concat", "conform",
    "empty_spans", "is_agentprof_jsonl", "load", "read", "read_jsonl", "read_parquet", "records_from_spans",
    "spans_from_records", "validate", "write", "write_jsonl", "write_parquet",
]
