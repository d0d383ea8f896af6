"""Optional OTLP export: when the standard OpenTelemetry environment names an endpoint, spans also go there.

Honours ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (plus the exporter's own
variables: headers, timeout, compression, certificates), ``OTEL_TRACES_EXPORTER=none`` and
``OTEL_SDK_DISABLED=true``. Export is batched on agentprof's own background thread, never on the agent's
(:mod:`agentprof.capture.otlp_export`).
"""

from __future__ import annotations

import os

from opentelemetry.sdk.trace import SpanProcessor

from agentprof.capture.failsafe import warn_once


def otlp_requested(env: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """True when the environment asks for OTLP trace export."""
    if not (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return False
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")}
    return "none" not in exporters


def otlp_processor() -> SpanProcessor | None:
    """A batching processor exporting to the configured OTLP endpoint, or ``None`` when none is configured."""
    if not otlp_requested():
        return None
    from agentprof.capture.otlp_export import BackgroundExportProcessor

    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip().lower()
    exporter = None
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

            exporter = GrpcExporter()
        except ImportError:
            warn_once("otlp:grpc", "OTLP protocol 'grpc' needs opentelemetry-exporter-otlp-proto-grpc; "
                                   "sending OTLP over http/protobuf instead")
    elif protocol != "http/protobuf":
        warn_once(f"otlp:{protocol}", f"OTLP protocol {protocol!r} is not supported; using http/protobuf")
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    return BackgroundExportProcessor(exporter, endpoint)
