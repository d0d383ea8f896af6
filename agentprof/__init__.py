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


__all__ = ["__version__", *_CAPTURE_API]
