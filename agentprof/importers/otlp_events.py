"""Agent events sent over the OpenTelemetry logs signal, as span records: Claude Code's and Codex's.

Claude Code (``claude_code.*``, or the bare ``event.name``): ``api_request`` is a model call that ended at the
event's time and lasted ``duration_ms`` (Anthropic usage: ``input_tokens`` without the cache,
``cache_read_tokens``, ``cache_creation_tokens``), ``api_error`` a failed one, ``tool_result`` a tool call
(``tool_name``, ``duration_ms``, ``success``), ``user_prompt`` the end of a ``user_turn`` wait that began when
the session's previous event ended. Codex (``codex.*``): ``api_request`` opens a model call (``duration_ms``
up to the response headers), its ``sse_event``\\ s extend it up to ``response.completed``, which carries the
usage (OpenAI's: input includes the cached tokens; a ``response.completed`` without token counts, the
transport's, ends the stream and leaves the call open for the usage event that follows); ``tool_result`` and
``user_prompt`` as Claude Code's. Over Codex's websocket transport ``websocket_request`` (the request frame
sent, ``duration_ms`` the send) opens the call as ``api_request`` does and ``websocket_event`` (one per message,
``event.kind`` its type) extends it as ``sse_event`` does; a message that is no ``response.*`` event outside a
call (``responsesapi.websocket_timing``) and ``websocket_connect`` (the handshake) are kept as generic spans.
Sessions from ``session.id`` (Claude Code), ``conversation.id`` (Codex) or ``gen_ai.conversation.id``, else the
record's trace id. Every other log record is kept as a zero-length ``orchestration`` span and counted in the
diagnostics. Prompt, argument and output text in the events is not kept.

Input: requests in the OTLP JSON shape (``{"resourceLogs": ...}``, as the Collector's file exporter writes
them and as ``agentprof collect`` decodes protobuf into); output: records for :mod:`.otlp_json`'s mapping.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import xxhash

from agentprof import semconv as sc
from agentprof.importers.context import ImportContext
from agentprof.trace import waits
from agentprof.trace.otlp import decode_attributes, decode_value, hex_id, otlp_items
from agentprof.trace.usage import normalize_usage

CLAUDE = ("api_request", "api_error", "tool_result", "user_prompt")
CODEX = ("codex.api_request", "codex.sse_event", "codex.tool_result", "codex.user_prompt", "codex.websocket_request",
         "codex.websocket_event")
SESSION_KEYS = ("session.id", "conversation.id", sc.CONVERSATION_ID, sc.SESSION_ID)
CONTENT_KEYS = frozenset({"prompt", "arguments", "output", "tool_parameters", "tool_input", "error",
                          "error.message", "user.email", "body"})
"""Event attributes that hold prompt, argument, output or error text (or a person's address): not kept."""
GENERIC = "agentprof.otlp.unmapped"
"""Attribute of a record kept as a generic span: what it was (``log``)."""
_STARTS = ("response.created", "response.in_progress")


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        return None


def _ns(v: Any) -> int | None:
    """Epoch nanoseconds (exact: an int or a decimal string, as OTLP JSON writes 64-bit integers)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v if v > 0 else None
    if isinstance(v, str) and v.isdigit():
        return int(v) or None
    n = _num(v)
    return int(n) if n is not None and n > 0 else None


def _iso_ns(v: Any) -> int | None:
    if not isinstance(v, str) or not v:
        return None
    try:
        d = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(d.timestamp() * 1_000_000) * 1000


def event_name(rec: dict[str, Any], attrs: dict[str, Any]) -> str | None:
    """The event's full name (``claude_code.api_request``, ``codex.tool_result``, …), if it has one."""
    names = [c for c in (rec.get("eventName"), attrs.get("event.name"), decode_value(rec.get("body")))
             if isinstance(c, str) and c and " " not in c and len(c) <= 200]
    if not names:
        return None
    full = next((c for c in names if "." in c), names[0])  # Claude Code: body claude_code.X, event.name X
    return f"claude_code.{full}" if full in CLAUDE else full


def _failed(log: _Log) -> bool:
    """Codex's ``success`` attribute says the request or message failed."""
    return str(log.attrs.get("success", "true")).lower() in ("false", "0")


class _Log:
    __slots__ = ("name", "ts", "attrs", "session", "trace_id", "order")

    def __init__(self, name: str | None, ts: int | None, attrs: dict[str, Any], session: str, trace_id: str,
                 order: int) -> None:
        self.name, self.ts, self.attrs, self.session, self.trace_id, self.order = \
            name, ts, attrs, session, trace_id, order


def log_records(requests: Iterable[dict[str, Any]]) -> list[_Log]:
    """Every log record of these ``ExportLogsServiceRequest``\\ s with its name, time, attributes (resource
    ones under the record's own) and session. Raises ``ValueError`` on a structure that is not OTLP."""
    out: list[_Log] = []
    for req in requests:
        for res, _, r in otlp_items(req, "resourceLogs", ("scopeLogs",), "logRecords", "log record"):
            attrs = {**res, **decode_attributes(r.get("attributes"))}
            ts = _ns(r.get("timeUnixNano")) or _iso_ns(attrs.get("event.timestamp")) or \
                _ns(r.get("observedTimeUnixNano"))
            tid = hex_id(r.get("traceId"), 32)
            session = next((str(attrs[k]) for k in SESSION_KEYS if attrs.get(k)), None) or tid or \
                "otlp-logs"
            out.append(_Log(event_name(r, attrs), ts, attrs, session,
                            tid or xxhash.xxh3_128_hexdigest(f"otlp-session\x1f{session}".encode()),
                            len(out)))
    return out


class _Mapper:
    """Turns one session's events, in time order, into span records."""

    def __init__(self, ctx: ImportContext, path: str) -> None:
        self.ctx, self.path = ctx, path
        self.out: list[dict[str, Any]] = []
        self.generic: Counter[str] = Counter()
        self.last_end: dict[str, int] = {}
        self.codex_open: dict[str, dict[str, Any]] = {}
        self._keys: Counter[str] = Counter()

    def _id(self, log: _Log, what: str) -> str:
        key = f"{log.session}\x1f{what}\x1f{log.ts}"
        self._keys[key] += 1
        return xxhash.xxh3_64_hexdigest(f"{key}\x1f{self._keys[key]}".encode())

    def _kept(self, log: _Log) -> dict[str, Any]:
        a = {k: v for k, v in log.attrs.items() if k not in CONTENT_KEYS and k not in SESSION_KEYS}
        if log.name:
            a["event.name"] = log.name
        return a

    def _emit(self, log: _Log, kind: str, name: str, start: int | None, end: int | None,
              attrs: dict[str, Any], status: str = "ok", error_type: str | None = None,
              timing: str | None = None) -> dict[str, Any]:
        rec = {"record": "span", "trace_id": log.trace_id, "span_id": self._id(log, name), "parent_id": None,
               "name": name, "kind": kind, "start_ns": start, "end_ns": end, "status": status,
               "error_type": error_type, "session_id": log.session, "parent_session_id": None,
               "timing": timing or ("measured" if start is not None and end is not None else "unknown"),
               "attributes": attrs}
        self.out.append(rec)
        if end is not None:
            self.last_end[log.session] = max(self.last_end.get(log.session, end), end)
        return rec

    def _usage(self, rec: dict[str, Any], raw: dict[str, Any], provider: str) -> None:
        usage = normalize_usage(raw, provider=provider)
        for col, v in usage.usable().as_columns().items():
            rec[col] = v
            if v is not None:
                rec["attributes"][{"input_tokens": sc.USAGE_INPUT_TOKENS, "output_tokens": sc.USAGE_OUTPUT_TOKENS,
                                   "cache_read_tokens": sc.USAGE_CACHE_READ_INPUT_TOKENS,
                                   "cache_write_tokens": sc.USAGE_CACHE_CREATION_INPUT_TOKENS,
                                   "reasoning_tokens": sc.USAGE_REASONING_OUTPUT_TOKENS}[col]] = v
        for problem in usage.problems:
            self.ctx.note("impossible_usage", f"{problem} (value dropped)", self.path, None, rec["span_id"])

    def _span_of(self, log: _Log) -> tuple[int | None, int | None]:
        dur = _num(log.attrs.get("duration_ms"))
        if log.ts is None:
            return None, None
        return (log.ts - int(dur * 1e6) if dur is not None and dur >= 0 else log.ts), log.ts

    def _model(self, log: _Log, provider: str, error: bool) -> dict[str, Any]:
        a = self._kept(log)
        model = a.get("model")
        start, end = self._span_of(log)
        a.update({sc.OPERATION_NAME: sc.OP_CHAT, sc.PROVIDER_NAME: provider})
        if model:
            a[sc.REQUEST_MODEL] = model
        code = log.attrs.get("status_code", log.attrs.get(sc.HTTP_STATUS_CODE))
        etype = (f"http {code}" if code not in (None, "", "undefined") else "error") if error else None
        rec = self._emit(log, "model", sc.model_span_name(model), start, end, a, "error" if error else "ok", etype)
        rec["provider"], rec["model"] = provider, model
        return rec

    def _tool(self, log: _Log) -> None:
        a = self._kept(log)
        tool = str(log.attrs.get("tool_name") or "unknown")
        a[sc.TOOL_NAME] = tool
        if log.attrs.get("call_id"):
            a[sc.TOOL_CALL_ID] = log.attrs["call_id"]
        ok = not _failed(log)
        start, end = self._span_of(log)
        self._emit(log, "tool", sc.tool_span_name(tool), start, end, a, "ok" if ok else "error",
                   None if ok else "tool_failed")

    def _prompt(self, log: _Log) -> None:
        prev = self.last_end.get(log.session)
        if log.ts is not None and prev is not None and log.ts > prev:
            self._emit(log, "wait", f"wait {waits.USER_TURN}", prev, log.ts,
                       {sc.WAIT_REASON: waits.USER_TURN, "agentprof.wait.until": log.name or "user prompt"})
        elif log.ts is not None:
            self.last_end[log.session] = max(prev or log.ts, log.ts)

    # --- Codex: a model call spans its api_request and its sse_events up to response.completed ---------
    def _codex_close(self, session: str, incomplete: bool) -> None:
        call = self.codex_open.pop(session, None)
        if call is None:
            return
        rec = call["rec"]
        if incomplete and not call.get("done"):
            rec["attributes"][sc.INCOMPLETE] = True
        rec["attributes"][sc.STREAM_CHUNKS] = call["chunks"]
        self.last_end[session] = max(self.last_end.get(session, rec["end_ns"] or 0), rec["end_ns"] or 0)

    def _codex_request(self, log: _Log) -> None:
        self._codex_close(log.session, incomplete=True)
        code = _num(log.attrs.get(sc.HTTP_STATUS_CODE))
        failed = bool(log.attrs.get("error.message")) or (code is not None and not 200 <= code < 300) or \
            _failed(log)
        rec = self._model(log, "openai", failed)
        rec["stream"] = True
        if failed:
            rec["error_type"] = f"http {int(code)}" if code is not None else "error"
            return
        self.codex_open[log.session] = {"rec": rec, "chunks": 0}

    def _codex_sse(self, log: _Log) -> None:
        call = self.codex_open.get(log.session)
        if call is None and log.name == "codex.websocket_event" and \
                not str(log.attrs.get("event.kind") or "").startswith("response."):
            self._generic(log)  # a websocket message that is no response event, outside any call
            return
        if call is None:  # an event of a call whose request was not seen: its own call from here
            self._codex_request(_Log("codex.api_request", log.ts, {**log.attrs, "duration_ms": 0}, log.session,
                                     log.trace_id, log.order))
            call = self.codex_open.get(log.session)
            if call is None:
                return
        rec, kind = call["rec"], str(log.attrs.get("event.kind") or "")
        if log.ts is not None:
            rec["end_ns"] = max(rec["end_ns"] or log.ts, log.ts)
        call["chunks"] += 1
        if rec.get("ttft_s") is None and kind not in _STARTS and log.ts is not None and rec["start_ns"] is not None:
            rec["ttft_s"] = (log.ts - rec["start_ns"]) / 1e9
            rec["attributes"][sc.RESPONSE_TIME_TO_FIRST_CHUNK] = rec["ttft_s"]
        a = log.attrs
        if a.get("error.message") or kind == "response.failed" or _failed(log):
            rec["status"], rec["error_type"] = "error", kind or "sse_error"
            self._codex_close(log.session, incomplete=False)
        elif kind == "response.completed" and a.get("input_token_count") is None and \
                a.get("output_token_count") is None:
            call["done"] = True  # the transport's report: the usage event follows
        elif kind == "response.completed":
            self._usage(rec, {"input_tokens": a.get("input_token_count"),
                              "input_tokens_details": {"cached_tokens": a.get("cached_token_count")},
                              "output_tokens": a.get("output_token_count"),
                              "output_tokens_details": {"reasoning_tokens": a.get("reasoning_token_count")}}, "openai")
            self._codex_close(log.session, incomplete=False)

    def add(self, log: _Log) -> None:
        n = log.name
        if n == "claude_code.api_request":
            rec = self._model(log, "anthropic", False)
            a = log.attrs
            self._usage(rec, {"input_tokens": a.get("input_tokens"), "cache_read_input_tokens": a.get("cache_read_tokens"),
                              "cache_creation_input_tokens": a.get("cache_creation_tokens"),
                              "output_tokens": a.get("output_tokens")}, "anthropic")
        elif n == "claude_code.api_error":
            self._model(log, "anthropic", True)
        elif n in ("claude_code.tool_result", "codex.tool_result"):
            self._tool(log)
        elif n in ("claude_code.user_prompt", "codex.user_prompt"):
            self._prompt(log)
        elif n in ("codex.api_request", "codex.websocket_request"):
            self._codex_request(log)
        elif n in ("codex.sse_event", "codex.websocket_event"):
            self._codex_sse(log)
        else:
            self._generic(log)

    def _generic(self, log: _Log) -> None:
        """A record with no known agent meaning: a zero-length span, counted by name in the diagnostics."""
        n = log.name
        self.generic[n or "(unnamed log record)"] += 1
        a = self._kept(log)
        a[GENERIC] = "log"
        self._emit(log, "orchestration", n or "log", log.ts, log.ts, a)

    def finish(self) -> list[dict[str, Any]]:
        for session in list(self.codex_open):
            self._codex_close(session, incomplete=True)
        return self.out


def event_spans(requests: Iterable[dict[str, Any]], ctx: ImportContext, path: str) -> list[dict[str, Any]]:
    """Span records (kind, session, usage columns and timing set) for the log records of ``requests``."""
    return map_events(log_records(requests), ctx, path)


def map_events(logs: list[_Log], ctx: ImportContext, path: str) -> list[dict[str, Any]]:
    """Span records for log records as :func:`log_records` reads them, in the order they came (the records are
    read, not changed)."""
    m = _Mapper(ctx, path)
    for _i, log in sorted(enumerate(logs), key=lambda x: (x[1].session, x[1].ts is None, x[1].ts or 0, x[0])):
        m.add(log)
    out = m.finish()
    if m.generic:
        kinds = ", ".join(f"{k} ({v})" for k, v in m.generic.most_common(5))
        more = f" and {len(m.generic) - 5} more kinds" if len(m.generic) > 5 else ""
        ctx.note("otlp_unmapped", f"{sum(m.generic.values())} log record(s) that are no known agent event kept "
                 f"as generic spans: {kinds}{more}", path)
    return out
