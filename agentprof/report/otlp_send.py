"""``agentprof export --to otlp``: any trace (captured or imported) sent to an OTLP receiver as protobuf, over
HTTP or gRPC, so Phoenix, Langfuse or a Collector can show it.

The spans are :func:`agentprof.trace.otlp.to_otlp_json`'s (GenAI attributes, ``session.id``,
``gen_ai.conversation.id`` and the OpenInference span kind on every span), parsed into opentelemetry-proto's
``ExportTraceServiceRequest`` and sent in batches. Headers come from ``OTEL_EXPORTER_OTLP_HEADERS`` (or the
``_TRACES_`` one), as OpenTelemetry's own exporters read them.
"""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from agentprof.errors import AgentprofError
from agentprof.trace import Trace

BATCH = 512
"""Spans per request."""
TIMEOUT_S = 10.0
"""Longest wait for one request's answer."""
PROTOCOLS = ("http/protobuf", "grpc")


@dataclass
class Sent:
    spans: int
    sessions: int
    requests: int
    endpoint: str


def _b64_ids(span: dict[str, Any]) -> dict[str, Any]:
    """OTLP JSON writes ids as hex; the protobuf JSON mapping (which ``ParseDict`` reads) wants base64."""
    out = dict(span)
    for key in ("traceId", "spanId", "parentSpanId"):
        if out.get(key):
            out[key] = base64.b64encode(bytes.fromhex(out[key])).decode()
    return out


def requests(trace: Trace, batch: int = BATCH) -> list[Any]:
    """The trace as ``ExportTraceServiceRequest`` messages of at most ``batch`` spans each."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from agentprof.trace.otlp import to_otlp_json

    doc = to_otlp_json(trace)
    rs = doc["resourceSpans"][0]
    ss = rs["scopeSpans"][0]
    spans = ss["spans"]
    out = []
    for i in range(0, max(len(spans), 1), batch):
        part = {"resourceSpans": [{"resource": rs["resource"], "scopeSpans": [
            {"scope": ss["scope"], "spans": [_b64_ids(s) for s in spans[i:i + batch]]}]}]}
        out.append(json_format.ParseDict(part, ExportTraceServiceRequest()))
    return out


def _headers() -> dict[str, str]:
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    out: dict[str, str] = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[urllib.parse.unquote(key.strip()).lower()] = urllib.parse.unquote(value.strip())
    return out


def http_url(endpoint: str) -> str:
    """``endpoint`` with ``/v1/traces`` added when it names no path (as ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
    u = urllib.parse.urlsplit(endpoint)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise AgentprofError(f"--endpoint {endpoint!r}: expected a URL like http://127.0.0.1:4318")
    if u.path in ("", "/"):
        return urllib.parse.urlunsplit((u.scheme, u.netloc, "/v1/traces", u.query, ""))
    return endpoint


def _post(url: str, body: bytes, headers: dict[str, str]) -> None:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={**headers, "Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            r.read()
    except urllib.error.HTTPError as e:
        detail = e.read()[:200].decode("utf-8", "replace").strip()
        raise AgentprofError(f"{url}: the receiver answered HTTP {e.code}"
                             + (f" ({detail})" if detail else "")) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise AgentprofError(f"{url}: cannot send ({reason})") from None


def _grpc_sender(endpoint: str, headers: dict[str, str]) -> Any:
    try:
        import grpc
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
    except ImportError as e:
        raise AgentprofError(f"--protocol grpc needs grpcio (pip install 'agentprof[collect]'): {e}") from None
    u = urllib.parse.urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
    if not u.hostname or not u.port:
        raise AgentprofError(f"--endpoint {endpoint!r}: expected host:port (or http://host:port) for gRPC")
    target = f"{u.hostname}:{u.port}"
    channel = grpc.secure_channel(target, grpc.ssl_channel_credentials()) if u.scheme == "https" else \
        grpc.insecure_channel(target)
    stub = TraceServiceStub(channel)
    metadata = list(headers.items())

    def send(req: Any) -> None:
        try:
            stub.Export(req, timeout=TIMEOUT_S, metadata=metadata)
        except grpc.RpcError as e:
            raise AgentprofError(f"{target}: the receiver answered {e.code().name} ({e.details()})") from None

    send.close = channel.close  # type: ignore[attr-defined]
    return send


def send_otlp(trace: Trace, endpoint: str, protocol: str = "http/protobuf") -> Sent:
    """Send every span of ``trace`` to ``endpoint``; raises :class:`AgentprofError` on the first failure."""
    if protocol not in PROTOCOLS:
        raise AgentprofError(f"--protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    reqs = requests(trace)
    headers = _headers()
    if protocol == "grpc":
        send = _grpc_sender(endpoint, headers)
        where = endpoint
        try:
            for req in reqs:
                send(req)
        finally:
            send.close()
    else:
        where = http_url(endpoint)
        for req in reqs:
            _post(where, req.SerializeToString(), headers)
    n = sum(len(ss.spans) for req in reqs for rs in req.resource_spans for ss in rs.scope_spans)
    return Sent(n, trace.spans.get_column("session_id").n_unique(), len(reqs), where)
