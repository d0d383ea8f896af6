"""openai-agents: function tools through the SDK's own tracing — a ``TracingProcessor`` added next to the
application's processors sees each ``function`` span start and end in the task that runs the tool — and, where
that tracing records nothing (``set_tracing_disabled(True)``, ``RunConfig(tracing_disabled=True)``, common with
non-OpenAI backends), below it: the SDK's one function-tool invocation (``_invoke_function_tool_with_metadata``,
as ``agents.tool`` and the runner hold it). A call the processor already records is not recorded twice."""

from __future__ import annotations

import contextvars
import functools
import sys
from types import ModuleType
from typing import Any

from agentprof.capture.failsafe import warn_once
from agentprof.capture.frameworks import tool_span
from agentprof.capture.sdk_patch import ORIGINAL
from agentprof.capture.session import current

MODULE = "agents"
INVOKE = "_invoke_function_tool_with_metadata"
INVOKE_HOLDERS = ("agents.tool", "agents.run_internal.tool_execution")
"""Modules holding the SDK's function-tool invocation under :data:`INVOKE` (the runner imported it by name)."""
_processor: Any = None
_below_tracing = False
_IN_FUNCTION_SPAN: contextvars.ContextVar[bool] = contextvars.ContextVar("agentprof_oa_function_span", default=False)
"""True while the processor records the function span this task runs a tool in."""


def _make_processor(base: type) -> Any:
    class AgentprofToolSpans(base):  # type: ignore[misc, valid-type]
        """Turns openai-agents function spans into agentprof tool spans (other spans are ignored)."""

        def __init__(self) -> None:
            self.open: dict[str, Any] = {}

        def on_trace_start(self, trace: Any) -> None:
            pass

        def on_trace_end(self, trace: Any) -> None:
            pass

        def on_span_start(self, span: Any) -> None:
            data = getattr(span, "span_data", None)
            if getattr(data, "type", None) != "function":
                return
            started = tool_span.start(str(getattr(data, "name", "tool")), "openai-agents")
            if started is not None:
                self.open[span.span_id] = started
                _IN_FUNCTION_SPAN.set(True)

        def on_span_end(self, span: Any) -> None:
            started = self.open.pop(getattr(span, "span_id", None), None)
            if started is None:
                return
            _IN_FUNCTION_SPAN.set(False)
            err = getattr(span, "error", None)
            tool_span.end(started, (err.get("message") or "ToolError") if isinstance(err, dict) and err else None)

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    return AgentprofToolSpans()


def _wrap_invoke(original: Any) -> Any:
    """The SDK's function-tool invocation, recorded as a tool span when its tracing does not record it."""

    @functools.wraps(original)
    async def invoke(*args: Any, **kwargs: Any) -> Any:
        if current() is None or _IN_FUNCTION_SPAN.get():
            return await original(*args, **kwargs)
        tool = kwargs.get("function_tool", args[0] if args else None)
        ctx = kwargs.get("context")
        span = tool_span.start(str(getattr(tool, "name", None) or "tool"), "openai-agents",
                               getattr(ctx, "tool_call_id", None))
        return await tool_span.awaited(span, original(*args, **kwargs))

    setattr(invoke, ORIGINAL, original)
    return invoke


def _patch_below_tracing() -> bool:
    """Wrap :data:`INVOKE` wherever the SDK holds it (once); False when this SDK version has no such function."""
    found = False
    for name in INVOKE_HOLDERS:
        module = sys.modules.get(name)
        fn = getattr(module, INVOKE, None) if module is not None else None
        if fn is None:
            continue
        found = True
        if getattr(fn, ORIGINAL, None) is None:
            setattr(module, INVOKE, _wrap_invoke(fn))
    return found


def _registered(tracing: Any, proc: Any) -> bool | None:
    """Whether ``proc`` is among the trace provider's processors (None when the SDK does not say)."""
    try:
        return proc in tuple(tracing.get_trace_provider()._multi_processor._processors)
    except Exception:
        return None


def _tracing_disabled(tracing: Any) -> bool:
    try:
        return bool(getattr(tracing.get_trace_provider(), "_disabled", False))
    except Exception:
        return False


def install(module: ModuleType) -> list[str]:
    """Add agentprof's processor to openai-agents' tracing (again if the application reset the list) and wrap
    the function-tool invocation below it; warn when tracing is off and there is nothing below it to wrap."""
    global _processor, _below_tracing
    import agents.tracing as tracing

    if _processor is None:
        _processor = _make_processor(tracing.TracingProcessor)
        tracing.add_trace_processor(_processor)
    elif _registered(tracing, _processor) is False:
        tracing.add_trace_processor(_processor)
    _below_tracing = _patch_below_tracing() or _below_tracing
    if not _below_tracing and _tracing_disabled(tracing):
        warn_once("openai-agents-tracing-disabled",
                  "openai-agents tracing is disabled (set_tracing_disabled(True)) and this SDK version has no "
                  f"{INVOKE} to record tools below it: its function tools are not recorded and their time reads "
                  "as orchestration")
    return ["tracing processor"] + ([f"{INVOKE}"] if _below_tracing else [])
