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
from agentprof.capture.lean_span import LeanSpan as _LeanSpan
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

    def force_flush_otlp(self, timeout_millis: int | None = None) -> None:
        """Wait (at most ``timeout_millis``, by default the export's flush cap) for pending OTLP spans, then warn
        once about any the endpoint did not get."""
        if self.otlp is not None:
            try:
                if timeout_millis is None:
                    self.otlp.force_flush()
                else:
                    self.otlp.force_flush(timeout_millis)
                self.otlp.report_lost()
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

    from agentprof.capture.current_span import FAST as _current_span_fast
    from agentprof.capture.current_span import current as _current_span

    _RANDOM = getattr(_TraceFlags, "RANDOM_TRACE_ID", 0)
    _FLAGS = _TraceFlags(_TraceFlags.SAMPLED | _RANDOM)
    _FLAGS_NOT_RANDOM = _TraceFlags(_TraceFlags.SAMPLED)
    FLAGS, FLAGS_NOT_RANDOM, RANDOM_TRACE_ID = _FLAGS, _FLAGS_NOT_RANDOM, _RANDOM
    """Trace flags of a new span whose parent's trace id is random, or not (the bit that tells)."""
    _lean = True
except (ImportError, AttributeError):  # pragma: no cover - other SDK layouts
    FLAGS = FLAGS_NOT_RANDOM = None
    RANDOM_TRACE_ID = 0
    _lean = False


def _public_span_context(trace_id: int, span_id: int, flags: Any) -> Any:
    return _SpanContext(trace_id, span_id, False, flags)


def _checked_span_context() -> Callable[[int, int, Any], Any]:
    """A local ``SpanContext`` built as the tuple it is (its constructor re-validates ids agentprof's own id
    generator and a valid parent already guarantee), if that gives exactly what the constructor gives."""
    try:
        from opentelemetry.trace.span import DEFAULT_TRACE_STATE

        new = tuple.__new__

        def fast(trace_id: int, span_id: int, flags: Any) -> Any:
            return new(_SpanContext, (trace_id, span_id, False, flags, DEFAULT_TRACE_STATE, True))

        a, b = fast(0x1234, 0x5678, _FLAGS), _SpanContext(0x1234, 0x5678, False, _FLAGS)
        same = a == b and all(getattr(a, f) == getattr(b, f) for f in (
            "trace_id", "span_id", "is_remote", "trace_flags", "trace_state", "is_valid"))
        return fast if same else _public_span_context
    except Exception:  # pragma: no cover - another API layout
        return _public_span_context


_span_context = _checked_span_context() if _lean else _public_span_context

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
    _LeanSpan.bind(_tracer.resource, _tracer._instrumentation_scope, _tracer.instrumentation_info,  # type: ignore[attr-defined]
                   processor)


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


def hot_ready() -> bool:
    """Whether a span can be started inline as :func:`start_span` starts it (lean spans, span contexts built as
    tuples, the SDK's random id generator, the runtime context shortcut) and ends with nothing but agentprof's
    own file to go to (no OTLP export): the condition of the tool-call hot path (:mod:`agentprof.capture.hot_tool`)."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    return (_lean and _span_context is not _public_span_context and _current_span_fast
            and _tracer is not None and type(_tracer.id_generator) is RandomIdGenerator  # type: ignore[attr-defined]
            and _processor is not None and _processor.otlp is None)


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
            ctx = _span_context(trace_id, tr.id_generator.generate_span_id(), flags)  # type: ignore[union-attr]
            span = _LeanSpan(name, ctx, parent, kind, {} if attributes is None else attributes, _time_ns())
            if _processor.otlp is not None:  # type: ignore[union-attr]
                _processor.on_start(span, context)  # type: ignore[union-attr]
            return span
        except Exception:
            _lean = False
    span = _tracer.start_span(name, context, kind)  # type: ignore[union-attr]
    if attributes:
        span.set_attributes(attributes)
    return span
