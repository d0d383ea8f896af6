"""One framework tool call as an agentprof tool span, started and ended from the framework's callbacks."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from agentprof import semconv as sc
from agentprof.capture.failsafe import internal_error
from agentprof.capture.frameworks.decorated import DECORATED
from agentprof.capture.session import current
from agentprof.capture.spans import DetachedSpan

T = TypeVar("T")


def start(name: str, framework: str, call_id: str | None = None) -> DetachedSpan | None:
    """Start ``execute_tool {name}`` in the current profile; None outside one, or when ``name`` is a
    decorated tool (the decorator records it)."""
    sess = current()
    if sess is None or name in DECORATED:
        return None
    try:
        attrs: dict[str, Any] = {sc.KIND: "tool", sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.TOOL_NAME: name,
                                 sc.SESSION_ID: sess.id, "agentprof.tool.framework": framework}
        if call_id:
            attrs[sc.TOOL_CALL_ID] = str(call_id)
        return DetachedSpan(sess, sc.tool_span_name(name), attrs)
    except Exception as e:
        internal_error(f"starting a {framework} tool span", e)
        return None


def end(span: DetachedSpan | None, error: BaseException | str | None = None) -> None:
    """End a span from :func:`start` (``error``: the exception, or the framework's error type name)."""
    if span is None:
        return
    if isinstance(error, BaseException):
        span.finish(exc=error)
    elif error:
        span.finish({sc.ERROR_TYPE: error})
    else:
        span.finish()


async def awaited(span: DetachedSpan | None, call: Awaitable[T]) -> T:
    """Await a framework's tool call inside ``span`` (from :func:`start`): ended with the call's exception, which
    passes on unchanged, or as ok."""
    try:
        result = await call
    except BaseException as e:
        end(span, e)
        raise
    end(span)
    return result
