"""Agent-active time: the wall time minus the waits in which the agent was not working (a person's turn, an
approval, idle time, time no session covers). One function, so every consumer (``agentprof diff`` first)
shares one definition and it can later read the analysis' own ``agent_active_s`` when the time split has it.

Wait reasons are read generically (whatever ``agentprof.wait.reason`` holds, as ``wait_by_reason`` /
``waits_by_reason`` carry them); the ones below count as *not* agent time. ``retry``, ``sleep`` and any reason
not listed (``residue``, ``unspecified``, kv-cache-tester's old ``think``, …) stay agent time: the agent chose
to wait, or nobody can tell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentprof.trace import waits

OUTSIDE_AGENT_REASONS = waits.HUMAN_REASONS
"""Wait reasons whose time is not the agent's own (one definition: :data:`agentprof.trace.waits.HUMAN_REASONS`;
the names of older traces, ``user`` and ``permission``, are read as ``user_turn`` and ``approval``)."""


def waits_by_reason(time: Mapping[str, Any]) -> dict[str, float]:
    """Seconds per wait reason from a time split (``waits_by_reason`` or ``wait_by_reason``; a JSON string
    as the per-session table stores it is read too)."""
    raw = time.get("waits_by_reason", time.get("wait_by_reason")) or {}
    if isinstance(raw, str):
        import json

        try:
            raw = json.loads(raw)
        except ValueError:
            raw = {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float))} if isinstance(raw, Mapping) \
        else {}


def is_outside_agent(reason: str) -> bool:
    """True when a wait of this reason is not the agent's own time."""
    return waits.canonical(reason) in OUTSIDE_AGENT_REASONS


def agent_active_s(time: Mapping[str, Any]) -> float:
    """Seconds the agent itself was working: ``agent_active_s`` when the time split carries it, else wall time
    minus the waits of :data:`OUTSIDE_AGENT_REASONS`."""
    given = time.get("agent_active_s")
    if isinstance(given, (int, float)):
        return float(given)
    wall = float(time.get("wall_s") or 0.0)
    outside = sum(v for r, v in waits_by_reason(time).items() if is_outside_agent(r))
    return max(0.0, wall - outside)
