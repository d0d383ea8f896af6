"""Make a span the current one and restore the previous context: OpenTelemetry's ``attach(set_span_in_context(
span))`` and ``detach(token)``, done on the runtime context's context variable directly when OpenTelemetry
uses its default (contextvars) runtime context.

Every tool call goes through this twice; the public API takes seven Python calls for it, this takes none
beyond its own. The shortcut is checked against the public API once at import (the span it sets is the one
``get_current_span`` returns, and the reset restores the previous span); on any mismatch, or with another
runtime context configured, the public API is used.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

_public_attach = otel_context.attach
_public_detach = otel_context.detach
_in_context = otel_trace.set_span_in_context


def _public_enter(span: Any) -> Any:
    return _public_attach(_in_context(span))


def _public_leave(token: Any) -> None:
    _public_detach(token)


def _public_current() -> Any:
    span = otel_trace.get_current_span()
    return None if span is otel_trace.INVALID_SPAN else span


def _shortcut() -> tuple[Any, Any, Any, Any, Any] | None:
    """(enter, leave, current, the ContextVar, the span's key in a context) working on the runtime context's
    ContextVar, or None if this OpenTelemetry differs."""
    try:
        from opentelemetry.context.context import Context
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
        from opentelemetry.trace.propagation import _SPAN_KEY

        runtime = otel_context._RUNTIME_CONTEXT  # type: ignore[attr-defined]
        if type(runtime) is not ContextVarsRuntimeContext:
            return None
        var = runtime._current_context
        get, set_, reset, key, put = var.get, var.set, var.reset, _SPAN_KEY, dict.__setitem__

        def enter(span: Any) -> Any:
            new = Context(get())
            put(new, key, span)  # a fresh copy no one else holds yet (Context forbids item assignment)
            return set_(new)

        def leave(token: Any) -> None:
            try:
                reset(token)
            except Exception:  # a token from another context (as OpenTelemetry's detach, log and go on)
                _public_detach(token)

        def current() -> Any:
            return get().get(key)

        # the shortcut must agree with the public API both ways
        probe = otel_trace.NonRecordingSpan(otel_trace.INVALID_SPAN_CONTEXT)
        before = otel_trace.get_current_span()
        token = enter(probe)
        ok = otel_trace.get_current_span() is probe
        leave(token)
        ok = ok and otel_trace.get_current_span() is before
        outer = _public_enter(probe)
        ok = ok and current() is probe
        _public_leave(outer)
        return (enter, leave, current, var, key) if ok else None
    except Exception:  # pragma: no cover - another OpenTelemetry layout
        return None


_fast = _shortcut()
enter, leave, current = _fast[:3] if _fast is not None else (_public_enter, _public_leave, _public_current)
"""``enter(span) -> token`` makes ``span`` current; ``leave(token)`` restores the context before it;
``current()`` is the current span or None."""

FAST = _fast is not None
CONTEXT_VAR: Any = _fast[3] if _fast is not None else None
"""OpenTelemetry's runtime context variable when the shortcut holds (hot paths inline ``enter``/``leave``)."""
SPAN_KEY: Any = _fast[4] if _fast is not None else None
"""The key of the current span in an OpenTelemetry ``Context`` (with :data:`CONTEXT_VAR`)."""
