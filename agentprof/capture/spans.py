"""Span scopes: the hot path every recorded tool, parse and custom phase goes through.

A :class:`Scope` starts an OpenTelemetry span in the current session, makes it the current span (so work it
starts nests under it, also in tasks and threads), measures the thread CPU it uses when asked, and ends it.
Failures inside agentprof are reported once and never reach the agent.
"""

from __future__ import annotations

import contextvars
import threading
import time
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode

from agentprof import semconv as sc
from agentprof.capture import current_span, provider
from agentprof.capture.error_type import error_type
from agentprof.capture.failsafe import internal_error
from agentprof.capture.session import Session, parent_context

KINDS = ("agent", "model", "tool", "parse", "orchestration", "wait")
"""Span kinds of the trace model (``agentprof.trace.schema.KINDS``, repeated here to keep polars unloaded)."""

ERROR_MESSAGE = "agentprof.error.message"  # only with capture_content: messages can quote prompt text

CPU_SCOPE: contextvars.ContextVar[Any] = contextvars.ContextVar("agentprof_cpu_scope", default=None)
"""Innermost open scope that measures CPU: child-process CPU of subprocesses waited for is added to its
``child_cpu_ns``."""

_perf = time.perf_counter_ns
_thread_time = time.thread_time_ns
_ident = threading.get_ident
_enter = current_span.enter
_leave = current_span.leave
_INTERNAL = SpanKind.INTERNAL


def raw_attributes(span: Any) -> dict[str, Any] | None:
    """The dict a live span keeps its attributes in (a lean span's own, or inside the SDK span's bounded
    mapping), for writing agentprof's own always-valid values without per-value validation; None if the
    layout is unknown (the public API is used then)."""
    stored = getattr(span, "_attributes", None)
    if type(stored) is dict:
        return stored
    inner = getattr(stored, "_dict", None)
    return inner if type(inner) is dict else None


def _start(sess: Session, name: str, attributes: dict[str, Any], kind: SpanKind) -> Any:
    """Start a span of ``sess`` with a copy of ``attributes``."""
    return provider.start_span(name, parent_context(sess), kind, dict(attributes))


def set_many(span: Any, attributes: dict[str, Any]) -> None:
    """Set attributes agentprof computed (ints, strings, lists of ints or strings) on a live span; lists are
    stored as tuples, as the SDK would store them, without its per-element validation."""
    store = raw_attributes(span)
    if store is not None and span.end_time is None:
        for key, value in attributes.items():
            store[key] = tuple(value) if isinstance(value, list) else value
    else:
        span.set_attributes(attributes)


def record_error(span: Any, exc: BaseException, capture_content: bool) -> None:
    """Mark ``span`` failed with the exception's type (its message only when content capture is on)."""
    span.set_status(Status(StatusCode.ERROR))
    span.set_attribute(sc.ERROR_TYPE, error_type(exc))
    if capture_content:
        span.set_attribute(ERROR_MESSAGE, str(exc)[:4096])


def add_child_cpu(ns: int) -> None:
    """Credit CPU used by a child process to the innermost CPU-measuring scope of this context."""
    scope = CPU_SCOPE.get()
    if scope is not None:
        scope.child_cpu_ns += ns


def runq_start(sess: Session) -> tuple[int, int]:
    """(thread, its run-queue wait ns) where a span starts, or (0, -1) where the session records none."""
    read = sess.runq
    return (_ident(), read()) if read is not None else (0, -1)


def runq_since(sess: Session, start: tuple[int, int]) -> int:
    """The calling thread's run-queue wait since ``start`` (ns); -1 when not measured or on another thread."""
    read = sess.runq
    if start[1] < 0 or read is None or _ident() != start[0]:
        return -1
    now = read()
    return now - start[1] if now >= start[1] else -1


class Scope:
    """One open span. ``cpu`` measures thread CPU (plus child-process CPU) into ``agentprof.cpu_ns`` and, where
    the session records it, the thread's wait for a CPU into ``agentprof.runq_ns``."""

    __slots__ = ("sess", "span", "store", "token", "cpu_token", "cpu0", "child_cpu_ns", "overhead", "rq0")

    def __init__(self, sess: Session, name: str, attributes: dict[str, Any], cpu: bool = False,
                 kind: SpanKind = _INTERNAL, shape: tuple[bytes, bytes, int] | None = None) -> None:
        t0 = _perf()
        self.sess = sess
        attrs = dict(attributes)
        span = self.span = provider.start_span(name, parent_context(sess), kind, attrs)
        if getattr(span, "_attributes", None) is attrs:  # a lean span
            self.store = attrs
            span._shape = shape  # encoded line start for ``attributes`` (from exporter.line_shape)
        else:
            self.store = raw_attributes(span)
        self.token = _enter(span)
        self.child_cpu_ns = 0
        if cpu:
            self.cpu_token = CPU_SCOPE.set(self)
            self.rq0 = runq_start(sess)
            self.overhead = _perf() - t0
            self.cpu0 = _thread_time()
        else:
            self.cpu_token = None
            self.cpu0 = None
            self.rq0 = (0, -1)
            self.overhead = _perf() - t0

    def set_attribute(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    @property
    def span_id(self) -> str:
        return f"{self.span.get_span_context().span_id:016x}"

    def end(self, exc: BaseException | None = None, cpu_ns: int | None = None) -> None:
        """End the span (``cpu_ns`` overrides the measured thread CPU, e.g. for async steps)."""
        cpu1 = _thread_time() if self.cpu0 is not None else 0
        t0 = _perf()
        span = self.span
        try:
            if self.cpu_token is not None:
                CPU_SCOPE.reset(self.cpu_token)
                child = self.child_cpu_ns
                if child:
                    add_child_cpu(child)
                own = (cpu_ns if cpu_ns is not None else cpu1 - self.cpu0) + child  # type: ignore[operator]
                rq = runq_since(self.sess, self.rq0)
                if self.store is not None:
                    self.store[sc.CPU_NS] = own
                    if rq >= 0:
                        self.store[sc.RUNQ_NS] = rq
                    if child:
                        self.store[sc.CHILD_CPU_NS] = child
                else:
                    span.set_attribute(sc.CPU_NS, own)
                    if rq >= 0:
                        span.set_attribute(sc.RUNQ_NS, rq)
                    if child:
                        span.set_attribute(sc.CHILD_CPU_NS, child)
            if exc is not None:
                record_error(span, exc, self.sess.capture_content)
        except Exception as e:
            internal_error("recording a span", e)
        try:
            _leave(self.token)
            span.end()
        except Exception as e:
            internal_error("ending a span", e)
        # lock-free on purpose: a rare lost update under thread switches costs a few microseconds of accounting
        self.sess.overhead_ns += self.overhead + _perf() - t0


class DetachedSpan:
    """A span that is never the current one: it lives across the agent's code (a child process from start
    until it is waited for). Closed by its session if still open when the session ends."""

    __slots__ = ("sess", "span", "_done")

    def __init__(self, sess: Session, name: str, attributes: dict[str, Any]) -> None:
        self.sess = sess
        self.span = _start(sess, name, attributes, _INTERNAL)
        self._done = False
        sess.pending.add(self)

    def finish(self, attributes: dict[str, Any] | None = None, exc: BaseException | None = None) -> None:
        if self._done:
            return
        self._done = True
        try:
            if attributes:
                self.span.set_attributes(attributes)
            if exc is not None:
                record_error(self.span, exc, self.sess.capture_content)
            self.span.end()
        except Exception as e:
            internal_error("ending a span", e)
        self.sess.pending.discard(self)

    def close_at_session_end(self, deadline: float) -> None:
        self.finish({sc.INCOMPLETE: True})
