"""OTLP/JSON export: the trace's spans as an OpenTelemetry ``ExportTraceServiceRequest`` in JSON.

The conversion itself lives with the trace model (``agentprof.trace.otlp.to_otlp_json``), shared with the
OTLP importer so that export and import stay each other's inverse; this module only writes the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentprof.errors import AgentprofError
from agentprof.trace import Trace


def to_otlp(trace: Trace) -> dict[str, Any]:
    """The OTLP/JSON document for ``trace``."""
    try:
        from agentprof.trace.otlp import to_otlp_json
    except ImportError as e:
        raise AgentprofError(f"OTLP JSON export is not available in this installation ({e})") from None
    doc = to_otlp_json(trace)
    return json.loads(doc) if isinstance(doc, (str, bytes)) else doc


def count_spans(doc: dict[str, Any]) -> int:
    """Spans in an OTLP/JSON document."""
    return sum(len(ss.get("spans", [])) for rs in doc.get("resourceSpans", []) for ss in rs.get("scopeSpans", []))


def write_otlp_json(trace: Trace, path: str | os.PathLike[str]) -> int:
    """Write the OTLP/JSON document to ``path``; returns the number of spans written."""
    doc = to_otlp(trace)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"), ensure_ascii=False)
    return count_spans(doc)
