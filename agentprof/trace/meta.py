"""Trace-level metadata and diagnostics: plain dataclasses with no polars dependency.

Kept apart from :mod:`agentprof.trace.schema` so that capture (which runs inside the user's agent) can write
trace files without importing polars. ``schema`` re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Diagnostic:
    """Something odd found in the input (impossible token counts, skipped lines, unknown records)."""

    kind: str
    message: str
    path: str | None = None
    line: int | None = None
    span_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class TraceMeta:
    """Trace-level metadata: where it came from and how its prompts were hashed."""

    source_format: str = "agentprof"
    tokenizer: str = "none"
    tokenizer_exact: bool = False
    block_size: int = 64
    tool_version: str = ""
    created: str = ""
    name: str = ""
    capture_overhead_ns: int | None = None
    capture_background_cpu_ns: int | None = None
    sources: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        extra = d.pop("extra")
        d.update(extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TraceMeta:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d and k != "extra"}
        extra = {k: v for k, v in d.items() if k not in cls.__dataclass_fields__ and k != "record"}
        return cls(**known, extra=extra)
