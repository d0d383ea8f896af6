"""LangChain and LangGraph: a callback handler that LangChain adds to every run through its configure hook
(the mechanism its own tracers use), recording ``on_tool_start`` .. ``on_tool_end``/``on_tool_error`` — the
tools a LangGraph ``ToolNode`` or an agent executor runs, sync or async."""

from __future__ import annotations

import contextvars
from types import ModuleType
from typing import Any

from agentprof.capture.frameworks import tool_span

MODULE = "langchain_core.callbacks.manager"
_VAR: contextvars.ContextVar[Any] | None = None


def _make_handler(base: type) -> Any:
    class AgentprofToolCallbacks(base):  # type: ignore[misc, valid-type]
        """Tool start/end callbacks -> agentprof tool spans (keyed by LangChain's run id)."""

        run_inline = True  # called in the tool's own context (the profile's), not on an executor thread
        raise_error = False

        def __init__(self) -> None:
            super().__init__()
            self.open: dict[Any, Any] = {}

        def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: Any = None,
                          **kwargs: Any) -> None:
            name = (serialized or {}).get("name") or kwargs.get("name") or "tool"
            started = tool_span.start(str(name), "langchain", (kwargs.get("inputs") or {}).get("tool_call_id")
                                      if isinstance(kwargs.get("inputs"), dict) else None)
            if started is not None:
                self.open[run_id] = started

        def on_tool_end(self, output: Any, *, run_id: Any = None, **kwargs: Any) -> None:
            tool_span.end(self.open.pop(run_id, None))

        def on_tool_error(self, error: BaseException, *, run_id: Any = None, **kwargs: Any) -> None:
            tool_span.end(self.open.pop(run_id, None), error)

    return AgentprofToolCallbacks()


def install(module: ModuleType) -> list[str]:
    """Register the handler with LangChain's configure hook once (it is then part of every callback manager)."""
    global _VAR
    if _VAR is not None:
        return ["configure hook"]
    from langchain_core.callbacks.base import BaseCallbackHandler
    from langchain_core.tracers.context import register_configure_hook

    # one handler for the whole process, in every context (it does nothing outside a profile)
    handler = _make_handler(BaseCallbackHandler)
    _VAR = contextvars.ContextVar("agentprof_langchain_tools", default=handler)  # noqa: B039
    register_configure_hook(_VAR, inheritable=True)
    return ["configure hook"]
