"""openai-agents: function tools through the SDK's own tracing — a ``TracingProcessor`` added next to the
application's processors sees each ``function`` span start and end in the task that runs the tool."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from agentprof.capture.frameworks import tool_span

MODULE = "agents"
_processor: Any = None


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

        def on_span_end(self, span: Any) -> None:
            started = self.open.pop(getattr(span, "span_id", None), None)
            if started is None:
                return
            err = getattr(span, "error", None)
            tool_span.end(started, (err.get("message") or "ToolError") if isinstance(err, dict) and err else None)

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    return AgentprofToolSpans()


def _registered(tracing: Any, proc: Any) -> bool | None:
    """Whether ``proc`` is among the trace provider's processors (None when the SDK does not say)."""
    try:
        return proc in tuple(tracing.get_trace_provider()._multi_processor._processors)
    except Exception:
        return None


def install(module: ModuleType) -> list[str]:
    """Add agentprof's processor to openai-agents' tracing (again if the application reset the list)."""
    global _processor
    import agents.tracing as tracing

    if _processor is None:
        _processor = _make_processor(tracing.TracingProcessor)
        tracing.add_trace_processor(_processor)
    elif _registered(tracing, _processor) is False:
        tracing.add_trace_processor(_processor)
    return ["tracing processor"]
