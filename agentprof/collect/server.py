"""The OTLP endpoints of ``agentprof collect``: HTTP (``/v1/traces``, ``/v1/logs``, ``/v1/metrics``; protobuf
or JSON, gzip allowed) on the standard library's threading HTTP server, and gRPC (the OTLP collector's trace,
logs and metrics services) on grpcio when it is installed. Both hand decoded requests to a :class:`Store`."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentprof.collect.decode import SIGNALS, BadRequest, decode, decompress, items, message_dict
from agentprof.collect.store import Store
from agentprof.errors import AgentprofError

MAX_BODY = 64 << 20
"""Largest request body accepted (OTLP exporters send batches far smaller)."""
_TYPES = ("application/x-protobuf", "application/protobuf", "application/json", "")


class _Handler(BaseHTTPRequestHandler):
    store: Store
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # the collector prints its own summary
        pass

    def _answer(self, code: int, body: bytes = b"", ctype: str = "application/x-protobuf") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        signal = path.rsplit("/", 1)[-1] if path.startswith("/v1/") else ""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self._answer(413 if length > MAX_BODY else 400, b"bad Content-Length", "text/plain")
            return
        body = self.rfile.read(length)
        if signal not in SIGNALS:
            self._answer(404, b"OTLP paths: /v1/traces, /v1/logs, /v1/metrics", "text/plain")
            return
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype not in _TYPES:
            self._answer(415, b"expected application/x-protobuf or application/json", "text/plain")
            return
        try:
            doc = decode(signal, decompress(body, self.headers.get("Content-Encoding")), ctype)
        except BadRequest as e:
            self._answer(400, str(e).encode(), "text/plain")
            return
        self.store.add(signal, doc, items(doc, signal))
        if ctype == "application/json":
            self._answer(200, b"{}", "application/json")
        else:
            self._answer(200, b"")  # an empty Export*ServiceResponse serializes to no bytes


class Receiver:
    """The running endpoints; :meth:`stop` ends them (the store is flushed by the caller)."""

    def __init__(self, store: Store, host: str = "127.0.0.1", port: int = 4318, grpc_port: int | None = 4317) -> None:
        self.store = store
        handler = type("Handler", (_Handler,), {"store": store})
        try:
            self.http = ThreadingHTTPServer((host, port), handler)
        except OSError as e:
            raise AgentprofError(f"cannot listen on {host}:{port} for OTLP/HTTP ({e.strerror or e}); "
                                 "--port picks another") from None
        self.http.daemon_threads = True
        self.http_port = self.http.server_address[1]
        self.host = host
        self.grpc: Any = None
        self.grpc_port: int | None = None
        self.grpc_missing: str | None = None
        if grpc_port is not None:
            self._start_grpc(host, grpc_port)
        self._thread = threading.Thread(target=self.http.serve_forever, name="agentprof-collect-http", daemon=True)
        self._thread.start()

    def _start_grpc(self, host: str, port: int) -> None:
        try:
            import grpc
            from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
            from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
            from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
        except ImportError as e:
            self.grpc_missing = f"OTLP/gRPC needs grpcio (pip install 'agentprof[collect]'): {e}"
            return
        store = self.store

        def servicer(base: type, signal: str, response: type) -> Any:
            def export(self: Any, request: Any, context: Any) -> Any:
                doc = message_dict(request)
                store.add(signal, doc, items(doc, signal))
                return response()

            return type(f"{signal.title()}Servicer", (base,), {"Export": export})()

        server = grpc.server(ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentprof-collect-grpc"))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            servicer(trace_service_pb2_grpc.TraceServiceServicer, "traces",
                     trace_service_pb2.ExportTraceServiceResponse), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(
            servicer(logs_service_pb2_grpc.LogsServiceServicer, "logs", logs_service_pb2.ExportLogsServiceResponse),
            server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
            servicer(metrics_service_pb2_grpc.MetricsServiceServicer, "metrics",
                     metrics_service_pb2.ExportMetricsServiceResponse), server)
        try:
            bound = server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:
            bound = 0
        if not bound:
            self.http.server_close()
            raise AgentprofError(f"cannot listen on {host}:{port} for OTLP/gRPC; --grpc-port picks another "
                                 "(--no-grpc serves HTTP only)")
        server.start()
        self.grpc, self.grpc_port = server, bound

    def stop(self) -> None:
        """Stop accepting; requests in progress get a second to finish."""
        if self.grpc is not None:
            self.grpc.stop(grace=1.0).wait(2.0)
        self.http.shutdown()
        self.http.server_close()
