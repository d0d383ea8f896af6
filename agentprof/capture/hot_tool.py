"""The hot path of a synchronous ``@tool`` call: the whole span in the tool's own wrapper, one Python frame.

Why a separate path: on a tool of about a millisecond the profiler's cost is set less by how much it does
than by how much code and data it touches, because the tool's own work has evicted them from the CPU's
caches by the time the span ends (measured in docs/PERFORMANCE.md: a Python call costs several times its
warm price there). So in the common case (the session writes one file, no OTLP export, no content capture,
the tool is called under agentprof's or the SDK's own span) this wrapper does inline what
:class:`~agentprof.capture.spans.Scope`, :meth:`LeanSpan.end`, the span processor and the exporter do, and
writes the very line they would write. Anything else (another case at the start, an exception, an attribute
or status set through the span's API, a session that started finishing) goes the general way from the point
where it differs, so both paths record the same span.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from random import getrandbits
from typing import Any

from opentelemetry.context.context import Context
from opentelemetry.sdk import trace as _sdk_trace
from opentelemetry.trace import SpanContext, SpanKind
from opentelemetry.trace.span import DEFAULT_TRACE_STATE

from agentprof import semconv as sc
from agentprof.capture import current_span, provider
from agentprof.capture.failsafe import internal_error
from agentprof.capture.lean_span import UNSET_STATUS, LeanSpan
from agentprof.capture.session import ACTIVE_SESSION, Session, current
from agentprof.capture.spans import CPU_SCOPE, add_child_cpu, record_error

_PARENTS = frozenset((LeanSpan, _sdk_trace.Span, getattr(_sdk_trace, "_Span", _sdk_trace.Span)))
"""Span classes whose context a hot call reads directly (``_context``); any other current span: general path."""

_INTERNAL = SpanKind.INTERNAL
_CPU_NS = sc.CPU_NS


def _span_id() -> int:
    """A valid span id as the SDK's ``RandomIdGenerator`` makes it (0 is invalid and drawn again)."""
    span_id = getrandbits(64)
    while not span_id:
        span_id = getrandbits(64)
    return span_id


def _end_failed(sess: Session, span: LeanSpan, token: Any, cpu_token: Any, cpu_ns: int, overhead: int,
                exc: BaseException) -> None:
    """End a hot call whose tool raised, as ``Scope.end(exc)`` does."""
    t0 = time.perf_counter_ns()
    try:
        CPU_SCOPE.reset(cpu_token)
        child = span.child_cpu_ns
        if child:
            add_child_cpu(child)
        span._attributes[_CPU_NS] = cpu_ns + child
        record_error(span, exc, sess.capture_content)
    except Exception as e:
        internal_error("recording a span", e)
    try:
        current_span.leave(token)
        span.end()
    except Exception as e:
        internal_error("ending a span", e)
    sess.overhead_ns += overhead + time.perf_counter_ns() - t0


def sync_tool(fn: Callable[..., Any], span_name: str, general: Callable[..., Any],
              last: list[Any]) -> Callable[..., Any]:
    """A wrapper calling ``fn`` that records the call on the hot path when it can and through ``general``
    (the tool's general wrapper) otherwise. ``last[0]`` is the tool's ``(session, attributes, line shape)``
    as ``general`` last built it for a session."""
    if not current_span.FAST or provider.FLAGS is None:
        return general
    ctx_get, ctx_set, ctx_reset = current_span.CONTEXT_VAR.get, current_span.CONTEXT_VAR.set, \
        current_span.CONTEXT_VAR.reset
    key, put = current_span.SPAN_KEY, dict.__setitem__
    session_get, cpu_set, cpu_reset = ACTIVE_SESSION.get, CPU_SCOPE.set, CPU_SCOPE.reset
    flags_random, flags_not_random, random_bit = provider.FLAGS, provider.FLAGS_NOT_RANDOM, provider.RANDOM_TRACE_ID
    perf, thread_time, time_ns, write = time.perf_counter_ns, time.thread_time_ns, time.time_ns, os.write
    new_tuple, parents, unset, kind, cpu_key = tuple.__new__, _PARENTS, UNSET_STATUS, _INTERNAL, _CPU_NS
    trace_state, leave = DEFAULT_TRACE_STATE, current_span.leave

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        sess = session_get()
        if sess is None or sess.hot is None:
            if current() is None:  # no profile at all (nor a process-wide one): the tool runs as it is
                return fn(*args, **kwargs)
            return general(*args, **kwargs)
        cached = last[0]
        octx = ctx_get()
        parent = octx.get(key)
        if cached[0] is not sess or type(parent) not in parents:
            return general(*args, **kwargs)
        try:
            t0 = perf()
            shape = cached[2]
            pctx = parent._context
            span_id = getrandbits(64) or _span_id()
            span = LeanSpan(span_name, new_tuple(SpanContext, (
                pctx[0], span_id, False, flags_random if pctx[3] & random_bit else flags_not_random, trace_state,
                True)), pctx, kind, cached[1].copy(), time_ns(), shape)
            new = Context(octx)
            put(new, key, span)  # a fresh copy no one else holds yet, as current_span.enter
            token = ctx_set(new)
            cpu_token = cpu_set(span)
            overhead = perf() - t0
        except Exception as e:
            internal_error("starting a tool span", e)
            return fn(*args, **kwargs)
        cpu0 = thread_time()
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            _end_failed(sess, span, token, cpu_token, thread_time() - cpu0, overhead, e)
            raise
        cpu1 = thread_time()
        end = time_ns()
        t1 = perf()
        try:
            cpu_reset(cpu_token)
            child = span.child_cpu_ns
            if child:
                add_child_cpu(child)
            own = cpu1 - cpu0 + child
            try:
                ctx_reset(token)
            except Exception:  # a token from another context: as OpenTelemetry's detach
                leave(token)
            attrs = span._attributes
            hot = sess.hot
            if hot is not None and span._shape is shape and shape is not None and len(attrs) == shape[2] \
                    and span._status is unset and span._end_time is None and not hot.failed:
                attrs[cpu_key] = own
                span._end_time = end
                line = shape[0] % (own, pctx[0], span_id, pctx[1], span._start_time, end)
                writer = hot.writer
                try:
                    with writer._lock:  # as JsonlTraceWriter.write_line (a closed writer: the session ended)
                        fd = writer._fd
                        if fd >= 0:
                            n = write(fd, line)
                            while n < len(line):
                                line = line[n:]
                                n = write(fd, line)
                        sess.hot_spans += 1
                except Exception as e:
                    hot.fail(e)
            elif span._end_time is None:
                attrs[cpu_key] = own
                span.end(end)
        except Exception as e:
            internal_error("ending a tool span", e)
        sess.overhead_ns += overhead + perf() - t1
        return result

    return wrapper
