"""``@agentprof.tool``: record each call of a tool function as an ``execute_tool {name}`` span.

Works on sync and async functions, with or without arguments (``@tool``, ``@tool(name="search")``), and
costs one context-variable lookup when no profile is active. Thread CPU is measured for the replay stage:
for async tools only while the tool's own coroutine runs (not while other tasks run during its awaits).
Calls take :mod:`agentprof.capture.hot_tool` in the common case and the general path below otherwise; both
record the same span.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any, TypeVar, overload

from agentprof import semconv as sc
from agentprof.capture.coroutine_cpu import MeasuredCoroutine
from agentprof.capture.exporter import line_shape
from agentprof.capture.failsafe import internal_error
from agentprof.capture.frameworks.decorated import note as note_decorated
from agentprof.capture.hot_tool import async_tool, sync_tool
from agentprof.capture.session import current
from agentprof.capture.spans import DetachedSpan, Scope

F = TypeVar("F", bound=Callable[..., Any])

_MAX_CONTENT = 65536


def _content(value: Any) -> str:
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    except Exception:
        text = repr(value)
    return text[:_MAX_CONTENT]


def _arguments(sig: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    try:
        if sig is not None:
            bound = sig.bind_partial(*args, **kwargs)
            return _content(dict(bound.arguments))
    except TypeError:
        pass
    return _content({"args": list(args), "kwargs": kwargs})


def _make(fn: Callable[..., Any], tool_name: str) -> Callable[..., Any]:
    note_decorated(tool_name)  # framework hooks leave this tool to the decorator (counted once)
    span_name = sc.tool_span_name(tool_name)
    template = {sc.KIND: "tool", sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.TOOL_NAME: tool_name}
    try:
        sig: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None

    last: list[Any] = [(None, None, None)]  # [(session, its attribute dict, line shape)], one atomic slot

    def begin(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Scope | None:
        sess = current()
        if sess is None:
            return None
        try:
            if sess.capture_content:
                attrs = {**template, sc.SESSION_ID: sess.id,
                         sc.TOOL_CALL_ARGUMENTS: _arguments(sig, args, kwargs)}
                shape = None
            else:
                cached_sess, attrs, shape = last[0]
                if cached_sess is not sess:
                    attrs = {**template, sc.SESSION_ID: sess.id}
                    shape = line_shape(span_name, attrs)
                    last[0] = (sess, attrs, shape)
            return Scope(sess, span_name, attrs, cpu=True, shape=shape)
        except Exception as e:
            internal_error("starting a tool span", e)
            return None

    def result_attr(scope: Scope, result: Any) -> None:
        if scope.sess.capture_content:
            try:
                scope.span.set_attribute(sc.TOOL_CALL_RESULT, _content(result))
            except Exception as e:
                internal_error("recording a tool result", e)

    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return _make_generator(fn, span_name, template)

    if inspect.iscoroutinefunction(fn):
        async def async_general(*args: Any, **kwargs: Any) -> Any:
            scope = begin(args, kwargs)
            if scope is None:
                return await fn(*args, **kwargs)
            measured = MeasuredCoroutine(fn(*args, **kwargs))
            try:
                result = await measured
            except BaseException as e:
                scope.end(e, cpu_ns=measured.cpu_ns)
                raise
            result_attr(scope, result)
            scope.end(None, cpu_ns=measured.cpu_ns)
            return result

        async_wrapper = functools.wraps(fn)(async_tool(fn, span_name, async_general, last))
        async_wrapper.__agentprof_tool__ = tool_name  # type: ignore[attr-defined]
        return async_wrapper

    def general(*args: Any, **kwargs: Any) -> Any:
        scope = begin(args, kwargs)
        if scope is None:
            return fn(*args, **kwargs)
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            scope.end(e)
            raise
        if scope.sess.capture_content:
            result_attr(scope, result)
        scope.end()
        return result

    wrapper = functools.wraps(fn)(sync_tool(fn, span_name, general, last))
    wrapper.__agentprof_tool__ = tool_name  # type: ignore[attr-defined]
    return wrapper


def _make_generator(fn: Callable[..., Any], span_name: str, template: dict[str, Any]) -> Callable[..., Any]:
    """Generator tools: the span runs from the first item requested until the generator is exhausted or
    closed. It is not made the current span (the caller's code runs between items), and CPU is not measured."""
    def begin() -> DetachedSpan | None:
        sess = current()
        if sess is None:
            return None
        try:
            return DetachedSpan(sess, span_name, {**template, sc.SESSION_ID: sess.id})
        except Exception as e:
            internal_error("starting a tool span", e)
            return None

    if inspect.isasyncgenfunction(fn):
        @functools.wraps(fn)
        async def async_gen(*args: Any, **kwargs: Any) -> Any:
            span = begin()
            try:
                async for item in fn(*args, **kwargs):
                    yield item
            except BaseException as e:
                if span is not None:
                    span.finish(exc=None if isinstance(e, GeneratorExit) else e)
                raise
            if span is not None:
                span.finish()

        return async_gen

    @functools.wraps(fn)
    def gen(*args: Any, **kwargs: Any) -> Any:
        span = begin()
        try:
            yield from fn(*args, **kwargs)
        except BaseException as e:
            if span is not None:
                span.finish(exc=None if isinstance(e, GeneratorExit) else e)
            raise
        if span is not None:
            span.finish()

    return gen


@overload
def tool(fn: F) -> F: ...


@overload
def tool(fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Mark a tool function: each call inside a profile becomes an ``execute_tool {name}`` span.

    ``name`` defaults to the function's name. Arguments and results are recorded only with
    ``capture_content=True``; exceptions are recorded (type only) and re-raised unchanged.
    """
    if fn is None:
        return lambda f: _make(f, name or f.__name__)
    if isinstance(fn, str):
        raise TypeError("use @agentprof.tool(name=...) to name a tool")
    return _make(fn, name or getattr(fn, "__name__", "tool"))
