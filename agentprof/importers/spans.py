"""Build the canonical span table of one imported trace: deterministic ids, one ``agent`` span per session.

Importers call :meth:`SpanBuilder.session` for each session and :meth:`SpanBuilder.add` for each span; ids are
hashes of the trace key and a per-span key, so importing the same input twice gives identical tables.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import xxhash

from agentprof import semconv as sc
from agentprof.importers.context import ImportContext
from agentprof.importers.plausibility import Clip, clip
from agentprof.trace import waits
from agentprof.trace.prompt import Fingerprint
from agentprof.trace.schema import SCHEMA
from agentprof.trace.usage import Unreadable, Usage, shown_number

_COLUMNS = tuple(SCHEMA)
_TIMES = ("start_ns", "end_ns")
_INTS = tuple(c for c, t in SCHEMA.items() if t.is_integer() and c not in _TIMES)
_FLOATS = tuple(c for c, t in SCHEMA.items() if t.is_float())
EARLIEST_NS = 946_684_800 * 1_000_000_000
"""2000-01-01T00:00:00Z: no agent log is older; an earlier time is a broken clock or a unit mistake."""
FUTURE_SLACK_NS = 86_400 * 1_000_000_000
"""A time up to a day ahead of this machine's clock is accepted (a log's local time read as UTC)."""
_INT64_MAX = (1 << 63) - 1


@dataclass
class _Session:
    session_id: str
    agent_row: int
    start_ns: int | None = None
    end_ns: int | None = None
    timing: str | None = None
    rows: list[int] = field(default_factory=list)
    contained: bool = True  # its parent session's extent includes it


def _attrs_json(attrs: dict[str, Any] | None) -> str | None:
    if not attrs:
        return None
    clean = {k: v for k, v in attrs.items() if v is not None}
    return json.dumps(clean, sort_keys=True, separators=(",", ":"), default=str) if clean else None


class SpanBuilder:
    """Collects the spans of one trace and returns them as the canonical polars table."""

    def __init__(self, source_format: str, trace_key: str, ctx: ImportContext | None = None,
                 path: str | None = None) -> None:
        self.source_format = source_format
        self.path = path
        """The file the spans come from when it is one (named by diagnostics raised away from its records)."""
        self.trace_id = xxhash.xxh3_128_hexdigest(f"{source_format}\x1f{trace_key}".encode())
        self.ctx = ctx or ImportContext()
        self.cols: dict[str, list[Any]] = {name: [] for name in _COLUMNS}
        self.sessions: dict[str, _Session] = {}
        self._ids: set[str] = set()

    def span_id(self, *key: object) -> str:
        """A 16-hex-digit id from the trace id and ``key``; unique within the trace."""
        base = "\x1f".join(str(k) for k in key)
        n = 0
        while True:
            sid = xxhash.xxh3_64_hexdigest(f"{self.trace_id}\x1f{base}\x1f{n}".encode())
            if sid not in self._ids:
                self._ids.add(sid)
                return sid
            n += 1

    def in_range(self, row: dict[str, Any], path: str | None = None, line: int | None = None) -> dict[str, Any]:
        """``row`` with every time outside 2000 … now + 1 day and every number beyond int64 (or not finite, or
        negative) set unknown, each with an ``out_of_range`` diagnostic naming file, line and field."""
        if path is None and self.ctx.where is not None:
            path, line = self.ctx.where
        if path is None and self.path is not None:
            path, line = self.path, _source_line(row.get("attributes"))
        latest = time.time_ns() + FUTURE_SLACK_NS
        for col in _TIMES:
            v = row.get(col)
            if v is not None and not EARLIEST_NS <= v <= latest:
                self.ctx.note("out_of_range", f"{row.get('kind')} span {row.get('name')!r}: {col} "
                              f"{_when(v)} is before 2000 or in the future; read as unknown", path, line)
                row[col] = None
        for col in _INTS:
            v = row.get(col)
            if v is not None and not 0 <= v <= _INT64_MAX:
                self.ctx.note("out_of_range", f"{row.get('kind')} span {row.get('name')!r}: {col} "
                              f"{shown_number(v)} out of range; read as unknown", path, line)
                row[col] = None
        for col in _FLOATS:
            v = row.get(col)
            if v is not None and not (math.isfinite(v) and 0 <= v <= 1e8):
                self.ctx.note("out_of_range", f"{row.get('kind')} span {row.get('name')!r}: {col} {v!r} out of "
                              "range; read as unknown", path, line)
                row[col] = None
        return row

    def _append(self, row: dict[str, Any]) -> int:
        for name in _COLUMNS:
            self.cols[name].append(row.get(name))
        return len(self.cols["span_id"]) - 1

    def session(self, session_id: str, *, role: str = "main", parent_session_id: str | None = None,
                agent_name: str | None = None, parent_span_id: str | None = None,
                start_ns: int | None = None, end_ns: int | None = None, timing: str | None = None,
                attributes: dict[str, Any] | None = None, contained: bool = True) -> str:
        """Declare a session and its ``agent`` span (extent: its own first/last record and all its spans).

        ``start_ns``/``end_ns`` are the session's own first and last recorded moments, if the log has them;
        ``timing`` says how they were obtained (default: ``measured`` when both are given). ``contained=False``
        keeps the session out of its parent session's extent (a retry attempt follows its parent, it does not
        run inside it).
        """
        if session_id in self.sessions:
            return self.cols["span_id"][self.sessions[session_id].agent_row]
        sid = self.span_id("agent", session_id)
        attrs = {sc.SESSION_ROLE: role, sc.AGENT_NAME: agent_name, **(attributes or {})}
        row = self._append({
            "trace_id": self.trace_id, "span_id": sid, "parent_id": parent_span_id, "session_id": session_id,
            "parent_session_id": parent_session_id, "kind": "agent", "name": sc.agent_span_name(agent_name),
            "status": "ok", "attributes": _attrs_json(attrs),
        })
        ends = self.in_range({"kind": "agent", "name": sc.agent_span_name(agent_name), "start_ns": start_ns,
                              "end_ns": end_ns})
        start_ns, end_ns = ends["start_ns"], ends["end_ns"]
        t = timing or ("measured" if start_ns is not None and end_ns is not None else None)
        self.sessions[session_id] = _Session(session_id, row, start_ns, end_ns, t, contained=contained)
        return sid

    def agent_span_id(self, session_id: str) -> str:
        return self.cols["span_id"][self.sessions[session_id].agent_row]

    def set_session_parent(self, session_id: str, parent_span_id: str | None) -> None:
        """Attach a session's agent span under a span of another session (e.g. the tool call that ran it)."""
        self.cols["parent_id"][self.sessions[session_id].agent_row] = parent_span_id

    def add(self, session_id: str, kind: str, name: str, *, key: tuple[object, ...] | None = None,
            start_ns: int | None = None, end_ns: int | None = None, timing: str | None = None,
            parent_id: str | None = None, status: str = "ok", error_type: str | None = None,
            attributes: dict[str, Any] | None = None, source: tuple[str | None, int | None] = (None, None),
            **columns: Any) -> str:
        """Add one span to a declared session; ``timing`` defaults to ``measured``/``unknown`` by the ends.
        Values out of range are read as unknown with a diagnostic at ``source`` (file, line; default: the
        record being imported)."""
        sess = self.sessions[session_id]
        sid = self.span_id(kind, session_id, *(key if key is not None else (len(self.cols["span_id"]),)))
        checked = self.in_range({"kind": kind, "name": name, "start_ns": start_ns, "end_ns": end_ns,
                                 "attributes": attributes, **columns}, *source)
        start_ns, end_ns = checked.pop("start_ns"), checked.pop("end_ns")
        columns = {k: checked[k] for k in columns if k != "attributes"}
        if timing == "measured" and (start_ns is None or end_ns is None):
            timing = None
        if timing is None:
            timing = "measured" if start_ns is not None and end_ns is not None else "unknown"
        if start_ns is not None and end_ns is not None and end_ns < start_ns:
            where = source if source[0] is not None else self.ctx.where or (None, None)
            self.ctx.note("clock_skew", f"{kind} span {name!r} ended {(start_ns - end_ns) / 1e9:.3f} s before "
                          "it started; end set to start", where[0], where[1], span_id=sid)
            end_ns = start_ns
            timing = "derived"
        row = {
            "trace_id": self.trace_id, "span_id": sid,
            "parent_id": parent_id if parent_id is not None else self.cols["span_id"][sess.agent_row],
            "session_id": session_id, "parent_session_id": self.cols["parent_session_id"][sess.agent_row],
            "kind": kind, "name": name, "start_ns": start_ns, "end_ns": end_ns, "timing": timing,
            "status": status, "error_type": error_type, "attributes": _attrs_json(attributes), **columns,
        }
        sess.rows.append(self._append(row))
        return sid

    def add_model_call(self, session_id: str, *, model: str | None, provider: str | None,
                       usage: Usage | None = None, fingerprint: Fingerprint | None = None,
                       path: str | None = None, line: int | None = None, inner_ns: Sequence[int] = (),
                       **kw: Any) -> str:
        """A model span with normalized usage; impossible usage values become diagnostics, not numbers.

        A ``derived`` span is held to :mod:`agentprof.importers.plausibility` (``inner_ns``: the times of the
        call's own records): a start it cannot have had is moved later and the time cut off becomes an
        ``idle`` wait or an unattributed orchestration span, with an ``implausible_duration`` diagnostic."""
        if kw.get("timing") == "derived" and kw.get("start_ns") is not None and kw.get("end_ns") is not None:
            out = usage.usable().output_tokens if usage is not None else None
            c = clip(kw["start_ns"], kw["end_ns"], out, inner_ns)
            if c is not None:
                kw = self._clip(session_id, c, kw, path, line)
        cols: dict[str, Any] = {}
        if usage is not None:
            cols.update(usage.usable().as_columns())
        if fingerprint is not None:
            cols["block_hashes"] = fingerprint.block_hashes
            cols["prompt_tokens_hashed"] = fingerprint.tokens
            cols["segments"] = fingerprint.segments
            self.ctx.note_model(model)
        sid = self.add(session_id, "model", sc.model_span_name(model), model=model, provider=provider,
                       source=(path, line) if path is not None else (None, None), **cols, **kw)
        if usage is not None:
            for p in usage.problems:
                self.ctx.note("impossible_usage", f"{p} (value dropped)", path, line, sid)
        return sid

    def _clip(self, session_id: str, c: Clip, kw: dict[str, Any], path: str | None, line: int | None
              ) -> dict[str, Any]:
        """Apply a plausibility clip to a derived model call's columns and record the time cut off."""
        start = kw["start_ns"]
        cut_s = (c.new_start_ns - start) / 1e9
        evidence = {"agentprof.plausibility.rule": c.rule, "agentprof.plausibility.detail": c.detail,
                    "agentprof.source.line": line}
        if cut_s >= waits.IDLE_GAP_S or c.rule == "idle_gap":
            self.add(session_id, "wait", f"wait {waits.IDLE}", start_ns=start, end_ns=c.new_start_ns,
                     timing="derived", attributes={sc.WAIT_REASON: waits.IDLE, **evidence})
        else:
            self.add(session_id, "orchestration", "unattributed", start_ns=start, end_ns=c.new_start_ns,
                     timing="derived", attributes={"agentprof.unattributed": True, **evidence})
        self.ctx.note("implausible_duration", f"derived model call start moved {cut_s:.0f} s later: {c.detail}",
                      path, line)
        attrs = dict(kw.get("attributes") or {})
        attrs["agentprof.timing.clipped_s"] = round(cut_s, 3)
        return {**kw, "start_ns": c.new_start_ns, "attributes": attrs}

    def finish(self) -> pl.DataFrame:
        """Fill every agent span's extent and timing, and return the span table (canonical schema)."""
        starts, ends, timings = self.cols["start_ns"], self.cols["end_ns"], self.cols["timing"]
        # innermost sessions first, so a parent's extent includes its child sessions' agent spans
        by_parent: dict[str | None, list[_Session]] = {}
        for s in self.sessions.values():
            by_parent.setdefault(self.cols["parent_session_id"][s.agent_row], []).append(s)
        order: list[_Session] = []

        def visit(s: _Session) -> None:
            for child in by_parent.get(s.session_id, []):
                visit(child)
            order.append(s)

        roots = [s for s in self.sessions.values()
                 if self.cols["parent_session_id"][s.agent_row] not in self.sessions]
        for s in roots:
            visit(s)
        for s in order:
            rows = list(s.rows) + [c.agent_row for c in by_parent.get(s.session_id, []) if c.contained]
            lo = [starts[r] for r in rows if starts[r] is not None] + [ends[r] for r in rows if ends[r] is not None]
            hi = list(lo)
            if s.start_ns is not None:
                lo.append(s.start_ns)
            if s.end_ns is not None:
                hi.append(s.end_ns)
            if s.start_ns is not None and s.end_ns is None:
                hi.append(s.start_ns)
            if s.end_ns is not None and s.start_ns is None:
                lo.append(s.end_ns)
            starts[s.agent_row] = min(lo) if lo else None
            ends[s.agent_row] = max(hi) if hi else None
            if starts[s.agent_row] is None:
                timings[s.agent_row] = "unknown"
            elif s.timing:
                timings[s.agent_row] = s.timing
            else:
                measured = all(timings[r] == "measured" for r in rows if starts[r] is not None or ends[r] is not None)
                timings[s.agent_row] = "measured" if measured else "derived"
        return pl.DataFrame(self.cols, schema=SCHEMA, strict=False)


def _when(ns: int) -> str:
    """A time for a message: ISO 8601 UTC when it has a date, else the number."""
    import datetime as _dt

    if isinstance(ns, Unreadable):
        return str(ns)
    try:
        return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return shown_number(ns)


def _source_line(attrs: Any) -> int | None:
    """The log line a span's attributes name (``agentprof.source.line``), if any."""
    line = attrs.get("agentprof.source.line") if isinstance(attrs, dict) else None
    return line if isinstance(line, int) and not isinstance(line, bool) else None
