"""``agentprof.parse_json``: parse JSON and record the parse as a ``parse`` span with its size in bytes (on the
tool-call hot path in the common case, the general :class:`Scope` otherwise: the same span either way)."""

from __future__ import annotations

import json
from collections.abc import Callable
from time import thread_time_ns as _thread_time
from typing import Any

from agentprof import semconv as sc
from agentprof.capture import hot_tool
from agentprof.capture.exporter import line_shape
from agentprof.capture.failsafe import internal_error
from agentprof.capture.session import Session, current
from agentprof.capture.spans import Scope

ORIGINAL_LOADS = json.loads
"""``json.loads`` as it was when agentprof was imported (parse spans never record themselves twice)."""


def nbytes(text: Any) -> int:
    """Size of a JSON document in bytes (UTF-8 for text)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return len(text)
    if isinstance(text, str):
        return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return 0


_SHAPES: dict[tuple[str, str], tuple[dict[str, Any], Any]] = {}
"""Per session id and span name: the parse span's attributes (byte count last) and line template (hot path)."""


def _hot_start(sess: Session, name: str, size: int) -> Scope | None:
    """Start a parse span on the tool-call hot path (:mod:`agentprof.capture.hot_tool`), or None."""
    key = (sess.id, name)
    cached = _SHAPES.get(key)
    if cached is None:
        attrs = {sc.KIND: "parse", sc.SESSION_ID: sess.id, sc.PARSE_BYTES: 0}
        if len(_SHAPES) >= 4096:
            _SHAPES.clear()
        cached = _SHAPES[key] = (attrs, line_shape(name, attrs, ints=(sc.PARSE_BYTES,)))
    if cached[1] is None:
        return None
    started = hot_tool.start(((sess, *cached),), name)
    if started is not None:
        started.store[sc.PARSE_BYTES] = size
    return started


def recorded_loads(sess: Session, name: str, loads: Callable[..., Any], text: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any], partial: bool = False) -> Any:
    """``loads(text, *args, **kwargs)`` recorded as a ``parse`` span of ``sess`` named ``name``; its exception
    (a parse error) propagates unchanged and marks the span failed — unless ``partial`` (a library's attempt on
    a document still streaming in): then the span is classed ``agentprof.parse.partial`` ``incomplete``, not
    failed."""
    try:
        size = nbytes(text)
        started = _hot_start(sess, name, size) if sess.hot is not None and not partial else None
        attrs: dict[str, Any] = {sc.KIND: "parse", sc.SESSION_ID: sess.id, sc.PARSE_BYTES: size}
        if partial:
            attrs[sc.PARSE_PARTIAL] = "complete"
        scope = None if started is not None else Scope(sess, name, attrs, cpu=True)
    except Exception as e:
        internal_error("starting a parse span", e)
        return loads(text, *args, **kwargs)
    if started is None:
        try:
            result = loads(text, *args, **kwargs)
        except BaseException as e:
            if partial and isinstance(e, ValueError):
                scope.set_attribute(sc.PARSE_PARTIAL, "incomplete")  # type: ignore[union-attr]
                scope.end()  # type: ignore[union-attr]
            else:
                scope.end(e)  # type: ignore[union-attr]
            raise
        scope.end()  # type: ignore[union-attr]
        return result
    cpu0 = _thread_time()
    try:
        result = loads(text, *args, **kwargs)
    except BaseException as e:
        started.end(e, cpu_ns=_thread_time() - cpu0)
        raise
    hot_tool.finish(started, _thread_time() - cpu0)
    return result


def parse_json(text: str | bytes | bytearray, name: str = "parse_json", **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``, recorded as a ``parse`` span named ``name`` inside a profile.

    Parse errors (``json.JSONDecodeError``) propagate unchanged and mark the span failed.
    """
    sess = current()
    if sess is None:
        return ORIGINAL_LOADS(text, **kwargs)
    return recorded_loads(sess, name, ORIGINAL_LOADS, text, (), kwargs)
