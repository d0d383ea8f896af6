"""``as_trace``: what the analysis entry points accept besides a :class:`Trace` — the span table that
``agentprof.trace.load(path)`` returns, or a path — so the first thing a user reaches for works."""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from agentprof.errors import AgentprofError
from agentprof.trace.meta import TraceMeta
from agentprof.trace.schema import Trace, conform, validate


def as_trace(obj: Any) -> Trace:
    """``obj`` as a :class:`Trace`: a Trace as is, a span table (validated) with empty metadata, a path loaded
    with :func:`agentprof.importers.load_any`. Anything else is an :class:`AgentprofError`."""
    if isinstance(obj, Trace):
        return obj
    if isinstance(obj, pl.DataFrame):
        spans = conform(obj)
        problems = validate(spans)
        if problems:
            raise AgentprofError("not an agentprof span table: " + "; ".join(problems[:3]))
        return Trace(meta=TraceMeta(), spans=spans)
    if isinstance(obj, (str, os.PathLike)):
        from agentprof.importers import load_any

        return load_any(obj)
    raise AgentprofError(f"expected a Trace, a span table or a path, got {type(obj).__name__}")
