"""An OpenTelemetry ``SpanExporter`` that writes agentprof JSONL span records, one line per span.

The record layout is the one :mod:`agentprof.trace.files` reads (``trace_id``, ``span_id``, ``parent_id``,
``name``, ``kind``, ``start_ns``, ``end_ns``, ``status``, ``error_type``, ``attributes``). Each line goes out
in one ``write`` through :class:`agentprof.trace.writer.JsonlTraceWriter`, so a killed process leaves every
span that had ended readable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from agentprof import semconv as sc
from agentprof.capture.failsafe import warn_once
from agentprof.capture.lean_span import LeanSpan
from agentprof.trace.writer import JsonlTraceWriter

_dumps = json.JSONEncoder(separators=(",", ":"), default=str, check_circular=False).encode
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
# one C encoder reused for every attribute object (json.dumps would set one up per call)
_encode_attrs = _c_make_encoder(None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True) \
    if _c_make_encoder is not None else None
_quote = json.encoder.encode_basestring_ascii


def span_attributes(span: ReadableSpan) -> dict[str, Any]:
    """The span's attributes as a plain dict (read from the SDK's storage directly when it has the usual layout)."""
    stored = getattr(span, "_attributes", None)
    if type(stored) is dict:  # agentprof's lean spans
        return stored
    d = getattr(stored, "_dict", None)
    if type(d) is dict:
        return d
    return dict(span.attributes or {})


def span_record(span: ReadableSpan, detach_parent: bool = False) -> dict[str, Any]:
    """The agentprof span record of an ended OTel span (``detach_parent`` writes it as a root)."""
    ctx = span.context
    parent = None if detach_parent else span.parent
    attrs = dict(span_attributes(span))
    error_type = attrs.get(sc.ERROR_TYPE)
    status = "error" if span.status.status_code is StatusCode.ERROR or error_type else "ok"
    return {
        "record": "span",
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "name": span.name,
        "kind": attrs.get(sc.KIND),
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": status,
        "error_type": error_type,
        "attributes": attrs,
    }


def encode(record: dict[str, Any]) -> bytes:
    """One JSONL line (ASCII-escaped JSON, newline-terminated)."""
    return (_dumps(record) + "\n").encode("ascii")


_hex_cache: dict[int, str] = {}
"""Hex forms of recently seen trace ids and parent span ids (a run has one trace id and few parents)."""


def _hex(value: int, width: int) -> str:
    text = _hex_cache.get(value)
    if text is None:
        if len(_hex_cache) > 4096:
            _hex_cache.clear()
        text = _hex_cache[value] = f"{value:0{width}x}"
    return text


LineShape = tuple[bytes, bytes, int, tuple[str, ...], bytes, bytes]
"""(line template with a parent, without one, number of template attributes, the integer attributes filled in
per span, the two templates again with the span's run-queue wait after its CPU): see :func:`line_shape`."""


def line_shape(name: str, attributes: dict[str, Any], ints: tuple[str, ...] = ()) -> LineShape | None:
    """The trace line of every span with this name and these attributes as a bytes template, and how many
    attributes it holds: spans started from one template (every call of one tool) then fill in only their CPU
    time, ids and times, in one formatting call. ``ints`` names the last attributes of ``attributes`` whose
    integer values differ from span to span (a parse's byte count): they are filled in too, in that order.
    None when the template cannot be pre-encoded."""
    if _encode_attrs is None or not attributes or sc.ERROR_TYPE in attributes or sc.CPU_NS in attributes:
        return None
    keys = list(attributes)
    if ints and (len(ints) >= len(keys) or tuple(keys[-len(ints):]) != ints):
        return None
    fixed_attrs = {k: attributes[k] for k in keys[:len(keys) - len(ints)]}
    kind = attributes.get(sc.KIND)
    attrs_json = "".join(_encode_attrs(fixed_attrs, 0))
    fixed = (f'{{"record":"span","name":{_quote(name)},"kind":{"null" if kind is None else _quote(str(kind))},'
             f'"attributes":{attrs_json[:-1]}').encode("ascii").replace(b"%", b"%%")  # literal for formatting
    slots = "".join(f",{_quote(k)}:%d" for k in ints).encode("ascii")
    ids = ',"trace_id":"%032x","span_id":"%016x",'
    head = fixed + slots + f',"{sc.CPU_NS}":%d}}{ids}'.encode("ascii")
    rq_head = fixed + slots + f',"{sc.CPU_NS}":%d,"{sc.RUNQ_NS}":%d}}{ids}'.encode("ascii")
    tail = b'"start_ns":%d,"end_ns":%d,"status":"ok","error_type":null}\n'
    parent, orphan = b'"parent_id":"%016x",' + tail, b'"parent_id":null,' + tail
    return head + parent, head + orphan, len(attributes), tuple(ints), rq_head + parent, rq_head + orphan


def shape_ints(shape: LineShape, attributes: dict[str, Any]) -> tuple[int, ...] | None:
    """The values of ``shape``'s per-span integer attributes in ``attributes``; None if one is not an int."""
    values = tuple(attributes.get(k) for k in shape[3])
    return values if all(type(v) is int for v in values) else None


def encode_span(span: ReadableSpan, detach_parent: bool = False) -> bytes:
    """``encode(span_record(span))`` without the intermediate dict: the hot path of every recorded span."""
    if _encode_attrs is None:
        return encode(span_record(span, detach_parent))
    if type(span) is LeanSpan:  # its fields directly (the properties cost a call each)
        ctx, parent, name, start, end = span._context, span._parent, span._name, span._start_time, span._end_time
        attrs, code = span._attributes, span._status.status_code
        shape = span._shape
        added = len(attrs) - shape[2] if shape is not None else 0
        if (added == 1 or added == 2) and code is not StatusCode.ERROR:
            cpu = attrs.get(sc.CPU_NS)  # the attributes added since the start: CPU and, where recorded, the wait
            rq = attrs.get(sc.RUNQ_NS) if added == 2 else None  # for a CPU (the template is unchanged: any
            ints = shape_ints(shape, attrs) if shape[3] else ()  # change through the span's API drops it)
            if type(cpu) is int and end is not None and ints is not None and (added == 1 or type(rq) is int):
                if added == 1:
                    if parent is None or detach_parent:
                        return shape[1] % (*ints, cpu, ctx.trace_id, ctx.span_id, start, end)
                    return shape[0] % (*ints, cpu, ctx.trace_id, ctx.span_id, parent.span_id, start, end)
                if parent is None or detach_parent:
                    return shape[5] % (*ints, cpu, rq, ctx.trace_id, ctx.span_id, start, end)
                return shape[4] % (*ints, cpu, rq, ctx.trace_id, ctx.span_id, parent.span_id, start, end)
    else:
        ctx, parent, name, start, end = span.context, span.parent, span.name, span.start_time, span.end_time
        attrs, code = span_attributes(span), span.status.status_code
    if detach_parent:
        parent = None
    error_type = attrs.get(sc.ERROR_TYPE)
    status = "error" if error_type or code is StatusCode.ERROR else "ok"
    kind = attrs.get(sc.KIND)
    parent_id = "null" if parent is None else f'"{_hex(parent.span_id, 16)}"'
    kind_json = "null" if kind is None else _quote(str(kind))
    error_json = "null" if error_type is None else _quote(str(error_type))
    if end is None:
        end = "null"
    attrs_json = "".join(_encode_attrs(attrs, 0))
    return (f'{{"record":"span","trace_id":"{_hex(ctx.trace_id, 32)}","span_id":"{ctx.span_id:016x}",'
            f'"parent_id":{parent_id},"name":{_quote(name)},"kind":{kind_json},"start_ns":{start},'
            f'"end_ns":{end},"status":"{status}","error_type":{error_json},"attributes":{attrs_json}}}\n'
            ).encode("ascii")


class JsonlSpanExporter(SpanExporter):
    """Writes spans to an agentprof JSONL trace file.

    Usable in any OTel pipeline (``SimpleSpanProcessor(JsonlSpanExporter(writer))``); agentprof's own
    processor calls :meth:`write_line` with a line it serialized once for every file the span belongs to.
    A write failure (full disk, closed file) warns once and turns this exporter off; it never raises.
    """

    def __init__(self, writer: JsonlTraceWriter) -> None:
        self.writer = writer
        self.failed = False
        self.written = 0

    @property
    def path(self) -> str:
        return str(self.writer.path)

    def write_line(self, line: bytes) -> bool:
        if self.failed:
            return False
        try:
            self.writer.write_line(line)
        except Exception as e:
            self.fail(e)
            return False
        self.written += 1
        return True

    def fail(self, error: Exception) -> None:
        """Stop writing after ``error`` (one warning; the agent goes on)."""
        self.failed = True
        warn_once(f"write:{self.path}", f"cannot write trace file {self.path} ({type(error).__name__}: {error}); "
                                        "the agent continues but the trace stops here")

    def write_record(self, record: dict[str, Any]) -> bool:
        try:
            line = encode(record)
        except Exception as e:
            warn_once(f"encode:{self.path}", f"cannot serialize a trace record ({type(e).__name__}: {e})")
            return False
        return self.write_line(line)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = True
        for span in spans:
            ok = self.write_record(span_record(span)) and ok
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every line is written when its span ends
