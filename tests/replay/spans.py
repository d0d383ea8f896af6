"""Small builders of span tables for replay tests (times in seconds)."""

from __future__ import annotations

from typing import Any

from agentprof.trace import Trace, TraceMeta, spans_from_records

S = 1_000_000_000


def span(sid: str, kind: str, start: float, end: float, parent: str | None = "root", session: str = "s1",
         **cols: Any) -> dict[str, Any]:
    name = cols.pop("name", f"{kind} {sid}")
    attrs = cols.pop("attributes", {})
    return {"trace_id": "t1", "span_id": sid, "parent_id": parent, "name": name, "kind": kind,
            "start_ns": int(start * S), "end_ns": int(end * S), "session_id": session, "attributes": attrs, **cols}


def agent(start: float, end: float, session: str = "s1", sid: str = "root", parent: str | None = None,
          parent_session: str | None = None) -> dict[str, Any]:
    d = span(sid, "agent", start, end, parent=parent, session=session, name="invoke_agent test")
    if parent_session:
        d["parent_session_id"] = parent_session
    return d


def model(sid: str, start: float, end: float, inp: int = 20000, out: int = 300, **kw: Any) -> dict[str, Any]:
    return span(sid, "model", start, end, name="chat gpt-oss-120b", model="gpt-oss-120b", input_tokens=inp,
                output_tokens=out, **kw)


def trace(records: list[dict[str, Any]], block_size: int = 64) -> Trace:
    return Trace(TraceMeta(source_format="agentprof", block_size=block_size), spans_from_records(records))
