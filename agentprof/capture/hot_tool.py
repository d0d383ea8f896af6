"""The hot path of a ``@tool`` call: the span started, made current, measured and written by the tool's own
wrapper and two helpers, without the span processor, exporter and writer layers.

Why a separate path: on a tool of about a millisecond the profiler's cost is set less by how much it does
than by how much code and data it touches, because the tool's own work has evicted them from the CPU's
caches by the time the span ends (measured in docs/PERFORMANCE.md: a Python call costs several times its
warm price there). So in the common case (the session writes one file, no OTLP export, no content capture,
the tool is called under agentprof's or the SDK's own span) the wrapper and :func:`start` / :func:`finish`
do what
:class:`~agentprof.capture.spans.Scope`, :meth:`LeanSpan.end`, the span processor and the exporter do, and
writes the very line they would write. Anything else (another case at the start, an exception, an attribute
or status set through the span's API, a session that started finishing) goes the general way from the point
where it differs, so both paths record the same span.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from random import getrandbits
from typing import Any

from opentelemetry.context.context import Context
from opentelemetry.sdk import trace as _sdk_trace
from opentelemetry.trace import SpanContext, SpanKind
from opentelemetry.trace.span import DEFAULT_TRACE_STATE

from agentprof import semconv as sc
from agentprof.capture import current_span, provider
from agentprof.capture.coroutine_cpu import MeasuredCoroutine
from agentprof.capture.exporter import shape_ints
from agentprof.capture.failsafe import internal_error
from agentprof.capture.lean_span import UNSET_STATUS, LeanSpan
from agentprof.capture.session import ACTIVE_SESSION, current
from agentprof.capture.spans import CPU_SCOPE, Scope, add_child_cpu, runq_since, runq_start

_PARENTS = frozenset((LeanSpan, _sdk_trace.Span, getattr(_sdk_trace, "_Span", _sdk_trace.Span)))
"""Span classes whose context a hot call reads directly (``_context``); any other current span: general path."""

_INTERNAL = SpanKind.INTERNAL
_CPU_NS = sc.CPU_NS
_RUNQ_NS = sc.RUNQ_NS


def _span_id() -> int:
    """A valid span id as the SDK's ``RandomIdGenerator`` makes it (0 is invalid and drawn again)."""
    span_id = getrandbits(64)
    while not span_id:
        span_id = getrandbits(64)
    return span_id


_ctx_get, _ctx_set, _ctx_reset = (current_span.CONTEXT_VAR.get, current_span.CONTEXT_VAR.set,
                                  current_span.CONTEXT_VAR.reset) if current_span.FAST else (None, None, None)
_KEY = current_span.SPAN_KEY
_put = dict.__setitem__
_session_get, _cpu_set, _cpu_reset = ACTIVE_SESSION.get, CPU_SCOPE.set, CPU_SCOPE.reset
_perf, _thread_time, _time_ns, _write = time.perf_counter_ns, time.thread_time_ns, time.time_ns, os.write
_new_tuple = tuple.__new__
_new_scope = object.__new__


def start(last: Sequence[Any], span_name: str) -> Scope | None:
    """Start the span of a hot call and make it current, as a :class:`Scope` (whose general ``end`` serves a
    call that raised); None when this call must take the general path. ``last[0]`` is the tool's
    ``(session, attributes, line shape)`` as the general path last built it."""
    sess = _session_get()
    if sess is None or sess.hot is None:
        return None
    cached = last[0]
    octx = _ctx_get()
    parent = octx.get(_KEY)
    if cached[0] is not sess or type(parent) not in _PARENTS:
        return None
    t0 = _perf()
    pctx = parent._context
    attrs = cached[1].copy()
    span = LeanSpan(span_name, _new_tuple(SpanContext, (
        pctx[0], getrandbits(64) or _span_id(), False,
        provider.FLAGS if pctx[3] & provider.RANDOM_TRACE_ID else provider.FLAGS_NOT_RANDOM, DEFAULT_TRACE_STATE,
        True)), pctx, _INTERNAL, attrs, _time_ns(), cached[2])
    new = Context(octx)
    _put(new, _KEY, span)  # a fresh copy no one else holds yet, as current_span.enter
    scope = _new_scope(Scope)  # the fields Scope.__init__ sets; CPU comes from the caller (cpu0 unused)
    scope.sess, scope.span, scope.store, scope.child_cpu_ns, scope.cpu0 = sess, span, attrs, 0, None
    scope.token = _ctx_set(new)
    scope.cpu_token = _cpu_set(scope)
    scope.rq0 = runq_start(sess)
    scope.overhead = _perf() - t0
    return scope


def finish(scope: Scope, cpu_ns: int, t1: int | None = None) -> None:
    """End a hot call's span (``cpu_ns``: the tool's own thread CPU) and write its line, as the general path
    would; a span changed through its API on the way is handed to the span processor instead. Capture overhead
    counts from ``t1`` (when the tool returned; now if not given) to the end of this."""
    end = _time_ns()
    if t1 is None:
        t1 = _perf()
    sess, span = scope.sess, scope.span
    try:
        _cpu_reset(scope.cpu_token)
        child = scope.child_cpu_ns
        if child:
            add_child_cpu(child)
        own = cpu_ns + child
        try:
            _ctx_reset(scope.token)
        except Exception:  # a token from another context: as OpenTelemetry's detach
            current_span.leave(scope.token)
        attrs = span._attributes
        hot = sess.hot
        shape = span._shape  # None once the span changed through its API (or had no template)
        ints = () if shape is None or not shape[3] else shape_ints(shape, attrs)
        rq = runq_since(sess, scope.rq0)
        if hot is not None and shape is not None and len(attrs) == shape[2] and span._status is UNSET_STATUS \
                and span._end_time is None and not hot.failed and ints is not None:
            attrs[_CPU_NS] = own
            span._end_time = end
            ctx, parent = span._context, span._parent
            if rq >= 0:
                attrs[_RUNQ_NS] = rq
                line = shape[4] % (*ints, own, rq, ctx[0], ctx[1], parent[1], span._start_time, end)
            else:
                line = shape[0] % (*ints, own, ctx[0], ctx[1], parent[1], span._start_time, end)
            writer = hot.writer
            try:
                with writer._lock:  # as JsonlTraceWriter.write_line (a closed writer: the session ended)
                    fd = writer._fd
                    if fd >= 0:
                        n = _write(fd, line)
                        while n < len(line):
                            line = line[n:]
                            n = _write(fd, line)
                    sess.hot_spans += 1
            except Exception as e:
                hot.fail(e)
        elif span._end_time is None:
            attrs[_CPU_NS] = own
            if rq >= 0:
                attrs[_RUNQ_NS] = rq
            span.end(end)
    except Exception as e:
        internal_error("ending a tool span", e)
    sess.overhead_ns += scope.overhead + _perf() - t1


def _available() -> bool:
    return current_span.FAST and provider.FLAGS is not None


def sync_tool(fn: Callable[..., Any], span_name: str, general: Callable[..., Any],
              last: list[Any]) -> Callable[..., Any]:
    """A wrapper calling ``fn`` that records the call on the hot path when it can and through ``general``
    (the tool's general wrapper) otherwise."""
    if not _available():
        return general

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _session_get() is None and current() is None:  # no profile at all: the tool runs as it is
            return fn(*args, **kwargs)
        t0 = _perf()
        try:
            started = start(last, span_name)
        except Exception as e:
            internal_error("starting a tool span", e)
            return fn(*args, **kwargs)
        if started is None:
            return general(*args, **kwargs)
        cpu0 = _thread_time()
        started.overhead = _perf() - t0  # from the wrapper's entry to the tool's: all of it is agentprof's
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            started.end(e, cpu_ns=_thread_time() - cpu0)
            raise
        t1 = _perf()
        finish(started, _thread_time() - cpu0, t1)
        return result

    return wrapper


def async_tool(fn: Callable[..., Any], span_name: str, general: Callable[..., Any],
               last: list[Any]) -> Callable[..., Any]:
    """:func:`sync_tool` for coroutine functions: CPU is the thread CPU of the tool's own steps."""
    if not _available():
        return general

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _session_get() is None and current() is None:
            return await fn(*args, **kwargs)
        t0 = _perf()
        try:
            started = start(last, span_name)
        except Exception as e:
            internal_error("starting a tool span", e)
            return await fn(*args, **kwargs)
        if started is None:
            return await general(*args, **kwargs)
        started.overhead = _perf() - t0
        measured = MeasuredCoroutine(fn(*args, **kwargs))
        try:
            result = await measured
        except BaseException as e:
            started.end(e, cpu_ns=measured.cpu_ns)
            raise
        finish(started, measured.cpu_ns, _perf())
        return result

    return wrapper
