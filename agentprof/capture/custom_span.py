"""``agentprof.span(kind, name)``: a custom phase recorded as a span of one of the trace model's kinds.

Tool, parse and orchestration phases measure the thread CPU they use; without extra attributes they take the
tool-call hot path (:mod:`agentprof.capture.hot_tool`) in the common case, and the general :class:`Scope`
otherwise. Both record the same span.
"""

from __future__ import annotations

from time import thread_time_ns as _thread_time
from typing import Any

from agentprof import semconv as sc
from agentprof.capture import hot_tool
from agentprof.capture.exporter import line_shape
from agentprof.capture.failsafe import internal_error
from agentprof.capture.session import current
from agentprof.capture.spans import KINDS, Scope


class _NoSpan:
    """Handle returned when no profile is active: accepts and ignores attributes."""

    span_id = None

    def set_attribute(self, key: str, value: Any) -> None:
        pass


_NO_SPAN = _NoSpan()


_CPU_KINDS = ("tool", "parse", "orchestration")
_TEMPLATES: dict[tuple[str, str, str], tuple[dict[str, Any], Any]] = {}
"""Attributes and line template of ``span(kind, name)`` without extra attributes, per session, kind and name."""


class span:
    """``with agentprof.span(kind, name):`` records a custom phase as a span of that kind.

    ``kind`` is one of ``agent``, ``model``, ``tool``, ``parse``, ``orchestration``, ``wait``; ``attributes``
    adds span attributes (e.g. ``{"agentprof.wait.reason": "user_turn"}`` on a wait; the reasons are in
    ``agentprof.trace.waits``). Tool, parse and orchestration spans measure the thread CPU they use. Outside a
    profile it does nothing.
    """

    __slots__ = ("kind", "name", "attributes", "_scope", "_hot", "_cpu0")

    def __init__(self, kind: str, name: str, attributes: dict[str, Any] | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown span kind {kind!r} (expected one of {', '.join(KINDS)})")
        if not isinstance(name, str) or not name:
            raise ValueError("span name must be a non-empty string")
        self.kind = kind
        self.name = name
        self.attributes = attributes
        self._scope: Scope | None = None
        self._hot: Any = None
        self._cpu0 = 0

    def __enter__(self) -> Scope | _NoSpan:
        sess = current()
        if sess is None:
            return _NO_SPAN
        try:
            cpu = self.kind in _CPU_KINDS
            key = (sess.id, self.kind, self.name)
            cached = None if self.attributes else _TEMPLATES.get(key)
            if cached is not None:
                attrs, shape = cached
            else:
                attrs = {sc.KIND: self.kind, sc.SESSION_ID: sess.id}
                if self.attributes:
                    attrs.update(self.attributes)
                if self.kind == "tool":
                    attrs.setdefault(sc.OPERATION_NAME, sc.OP_EXECUTE_TOOL)
                    attrs.setdefault(sc.TOOL_NAME, self.name)
                shape = line_shape(self.name, attrs) if cpu and not sess.capture_content else None
                if not self.attributes:
                    if len(_TEMPLATES) >= 4096:
                        _TEMPLATES.clear()
                    _TEMPLATES[key] = (attrs, shape)
            if shape is not None and sess.hot is not None and not self.attributes:
                started = hot_tool.start(((sess, attrs, shape),), self.name)
                if started is not None:
                    self._hot = started
                    self._cpu0 = _thread_time()
                    return started
            self._scope = Scope(sess, self.name, attrs, cpu=cpu, shape=shape)
        except Exception as e:
            internal_error("starting a span", e)
            return _NO_SPAN
        return self._scope

    def __exit__(self, et: Any, exc: BaseException | None, tb: Any) -> None:
        if self._hot is not None:
            cpu = _thread_time() - self._cpu0
            started, self._hot = self._hot, None
            if exc is None:
                hot_tool.finish(started, cpu)
            else:
                started.end(exc, cpu_ns=cpu)
            return
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.end(exc)

    async def __aenter__(self) -> Scope | _NoSpan:
        return self.__enter__()

    async def __aexit__(self, et: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(et, exc, tb)


