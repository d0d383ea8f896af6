"""OTLP JSON (``ExportTraceServiceRequest``, as the OpenTelemetry Collector's file exporter writes it) to and
from agentprof span records.

``to_otlp_json(trace)`` gives one request holding every span: hex ``traceId``/``spanId``, times as decimal
strings of epoch nanoseconds, attributes as ``{key, value: AnyValue}``, plus what receivers group and classify
by (``session.id``, ``gen_ai.conversation.id``, ``openinference.span.kind``; named in ``agentprof.otlp.added``
so an import drops them again). Span columns travel as their OTel
GenAI / ``agentprof.*`` attributes (see :mod:`agentprof.trace.records`), so an agentprof trace read back
through :func:`span_records` gives the same span table. Missing times (``timing`` unknown) are written as
0 with ``agentprof.time.missing`` naming which end, since OTLP has no null time.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from typing import Any

import xxhash

from agentprof import semconv as sc
from agentprof.trace.records import records_from_spans
from agentprof.trace.schema import Trace

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
META_ATTRIBUTE = "agentprof.trace.meta"
TIME_MISSING = "agentprof.time.missing"
ORIGINAL_TRACE_ID = "agentprof.trace.original_id"
ORIGINAL_SPAN_ID = "agentprof.span.original_id"
ORIGINAL_PARENT_ID = "agentprof.span.original_parent_id"
RECEIVER_ADDED = "agentprof.otlp.added"
"""Names of the attributes an export added for receivers (``session.id``, …): an import removes them again."""
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


# ------------------------------------------------------------------------------------------- AnyValue
def encode_value(v: Any) -> dict[str, Any]:
    """A Python value as an OTLP JSON ``AnyValue`` (ints as decimal strings, as the protobuf JSON mapping says)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        if _INT64_MIN <= v <= _INT64_MAX:
            return {"intValue": str(v)}
        return {"stringValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [encode_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": str(k), "value": encode_value(x)} for k, x in v.items()]}}
    if isinstance(v, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(v)).decode()}
    return {"stringValue": str(v)}


def decode_value(v: Any) -> Any:
    """An OTLP JSON ``AnyValue`` as a Python value (``None`` for an empty value)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        d = v["doubleValue"]
        return float(d) if isinstance(d, (int, float, str)) and not isinstance(d, bool) else d
    if "arrayValue" in v:
        return [decode_value(x) for x in (v["arrayValue"] or {}).get("values", []) or []]
    if "kvlistValue" in v:
        return {kv.get("key"): decode_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", []) or []}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def encode_attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": encode_value(v)} for k, v in attrs.items() if v is not None]


def decode_attributes(items: Any) -> dict[str, Any]:
    """``[{key, value}]`` as a dict; malformed entries are ignored."""
    out: dict[str, Any] = {}
    for kv in items or []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = decode_value(kv.get("value"))
    return out


# ----------------------------------------------------------------------------------------------- ids
def hex_id(value: str | None, length: int) -> str | None:
    """An OTLP id as lowercase hex: hex kept, base64 (proto JSON of some exporters) decoded."""
    if not value:
        return None
    s = str(value)
    if len(s) == length and re.fullmatch(r"[0-9a-fA-F]+", s):
        return s.lower()
    try:
        raw = base64.b64decode(s, validate=True)
        if len(raw) * 2 == length:
            return raw.hex()
    except (binascii.Error, ValueError):
        pass
    return s


def _otlp_id(value: str | None, length: int) -> str:
    if not value:
        return ""
    if (length == 32 and _HEX32.match(value)) or (length == 16 and _HEX16.match(value)):
        return value
    digest = xxhash.xxh3_128_hexdigest(value.encode()) if length == 32 else xxhash.xxh3_64_hexdigest(value.encode())
    return digest[:length]


# ------------------------------------------------------------------------------------------- export
def to_otlp_json(trace: Trace, service_name: str = "agentprof") -> dict[str, Any]:
    """The trace as one OTLP JSON ``ExportTraceServiceRequest`` (write it with ``json.dumps``, one per line)."""
    spans: list[dict[str, Any]] = []
    for rec in records_from_spans(trace.spans):
        attrs = dict(rec["attributes"])
        tid, sid, pid = rec["trace_id"], rec["span_id"], rec["parent_id"]
        otid, osid, opid = _otlp_id(tid, 32), _otlp_id(sid, 16), _otlp_id(pid, 16)
        if otid != tid:
            attrs[ORIGINAL_TRACE_ID] = tid
        if osid != sid:
            attrs[ORIGINAL_SPAN_ID] = sid
        if pid and opid != pid:
            attrs[ORIGINAL_PARENT_ID] = pid
        start, end = rec["start_ns"], rec["end_ns"]
        missing = [n for n, v in (("start", start), ("end", end)) if v is None]
        if missing:
            attrs[TIME_MISSING] = "both" if len(missing) == 2 else missing[0]
        added = sc.receiver_attributes(attrs)
        if added:
            attrs.update(added)
            attrs[RECEIVER_ADDED] = sorted(added)
        span: dict[str, Any] = {
            "traceId": otid, "spanId": osid, "parentSpanId": opid, "name": rec["name"],
            "kind": SPAN_KIND_CLIENT if rec["kind"] == "model" else SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(start or 0), "endTimeUnixNano": str(end if end is not None else (start or 0)),
            "attributes": encode_attributes(attrs),
        }
        if rec["status"] == "error":
            span["status"] = {"code": STATUS_ERROR, "message": rec.get("error_type") or ""}
        else:
            span["status"] = {"code": STATUS_OK}
        spans.append(span)
    meta = dict(trace.meta.to_dict())
    meta["diagnostics"] = [d.to_dict() for d in trace.diagnostics]
    resource = {"attributes": encode_attributes({
        "service.name": service_name, "telemetry.sdk.name": "agentprof",
        META_ATTRIBUTE: json.dumps(meta, sort_keys=True, default=str),
    })}
    from agentprof import __version__

    return {"resourceSpans": [{"resource": resource, "scopeSpans": [
        {"scope": {"name": "agentprof", "version": __version__}, "spans": spans}]}]}


# ------------------------------------------------------------------------------------------- import
def _ns(v: Any) -> int | None:
    if v is None or v == "":
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def otlp_items(request: dict[str, Any], resources: str, scopes: tuple[str, ...], items: str, what: str
               ) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """``(resource attributes, scope, item)`` for every item of one OTLP JSON request: ``request[resources]``
    (``resourceSpans``, ``resourceLogs``), each entry's first present key of ``scopes`` (``scopeSpans``, the older
    ``instrumentationLibrarySpans``), each scope's ``items`` (``spans``, ``logRecords``). Raises ``ValueError``
    naming the level that is not a list of objects (``what``: the item's name in that message)."""
    entries = request.get(resources)
    if not isinstance(entries, list):
        raise ValueError(f"'{resources}' must be a list")
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError(f"each {resources} entry must be an object")
        res_attrs = decode_attributes((entry.get("resource") or {}).get("attributes"))
        groups = next((entry[k] for k in scopes if k in entry), None) or []
        if not isinstance(groups, list):
            raise ValueError(f"'{scopes[0]}' must be a list")
        for group in groups:
            if not isinstance(group, dict):
                raise ValueError(f"each {scopes[0]} entry must be an object")
            scope = group.get("scope") or group.get("instrumentationLibrary") or {}
            for item in group.get(items) or []:
                if not isinstance(item, dict):
                    raise ValueError(f"each {what} must be an object")
                yield res_attrs, scope, item


def span_records(request: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any], str | None]]:
    """``(span record, resource attributes, scope name)`` for every span of one ``ExportTraceServiceRequest``.

    The record has agentprof's span-record keys (``trace_id``, ``span_id``, ``parent_id``, ``name``,
    ``start_ns``, ``end_ns``, ``status``, ``error_type``, ``attributes``; ``kind`` from ``agentprof.kind`` when
    present). Ids exported from non-hex agentprof ids are restored. Raises ``ValueError`` on a structure
    that is not OTLP (the importer turns it into a located error).
    """
    for res_attrs, scope, sp in otlp_items(request, "resourceSpans", ("scopeSpans", "instrumentationLibrarySpans"),
                                           "spans", "span"):
        attrs = decode_attributes(sp.get("attributes"))
        added = attrs.pop(RECEIVER_ADDED, None)
        for key in added if isinstance(added, list) else ():
            attrs.pop(key, None)
        if not isinstance(sp.get("name"), str):
            raise ValueError("span without a string 'name'")
        tid = attrs.pop(ORIGINAL_TRACE_ID, None) or hex_id(sp.get("traceId"), 32)
        sid = attrs.pop(ORIGINAL_SPAN_ID, None) or hex_id(sp.get("spanId"), 16)
        pid = attrs.pop(ORIGINAL_PARENT_ID, None) or hex_id(sp.get("parentSpanId"), 16)
        if not tid or not sid:
            raise ValueError(f"span {sp.get('name')!r} has no traceId/spanId")
        start, end = _ns(sp.get("startTimeUnixNano")), _ns(sp.get("endTimeUnixNano"))
        missing = attrs.pop(TIME_MISSING, None)
        if missing in ("start", "both"):
            start = None
        if missing in ("end", "both"):
            end = None
        status = sp.get("status") or {}
        code = status.get("code") if isinstance(status, dict) else None
        is_error = code in (STATUS_ERROR, "STATUS_CODE_ERROR")
        rec = {"record": "span", "trace_id": tid, "span_id": sid, "parent_id": pid, "name": sp["name"],
               "kind": attrs.get(sc.KIND), "start_ns": start, "end_ns": end,
               "status": "error" if is_error else "ok",
               "error_type": (attrs.get(sc.ERROR_TYPE) or (status.get("message") if isinstance(status, dict)
                                                            else None) or "error") if is_error else None,
               "attributes": attrs}
        yield rec, res_attrs, scope.get("name") if isinstance(scope, dict) else None
