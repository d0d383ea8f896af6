"""agentprof: where an AI agent's time goes, and what would change it.

Public API (capture): ``profile``, ``tool``, ``span``, ``parse_json``. Stages: ``agentprof.trace``
(model and files), ``agentprof.importers``, ``agentprof.analysis``, ``agentprof.replay``, ``agentprof.report``.
"""

from __future__ import annotations

__version__ = "0.1.0"

_CAPTURE_API = ("profile", "tool", "span", "parse_json")


def __getattr__(name: str):  # lazy: importing agentprof must stay cheap for wrapped agents
    if name in _CAPTURE_API:
        from agentprof import capture

        value = globals()[name] = getattr(capture, name)  # found directly from then on (per-call APIs: span)
        return value
    raise AttributeError(f"module 'agentprof' has no attribute {name!r}")


def _notebook_display() -> None:
    """In a running IPython, show traces and stage results as the report stage draws them, registered by type
    name so nothing is imported until a result is displayed (the stages themselves import nothing above them)."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None:
        return
    try:
        formatter = shell.display_formatter.formatters["text/html"]

        def html(obj: object) -> str:
            from agentprof.report.notebook import html_for

            return html_for(obj)

        from agentprof.display import DISPLAYED_TYPES

        for module, name in DISPLAYED_TYPES:
            formatter.for_type_by_name(module, name, html)
    except Exception:  # a display nicety must never break an import
        pass


_notebook_display()

__all__ = ["__version__", *_CAPTURE_API]
