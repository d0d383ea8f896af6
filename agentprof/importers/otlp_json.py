"""OTLP JSON files (the OpenTelemetry Collector's file exporter: one ``ExportTraceServiceRequest`` per line,
or one pretty-printed request) with spans from the official GenAI instrumentation, OpenLLMetry or
OpenInference, and agentprof's own exports.

Mapping (see ``docs/IMPORTING.md``): span kind from ``agentprof.kind``, else ``gen_ai.operation.name``
(``chat``/``text_completion``/``generate_content``/``embeddings`` -> model, ``execute_tool`` -> tool,
``invoke_agent`` -> agent), ``openinference.span.kind`` (LLM, TOOL, AGENT, …), ``traceloop.span.kind`` and
``llm.request.type``; anything else is ``orchestration``. Usage goes through the token normalizer (current
and legacy ``gen_ai.usage.*``, ``llm.usage.*``, ``llm.token_count.*``). Sessions from
``agentprof.session.id``, ``gen_ai.conversation.id``, ``session.id`` (inherited down the span tree), else the
trace; a session without an agent span gets one (``derived``), an agent span nested in another agent starts a
sub-agent session. Spans exported by agentprof come back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprof import semconv as sc
from agentprof.errors import TraceFormatError
from agentprof.importers.context import ImportContext
from agentprof.importers.jsonl import iter_records, read_bytes
from agentprof.importers.otlp_events import GENERIC, log_records, map_events
from agentprof.trace.otlp import META_ATTRIBUTE, span_records
from agentprof.trace.records import spans_from_records
from agentprof.trace.schema import Diagnostic, Trace, TraceMeta
from agentprof.trace.usage import normalize_usage

FORMAT = "otlp-json"
_MODEL_OPS = {"chat", "text_completion", "generate_content", "completion", "embeddings", "responses"}
_OI_KINDS = {"LLM": "model", "EMBEDDING": "model", "TOOL": "tool", "AGENT": "agent"}
_TL_KINDS = {"tool": "tool", "agent": "agent", "workflow": "agent"}
SPAN_SESSION_KEYS = (sc.SESSION_ID, sc.CONVERSATION_ID, "session.id", "traceloop.association.properties.session_id",
                 "langfuse.session.id")
_RESOURCE_SESSION_KEYS = ("session.id", sc.CONVERSATION_ID)
"""Resource attributes that name the session of every span in the request (set by some SDK set-ups)."""
_USAGE_PREFIXES = ("gen_ai.usage.", "llm.usage.", "llm.token_count.")
_USAGE_ONLY = "model?"  # usage attributes and nothing else: a model call, unless it sums model calls below it


def classify(name: str, attrs: dict[str, Any]) -> str:
    """The agentprof span kind of a foreign span, judged alone (a span known only by its token usage counts
    as a model call; the importer also looks below it, see :func:`_settle_usage_only`)."""
    k = _classify(name, attrs)
    return "model" if k == _USAGE_ONLY else k


def _classify(name: str, attrs: dict[str, Any]) -> str:
    k = attrs.get(sc.KIND)
    if k in ("agent", "model", "tool", "parse", "orchestration", "wait"):
        return k
    op = attrs.get(sc.OPERATION_NAME)
    if op in _MODEL_OPS:
        return "model"
    if op == sc.OP_EXECUTE_TOOL:
        return "tool"
    if op in (sc.OP_INVOKE_AGENT, "create_agent"):
        return "agent"
    oi = attrs.get("openinference.span.kind")
    if isinstance(oi, str) and oi.upper() in _OI_KINDS:
        return _OI_KINDS[oi.upper()]
    tl = attrs.get("traceloop.span.kind")
    if isinstance(tl, str) and tl in _TL_KINDS:
        return _TL_KINDS[tl]
    if attrs.get("llm.request.type") in ("chat", "completion", "embedding"):
        return "model"
    first = name.split(" ", 1)[0]
    if first in _MODEL_OPS or name.endswith((".chat", ".completion", ".messages", ".responses")):
        return "model"
    if first == sc.OP_EXECUTE_TOOL:
        return "tool"
    # an agent run by name (Pydantic AI: "agent run", later "invoke_agent <name>"); it may carry the run's
    # summed token usage, which does not make it a model call
    if first == sc.OP_INVOKE_AGENT or name == "agent run":
        return "agent"
    if any(key.startswith(_USAGE_PREFIXES) for key in attrs):
        return _USAGE_ONLY
    if attrs.get(sc.TOOL_NAME) and (attrs.get(sc.TOOL_CALL_ID) or name.startswith("running tool")):
        return "tool"  # a tool run named otherwise (Pydantic AI before the execute_tool span name)
    return "orchestration"


def _read_requests(path: Path, ctx: ImportContext) -> list[tuple[int, dict[str, Any]]]:
    raw = read_bytes(path)
    first = raw.lstrip().split(b"\n", 1)[0]
    try:
        json.loads(first)
        return list(iter_records(path, ctx, "OTLP JSON"))
    except ValueError:
        pass
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError:
        return list(iter_records(path, ctx, "OTLP JSON"))  # raises or skips with the line located
    if not isinstance(doc, dict):
        raise TraceFormatError(str(path), 1, "expected an OTLP ExportTraceServiceRequest object")
    return [(1, doc)]


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one OTLP JSON file (trace, log and metric requests, one per line or one document)."""
    path = Path(paths[0])
    return import_requests(_read_requests(path, ctx), ctx, str(path))


@dataclass
class Decoded:
    """One OTLP request read into records: the per-record half of the mapping, which does not depend on other
    requests (``agentprof collect`` reads each request once and maps all of them again as more arrive).
    :func:`map_decoded` copies the records before it changes them."""

    line: int | None
    own: list[dict[str, Any]] = field(default_factory=list)
    foreign: list[tuple[dict[str, Any], str | None, int | None]] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)  # otlp_events log records
    logs_error: str | None = None
    metric_points: int = 0
    meta: dict[str, Any] | None = None
    bad: str | None = None


def decode_request(line: int | None, req: dict[str, Any]) -> Decoded:
    """The records of one request in the JSON shape (see :class:`Decoded`)."""
    d = Decoded(line)
    if "resourceLogs" in req:
        try:
            d.logs = log_records([req])
        except (ValueError, TypeError, AttributeError) as e:
            d.logs_error = str(e)
        return d
    if "resourceMetrics" in req:
        d.metric_points = _count_points(req)
        return d
    if "resourceSpans" not in req:
        d.bad = "not an OTLP request (no 'resourceSpans', 'resourceLogs' or 'resourceMetrics')"
        return d
    try:
        recs = list(span_records(req))
    except (ValueError, TypeError, AttributeError) as e:
        d.bad = f"malformed OTLP request ({e})"
        return d
    for rec, res_attrs, scope in recs:
        if META_ATTRIBUTE in res_attrs:
            if d.meta is None:
                try:
                    d.meta = json.loads(res_attrs[META_ATTRIBUTE])
                except (TypeError, ValueError):
                    d.meta = {}
            d.own.append(rec)
        else:
            a = rec["attributes"]
            res_session = next((res_attrs[k] for k in _RESOURCE_SESSION_KEYS if res_attrs.get(k)), None)
            if res_session is not None and not any(a.get(k) for k in SPAN_SESSION_KEYS):
                a["session.id"] = res_session
            d.foreign.append((rec, scope, line))
    return d


def import_requests(requests: Sequence[tuple[int | None, dict[str, Any]]], ctx: ImportContext, path: str) -> Trace:
    """The trace of OTLP requests in the JSON shape, each with the line it came from: the one mapping that
    ``agentprof import`` and ``agentprof collect`` share. Spans as described above; log records through
    :mod:`.otlp_events` (Claude Code's and Codex's events); metric requests are counted, not mapped."""
    return map_decoded([decode_request(line, req) for line, req in requests], ctx, path)


def _copy(rec: dict[str, Any]) -> dict[str, Any]:
    return {**rec, "attributes": dict(rec["attributes"])}


def map_decoded(decoded: Sequence[Decoded], ctx: ImportContext, path: str) -> Trace:
    """The trace of decoded requests (:func:`decode_request`), in the order they came; the records in
    ``decoded`` are left as they are."""
    own: list[dict[str, Any]] = []
    foreign: list[tuple[dict[str, Any], str | None, int | None]] = []
    logs: list[Any] = []
    logs_error: str | None = None
    metric_points = 0
    meta_d: dict[str, Any] | None = None
    for d in decoded:
        if d.bad is not None:
            ctx.bad(path, d.line, d.bad)
        if d.meta is not None and meta_d is None:
            meta_d = d.meta
        own.extend(_copy(r) for r in d.own)
        foreign.extend((_copy(r), scope, line) for r, scope, line in d.foreign)
        if logs_error is None:
            logs.extend(d.logs)
            logs_error = d.logs_error
        metric_points += d.metric_points
    events: list[dict[str, Any]] = []
    if logs_error is not None:
        ctx.bad(path, None, f"malformed OTLP logs request ({logs_error})")
    elif logs:
        events = map_events(logs, ctx, path)
    records = own + _foreign_records(foreign, ctx, path, events)
    diags: list[Diagnostic] = []
    if meta_d is not None and not foreign and not events:
        d = dict(meta_d)
        for item in d.pop("diagnostics", []) or []:
            diags.append(Diagnostic(**item) if isinstance(item, dict) else Diagnostic("note", str(item)))
        meta = TraceMeta.from_dict(d)
        meta.sources = [path]
    else:
        meta = TraceMeta(source_format=FORMAT, sources=[path])
    if metric_points:
        diags.append(metrics_note(metric_points, path))
    return Trace(meta, spans_from_records(records), diags)


def metrics_note(points: int, path: str) -> Diagnostic:
    """What the trace says of the metric data points it received."""
    return Diagnostic("otlp_metrics", f"{points} metric data point(s) received and not used (the spans and events "
                      "carry the calls)", path)


def _count_points(req: dict[str, Any]) -> int:
    """Data points in an ``ExportMetricsServiceRequest`` (JSON shape)."""
    n = 0
    for rm in req.get("resourceMetrics") or []:
        for sm in (rm or {}).get("scopeMetrics") or []:
            for m in (sm or {}).get("metrics") or []:
                for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "summary"):
                    n += len(((m or {}).get(kind) or {}).get("dataPoints") or [])
    return n


def _foreign_records(items: list[tuple[dict[str, Any], str | None, int | None]], ctx: ImportContext,
                     path: str, events: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Kinds, sessions, normalized usage and agent spans for spans from other instrumentations, and agent spans
    for the sessions of ``events`` (records already mapped from log events)."""
    if not items and not events:
        return []
    by_id: dict[tuple[str, str], dict[str, Any]] = {}
    for rec, scope, _line in items:
        rec["kind"] = _classify(rec["name"], rec["attributes"])
        if scope:
            rec["attributes"].setdefault("otel.scope.name", scope)
        by_id[(rec["trace_id"], rec["span_id"])] = rec
    _settle_usage_only(by_id)
    sessions: dict[tuple[str, str], str] = {}
    parent_session: dict[str, str | None] = {}
    roles: dict[str, str] = {}

    def session_of(rec: dict[str, Any], depth: int = 0) -> str:
        key = (rec["trace_id"], rec["span_id"])
        if key in sessions:
            return sessions[key]
        a = rec["attributes"]
        explicit = next((str(a[k]) for k in SPAN_SESSION_KEYS if a.get(k)), None)
        parent = by_id.get((rec["trace_id"], rec["parent_id"])) if rec["parent_id"] else None
        psess = session_of(parent, depth + 1) if parent is not None and depth < 1000 else None
        if explicit:
            s = explicit
        elif rec["kind"] == "agent" and parent is not None and psess is not None and \
                _has_agent_ancestor(parent, by_id):
            s = f"{psess}/{rec['span_id']}"
            roles[s] = "subagent"
        else:
            s = psess or rec["trace_id"]
        if s != psess and psess is not None:
            parent_session.setdefault(s, psess)
        sessions[key] = s
        return s

    for rec, _scope, _line in items:
        session_of(rec)
    out: list[dict[str, Any]] = []
    agents: dict[str, dict[str, Any]] = {}
    for rec, _scope, line in items:
        s = sessions[(rec["trace_id"], rec["span_id"])]
        a = rec["attributes"]
        rec["session_id"] = s
        rec["parent_session_id"] = parent_session.get(s)
        if rec["kind"] == "agent" and s not in agents:
            agents[s] = rec
            a.setdefault(sc.SESSION_ROLE, roles.get(s, "subagent" if parent_session.get(s) else "main"))
        if rec["kind"] == "model":
            provider = a.get(sc.PROVIDER_NAME) or a.get("gen_ai.system") or a.get("llm.provider") or \
                a.get("llm.system")
            usage = normalize_usage({k: v for k, v in a.items() if k.startswith(_USAGE_PREFIXES)},
                                    provider=str(provider) if provider else None)
            clean = usage.usable()
            for col, v in clean.as_columns().items():
                rec[col] = v
            if provider and "provider" not in rec:
                rec["provider"] = str(provider).lower()
            model = a.get(sc.RESPONSE_MODEL) or a.get(sc.REQUEST_MODEL) or a.get("llm.model_name") or \
                a.get("llm.response.model") or a.get("llm.request.model")
            if model:
                rec["model"] = model
            for problem in usage.problems:
                ctx.note("impossible_usage", f"{problem} (value dropped)", path, line, rec["span_id"])
        if rec["start_ns"] is not None and rec["end_ns"] is not None:
            rec["timing"] = "measured"
        out.append(rec)
    generic = 0
    for rec, _s, _l in items:
        if rec["kind"] == "orchestration" and not rec["attributes"].get("agentprof.usage.aggregate"):
            rec["attributes"][GENERIC] = "span"
            generic += 1
    if generic:
        ctx.note("otlp_unmapped", f"{generic} span(s) with no GenAI, OpenInference or agentprof kind kept as "
                 "orchestration spans", path)
    out.extend(events)
    # a session without an agent span gets one covering its spans
    by_session: dict[str, list[dict[str, Any]]] = {}
    for rec in out:
        by_session.setdefault(rec["session_id"], []).append(rec)
    synth: list[dict[str, Any]] = []
    for s, recs in by_session.items():
        if s in agents:
            continue
        starts = [r["start_ns"] for r in recs if r["start_ns"] is not None]
        ends = [r["end_ns"] for r in recs if r["end_ns"] is not None]
        tid = recs[0]["trace_id"]
        import xxhash

        sid = xxhash.xxh3_64_hexdigest(f"{tid}\x1fagent\x1f{s}".encode())
        ids = {r["span_id"] for r in recs}
        outer = next((r["parent_id"] for r in recs if r["parent_id"] and r["parent_id"] not in ids), None)
        for r in recs:
            if not r["parent_id"] or r["parent_id"] not in ids and r["parent_id"] == outer:
                r["parent_id"] = sid
        synth.append({"record": "span", "trace_id": tid, "span_id": sid, "parent_id": outer, "name":
                      sc.agent_span_name(None), "kind": "agent", "start_ns": min(starts) if starts else None,
                      "end_ns": max(ends) if ends else None, "timing": "derived", "status": "ok",
                      "session_id": s, "parent_session_id": parent_session.get(s),
                      "attributes": {sc.SESSION_ROLE: roles.get(s, "subagent" if parent_session.get(s) else "main"),
                                     "agentprof.synthesized": "no agent span in the source"}})
    return synth + out


def _settle_usage_only(by_id: dict[tuple[str, str], dict[str, Any]]) -> None:
    """A span known only by its token usage is a model call, unless a model call runs below it: then its
    usage is a sum over those calls (a framework's run or step span) and counting it again would double it."""
    summing: set[tuple[str, str]] = set()
    for rec in by_id.values():
        if rec["kind"] not in ("model", _USAGE_ONLY):
            continue
        cur = by_id.get((rec["trace_id"], rec["parent_id"])) if rec["parent_id"] else None
        for _ in range(1000):
            if cur is None:
                break
            if cur["kind"] == _USAGE_ONLY:
                summing.add((cur["trace_id"], cur["span_id"]))
            cur = by_id.get((cur["trace_id"], cur["parent_id"])) if cur["parent_id"] else None
    for key, rec in by_id.items():
        if rec["kind"] == _USAGE_ONLY:
            rec["kind"] = "orchestration" if key in summing else "model"
            if key in summing:
                rec["attributes"].setdefault("agentprof.usage.aggregate", "sums the model calls below it")


def _has_agent_ancestor(rec: dict[str, Any], by_id: dict[tuple[str, str], dict[str, Any]]) -> bool:
    cur: dict[str, Any] | None = rec
    for _ in range(1000):
        if cur is None:
            return False
        if cur["kind"] == "agent":
            return True
        cur = by_id.get((cur["trace_id"], cur["parent_id"])) if cur["parent_id"] else None
    return False
