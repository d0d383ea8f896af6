"""agentprof's private OpenTelemetry ``TracerProvider`` (the user's global provider is never touched).

Every span agentprof records is created by this provider's tracer. Its one processor hands each ended span
to the session it belongs to (which writes it to the session's trace file and to enclosing sessions' files)
and, when the environment configures OTLP, to a batching OTLP exporter as well.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Tracer

from agentprof import __version__
from agentprof import semconv as sc
from agentprof.capture.exporter import span_attributes
from agentprof.capture.failsafe import internal_error
from agentprof.capture.otlp import otlp_processor, otlp_requested

SpanSink = Callable[[ReadableSpan], None]
"""Receives every ended span of one session (``Session.write_span``)."""

SINKS: dict[str, SpanSink] = {}
"""Active sessions by session id; spans of unknown sessions (already finished) are dropped."""


class CaptureSpanProcessor(SpanProcessor):
    """Routes each ended span to its session's writer (synchronously: the line is on disk when ``end``
    returns) and to the OTLP processor when one is configured."""

    def __init__(self) -> None:
        self.otlp: SpanProcessor | None = None
        self.otlp_env: tuple[str, ...] | None = None

    def on_start(self, span: Span, parent_context: object = None) -> None:
        otlp = self.otlp
        if otlp is not None:
            otlp.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            sink = SINKS.get(span_attributes(span).get(sc.SESSION_ID))
            if sink is not None:
                sink(span)
        except Exception as e:
            internal_error("writing a span", e)
        otlp = self.otlp
        if otlp is not None:
            try:
                otlp.on_end(span)
            except Exception as e:
                internal_error("OTLP export", e)

    def refresh_otlp(self) -> None:
        """(Re)configure OTLP export from the current environment (checked at each session start)."""
        keys = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_PROTOCOL",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED")
        env = tuple(os.environ.get(k, "") for k in keys)
        if env == self.otlp_env:
            return
        old, self.otlp, self.otlp_env = self.otlp, None, env
        if old is not None:
            old.shutdown()
        if otlp_requested():
            # built in an empty context so OpenTelemetry's export thread carries no agentprof session
            self.otlp = contextvars.Context().run(otlp_processor)

    def force_flush_otlp(self, timeout_millis: int) -> None:
        if self.otlp is not None:
            try:
                self.otlp.force_flush(timeout_millis)
            except Exception as e:
                internal_error("OTLP flush", e)

    def shutdown(self) -> None:
        if self.otlp is not None:
            self.otlp.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.force_flush_otlp(timeout_millis)
        return True


_lock = threading.Lock()
_tracer: Tracer | None = None
_processor: CaptureSpanProcessor | None = None
_provider: TracerProvider | None = None


try:  # pieces of the lean start path below (the tracer's public start_span is used if any is missing)
    from opentelemetry.trace import SpanContext as _SpanContext
    from opentelemetry.trace import TraceFlags as _TraceFlags
    from opentelemetry.trace import get_current_span as _get_current_span

    from agentprof.capture.current_span import current as _current_span
    from agentprof.capture.lean_span import LeanSpan as _LeanSpan

    _RANDOM = getattr(_TraceFlags, "RANDOM_TRACE_ID", 0)
    _FLAGS = _TraceFlags(_TraceFlags.SAMPLED | _RANDOM)
    _FLAGS_NOT_RANDOM = _TraceFlags(_TraceFlags.SAMPLED)
    _lean = True
except (ImportError, AttributeError):  # pragma: no cover - other SDK layouts
    _lean = False

_time_ns = time.time_ns


def _build() -> None:
    global _tracer, _processor, _provider
    resource = Resource.create({})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "agentprof"}))
    limits = SpanLimits(max_span_attributes=1024, max_attributes=1024, max_span_attribute_length=SpanLimits.UNSET,
                        max_attribute_length=SpanLimits.UNSET)
    provider = TracerProvider(sampler=ALWAYS_ON, resource=resource, shutdown_on_exit=False, span_limits=limits)
    # OTEL_SDK_DISABLED turns off OTLP export (see otlp.py), not agentprof's own trace file
    provider._disabled = False
    processor = CaptureSpanProcessor()
    provider.add_span_processor(processor)
    _processor, _provider = processor, provider
    _tracer = provider.get_tracer("agentprof", __version__)


def tracer() -> Tracer:
    """The tracer every agentprof span comes from (provider built on first use)."""
    if _tracer is None:
        with _lock:
            if _tracer is None:
                _build()
    return _tracer  # type: ignore[return-value]


def processor() -> CaptureSpanProcessor:
    tracer()
    return _processor  # type: ignore[return-value]


def shutdown() -> None:
    """Flush and stop OTLP export (at interpreter exit, after every session finished)."""
    if _processor is not None:
        try:
            _processor.shutdown()
        except Exception as e:
            internal_error("OTLP shutdown", e)


def start_span(name: str, context: Any, kind: Any, attributes: dict[str, Any] | None = None) -> Any:
    """Start a recording span on agentprof's tracer: what ``Tracer.start_span`` does with its ALWAYS_ON
    sampler (same ids, parent, trace flags, resource, scope, processor), at a third of the cost.

    The hot path of every tool, parse and custom span: the span is a :class:`LeanSpan`, and ``attributes``
    (agentprof's own, always valid values) become its attribute dict as given, not copied; pass a fresh dict.
    If the tracer lacks a piece the lean path needs, the public ``start_span`` is used from then on.
    """
    global _lean
    if _lean:
        try:
            tr = _tracer
            if context is None:
                current = _current_span()
                parent = None if current is None else current.get_span_context()
            else:
                parent = _get_current_span(context).get_span_context()
            if parent is None or not parent.is_valid:
                parent = None
                trace_id = tr.id_generator.generate_trace_id()  # type: ignore[union-attr]
                flags = _FLAGS
            else:
                trace_id = parent.trace_id
                flags = _FLAGS if getattr(parent.trace_flags, "random_trace_id", False) else _FLAGS_NOT_RANDOM
            ctx = _SpanContext(trace_id, tr.id_generator.generate_span_id(), False, flags)  # type: ignore[union-attr]
            proc = _processor
            span = _LeanSpan(name, ctx, parent, kind, {} if attributes is None else attributes,
                             tr.resource, tr._instrumentation_scope, tr.instrumentation_info,  # type: ignore[union-attr]
                             proc, _time_ns())
            if proc.otlp is not None:  # type: ignore[union-attr]
                proc.on_start(span, context)  # type: ignore[union-attr]
            return span
        except Exception:
            _lean = False
    span = _tracer.start_span(name, context, kind)  # type: ignore[union-attr]
    if attributes:
        span.set_attributes(attributes)
    return span
