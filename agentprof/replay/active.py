"""Replay speed-ups on the agent-active clock as well: the recorded run's user turns, approvals and idle gaps
stay as recorded in every replay (waits are not re-timed), so a task that is 90 % waiting for its user speeds
up by little on the wall clock however fast the model gets. Leaving those waits out on both sides gives the
speed-up of the agent's own work; the waits are the ones the analysis' time split finds on the critical path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentprof.trace.schema import Trace


def human_wait_s(trace: Trace) -> float:
    """Seconds of user turns, approvals and idle gaps on the critical paths of the trace's conversations."""
    from agentprof.analysis.analyzer import is_imported
    from agentprof.analysis.calls import session_table
    from agentprof.analysis.timesplit import session_splits

    sessions = session_table(trace.spans)
    if sessions.height == 0:
        return 0.0
    _, conv = session_splits(trace.spans, sessions, imported=is_imported(trace.meta))
    tops = sessions.filter(sessions.get_column("is_top_level")).get_column("session_id").to_list()
    return float(sum(conv[c].human_wait_s for c in tops if c in conv and conv[c].timed))


def set_agent_active(recorded: Any, rows: Sequence[Any], human_s: float) -> None:
    """Fill each row's agent-active task time and the speed-ups and Amdahl bound on that clock."""
    rec_active = recorded.e2e_s - human_s if recorded.e2e_s is not None else None
    recorded.agent_active_s = rec_active
    if rec_active is not None and recorded.amdahl_e2e_s is not None and recorded.amdahl_e2e_s - human_s > 0:
        recorded.amdahl_bound_active = rec_active / (recorded.amdahl_e2e_s - human_s)
    for row in rows:
        if row.error or row.e2e_s is None or rec_active is None:
            continue
        row.agent_active_s = row.e2e_s - human_s
        if row.agent_active_s > 0:
            row.speedup_vs_recorded_active = rec_active / row.agent_active_s
        if row.amdahl_e2e_s is not None and row.amdahl_e2e_s - human_s > 0:
            row.amdahl_bound_active = rec_active / (row.amdahl_e2e_s - human_s)
