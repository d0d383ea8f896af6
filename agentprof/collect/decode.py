"""OTLP request bodies (protobuf or JSON, possibly gzip-compressed) as dicts of the OTLP JSON shape, which the
OTLP importer's mapping reads. Protobuf is parsed with opentelemetry-proto's generated messages."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

SIGNALS: dict[str, type[Message]] = {"traces": ExportTraceServiceRequest, "logs": ExportLogsServiceRequest,
                                     "metrics": ExportMetricsServiceRequest}
"""Signal name (the ``/v1/<signal>`` path) -> its request message."""
_TOP = {"traces": "resourceSpans", "logs": "resourceLogs", "metrics": "resourceMetrics"}


class BadRequest(ValueError):
    """A body that is not an OTLP request of the signal it was sent as."""


def message_dict(msg: Message) -> dict[str, Any]:
    """A parsed request as the OTLP JSON shape (ids in base64, which the mapping decodes; enums as numbers)."""
    return json_format.MessageToDict(msg, use_integers_for_enums=True)


def decompress(body: bytes, encoding: str | None) -> bytes:
    enc = (encoding or "").strip().lower()
    try:
        if enc == "gzip":
            return gzip.decompress(body)
        if enc == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error, EOFError) as e:
        raise BadRequest(f"cannot decompress the {enc} body ({e})") from None
    if enc not in ("", "identity"):
        raise BadRequest(f"unsupported Content-Encoding {enc!r}")
    return body


def decode(signal: str, body: bytes, content_type: str | None) -> dict[str, Any]:
    """The request of ``signal`` in ``body`` (protobuf unless the content type says JSON)."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest(f"not valid JSON ({e})") from None
        if not isinstance(doc, dict):
            raise BadRequest("expected a JSON object")
        doc.setdefault(_TOP[signal], [])
        if not isinstance(doc[_TOP[signal]], list):
            raise BadRequest(f"'{_TOP[signal]}' must be a list")
        return doc
    msg = SIGNALS[signal]()
    try:
        msg.ParseFromString(body)
    except DecodeError as e:
        raise BadRequest(f"not an OTLP {signal} protobuf message ({e})") from None
    doc = message_dict(msg)
    doc.setdefault(_TOP[signal], [])
    return doc


def items(doc: dict[str, Any], signal: str) -> int:
    """How many spans, log records or metric data points a request holds (for the receiver's counts)."""
    n = 0
    if signal == "traces":
        for rs in doc.get("resourceSpans") or []:
            for ss in (rs or {}).get("scopeSpans") or []:
                n += len((ss or {}).get("spans") or [])
    elif signal == "logs":
        for rl in doc.get("resourceLogs") or []:
            for sl in (rl or {}).get("scopeLogs") or []:
                n += len((sl or {}).get("logRecords") or [])
    else:
        for rm in doc.get("resourceMetrics") or []:
            for sm in (rm or {}).get("scopeMetrics") or []:
                n += len((sm or {}).get("metrics") or [])
    return n
