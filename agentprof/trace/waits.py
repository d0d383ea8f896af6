"""Why a wait span waited (``agentprof.wait.reason``): the reasons, their thresholds, and old names read as new.

The thresholds are the single place importers and the analysis read them from; ``docs/IMPORTING.md``
("Waits") lists them with their reasoning.
"""

from __future__ import annotations

USER_TURN = "user_turn"
"""Time from the agent's answer (or the session's start) to the next user message."""
APPROVAL = "approval"
"""A tool or command waiting for the user's permission, where the log shows the request and the decision."""
IDLE = "idle"
"""A gap of at least :data:`IDLE_GAP_S` with no evidence of what filled it (nobody working, or unrecorded)."""
RETRY = "retry"
"""The agent backing off before retrying a failed request."""
RESIDUE = "residue"
"""A short gap of at most :data:`RESIDUE_MAX_S` between the records of an imported log (clock rounding, the
time between writing one record and the next): neither the agent's nor the user's time."""
SLEEP = "sleep"
"""Captured traces: the agent's own code sleeping (``time.sleep``/``asyncio.sleep`` spans)."""
UNRECORDED = "unrecorded"
"""Time between the sessions of one conversation that no session covers (analysis only)."""

REASONS = (USER_TURN, APPROVAL, IDLE, RETRY, RESIDUE, SLEEP)
HUMAN_REASONS = frozenset({USER_TURN, APPROVAL, IDLE, UNRECORDED})
"""Waits that are not the agent's work (a person's turn or approval, nothing happening, time between a
conversation's sessions that no session covers): wall time minus these is the agent-active time. ``retry``,
``residue``, ``sleep`` and any other reason stay agent time."""

LEGACY = {"user": USER_TURN, "permission": APPROVAL}
"""Reasons written by agentprof before the split (and by users' own ``agentprof.span`` waits) and what they
mean now. kv-cache-tester's old ``think`` (tool time, permission prompts and user time not told apart) has no
single new meaning and is kept as it is (agent-active)."""

IDLE_GAP_S = 300.0
"""A gap this long with no evidence of what filled it is ``idle``. 300 s: the gap size above which the
kv-cache-tester corpus' gaps (6.9 % of them) hold 85 % of its waiting time (issue 14), the Anthropic and
OpenAI prompt-cache TTL (a cache entry is gone after such a pause, so the agent restarts cold), and above
TraceLab's p99 tool latency (3.6 min)."""

RESIDUE_MAX_S = 1.0
"""Uncovered gaps in imported traces up to this long are ``residue``: per-request gaps of -0.9 to +0.8 s
between the records of kv-cache-tester traces (whole-second ``t`` and rounded ``think_time``), and the
milliseconds between a tool result and the next record in Claude Code and Codex logs."""


def canonical(reason: str | None) -> str | None:
    """``reason`` under its current name (``user`` -> ``user_turn``, ``permission`` -> ``approval``)."""
    if reason is None:
        return None
    return LEGACY.get(reason, reason)
