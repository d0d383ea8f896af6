"""The trace model shared by every stage: a polars span table plus metadata. See ``docs/ARCHITECTURE.md``.

Names are resolved lazily (PEP 562) so that capture, which runs inside the user's agent, can import the
polars-free parts (``writer``, ``meta``, ``prompt``, ``usage``) without paying for polars at start-up.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from agentprof.trace.schema import (
        KINDS,
        SCHEMA,
        Diagnostic,
        Trace,
        TraceMeta,
        conform,
        empty_spans,
        validate,
    )

_LAZY: dict[str, str] = {
    "JsonlTraceWriter": "agentprof.trace.writer",
    "Diagnostic": "agentprof.trace.meta",
    "TraceMeta": "agentprof.trace.meta",
    "concat": "agentprof.trace.files",
    "is_agentprof_jsonl": "agentprof.trace.files",
    "read": "agentprof.trace.files",
    "read_jsonl": "agentprof.trace.files",
    "read_parquet": "agentprof.trace.files",
    "write": "agentprof.trace.files",
    "write_jsonl": "agentprof.trace.files",
    "write_parquet": "agentprof.trace.files",
    "records_from_spans": "agentprof.trace.records",
    "spans_from_records": "agentprof.trace.records",
    "KINDS": "agentprof.trace.schema",
    "SCHEMA": "agentprof.trace.schema",
    "Trace": "agentprof.trace.schema",
    "conform": "agentprof.trace.schema",
    "empty_spans": "agentprof.trace.schema",
    "validate": "agentprof.trace.schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentprof.trace' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load(path: str | os.PathLike[str], skip_bad_lines: bool = False) -> pl.DataFrame:
    """Load an agentprof trace file and return its validated canonical span table."""
    from agentprof.trace.files import read

    return read(path, skip_bad_lines=skip_bad_lines).spans


__all__ = [
    "KINDS", "SCHEMA", "Diagnostic", "JsonlTraceWriter", "Trace", "TraceMeta", "concat", "conform",
    "empty_spans", "is_agentprof_jsonl", "load", "read", "read_jsonl", "read_parquet", "records_from_spans",
    "spans_from_records", "validate", "write", "write_jsonl", "write_parquet",
]
