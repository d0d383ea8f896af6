"""Names of the tools decorated with ``@agentprof.tool`` in this process: a framework tool of the same name is
recorded by the decorator, not a second time by the framework hook."""

from __future__ import annotations

DECORATED: set[str] = set()


def note(name: str) -> None:
    """Remember a decorated tool's name (at decoration time, not per call)."""
    DECORATED.add(name)
