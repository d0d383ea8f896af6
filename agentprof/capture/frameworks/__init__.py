"""Tools of agent frameworks recorded as ``execute_tool {name}`` spans with no per-tool decoration, each
through the framework's own extension point: openai-agents' tracing processors (function spans; with its tracing
off, its function-tool invocation below the tracing layer), pydantic-ai's
``ToolManager.execute_tool_call``, and LangChain's callback configure hook (which LangGraph's ``ToolNode``
runs tools under). A tool whose function is also decorated with ``@agentprof.tool`` under the same name is
left to the decorator, so it is counted once. Installed when the framework is imported (see
:mod:`agentprof.capture.instrument`); outside a profile each hook costs one context-variable lookup."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

from agentprof.capture.frameworks import langchain_hook, openai_agents_hook, pydantic_ai_hook

TARGETS: dict[str, Callable[[ModuleType], list[str]]] = {
    openai_agents_hook.MODULE: openai_agents_hook.install,
    pydantic_ai_hook.MODULE: pydantic_ai_hook.install,
    langchain_hook.MODULE: langchain_hook.install,
}
"""Module whose import installs a framework's hook -> the installer."""


def refresh() -> None:
    """Re-check hooks a framework lets the application reset (openai-agents' processor list), at each
    profile start."""
    if openai_agents_hook.MODULE in sys.modules:
        openai_agents_hook.install(sys.modules[openai_agents_hook.MODULE])
