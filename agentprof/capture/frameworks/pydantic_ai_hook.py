"""pydantic-ai: every tool call runs through ``ToolManager.execute_tool_call`` (``handle_call`` in older
releases), wrapped at the class level; output tools (the structured final answer) are not tools the agent
runs and are left out."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from agentprof.capture.frameworks import tool_span
from agentprof.capture.sdk_patch import ORIGINAL
from agentprof.capture.session import current

MODULE = "pydantic_ai.tool_manager"


def _call_of(arg: Any) -> Any:
    return getattr(arg, "call", arg)  # a ValidatedToolCall holds the ToolCallPart; handle_call gets the part


def _wrap(original: Any) -> Any:
    @functools.wraps(original)
    async def method(self: Any, first: Any, *args: Any, **kwargs: Any) -> Any:
        if current() is None:
            return await original(self, first, *args, **kwargs)
        call = _call_of(first)
        kind = getattr(call, "tool_kind", None) or getattr(getattr(getattr(first, "tool", None), "tool_def", None),
                                                           "kind", None)
        span = None if kind == "output" else tool_span.start(str(getattr(call, "tool_name", "tool")),
                                                            "pydantic-ai", getattr(call, "tool_call_id", None))
        return await tool_span.awaited(span, original(self, first, *args, **kwargs))

    setattr(method, ORIGINAL, original)
    return method


def install(module: ModuleType) -> list[str]:
    cls = getattr(module, "ToolManager", None)
    if cls is None:
        return []
    for name in ("execute_tool_call", "handle_call"):
        fn = cls.__dict__.get(name)
        if fn is not None:
            if getattr(fn, ORIGINAL, None) is None:
                setattr(cls, name, _wrap(fn))
            return [f"ToolManager.{name}"]
    return []
