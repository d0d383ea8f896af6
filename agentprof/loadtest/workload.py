"""The sessions a load test sends: the serving simulation's closed-loop plan of the trace, narrowed to what the
user asked for, so the measured run and the ``--predict`` simulation replay exactly the same calls.

Session instance ``i`` replays recorded session ``i mod S`` (``S`` sessions in the input); the instances after
the first ``S`` are copies whose blocks are their own (new text, no hits on the originals), as the simulation
fills slots. ``max_calls`` keeps each session's first calls (a smaller, faster test). Every gap between a reply
and the next call (tool run, think time, a human's answer) is scaled by ``time_scale`` and then capped at
``cap_wait`` seconds, the same for calls the server never sees (no token counts: their recorded duration waits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agentprof.errors import AgentprofError
from agentprof.replay.serving import SessionPlan, build_plan
from agentprof.trace.schema import Trace


@dataclass
class Workload:
    """The plan as sent (one plan session per session instance) and the load it runs under."""

    plan: SessionPlan
    labels: list[str]  # per instance: the recorded session id, ``#copy`` appended for copies
    concurrency: int  # sessions at once (never more than there are instances)
    notes: list[str] = field(default_factory=list)

    @property
    def sent(self) -> np.ndarray:
        """Per plan call: True when the server sees it (it has token counts: the plan's simulated calls)."""
        return self.plan.simulated

    def trace_reuse_share(self, order: list[int] | None = None) -> float:
        """Share of the sent prompt tokens an unlimited prefix cache holds on the trace's blocks when the calls
        arrive in ``order`` (plan call indices; default: session by session): each call's leading blocks that an
        earlier call had, across sessions too where the trace shares blocks. What the server's own prefix cache
        should find."""
        p = self.plan
        calls = order if order is not None else np.flatnonzero(self.sent).tolist()
        seen: set[int] = set()
        hit = total = 0.0
        for c in calls:
            ids = p.node_ids[p.node_offsets[c]:p.node_offsets[c + 1]].tolist()
            k = 0
            while k < len(ids) and ids[k] in seen:  # node ids are prefix keys: a seen block's prefix was seen
                k += 1
            seen.update(ids[k:])
            inp = float(p.input_tokens[c])
            hit += min(k * p.block_size, max(inp - 1.0, 0.0))
            total += inp
        return hit / total if total else 0.0


def prepare(trace: Trace, concurrency: int = 1, sessions: int | None = None, max_calls: int | None = None,
            cap_wait: float | None = None, time_scale: float = 1.0) -> Workload:
    """The workload of ``trace`` (see the module docstring); a clear error for impossible settings."""
    if concurrency < 1:
        raise AgentprofError(f"--concurrency must be at least 1, got {concurrency}")
    if sessions is not None and sessions < 1:
        raise AgentprofError(f"--sessions must be at least 1, got {sessions}")
    if max_calls is not None and max_calls < 1:
        raise AgentprofError(f"--max-calls must be at least 1, got {max_calls}")
    if cap_wait is not None and cap_wait < 0:
        raise AgentprofError(f"--cap-wait must be at least 0 seconds, got {cap_wait}")
    if not time_scale >= 0:
        raise AgentprofError(f"--time-scale must be at least 0, got {time_scale}")
    base = build_plan(trace, None, "global")
    n_rec = base.n_sessions
    n = sessions if sessions is not None else max(n_rec, concurrency)
    rows: list[np.ndarray] = []
    copy_of: list[int] = []
    labels: list[str] = []
    for i in range(n):
        s, c = i % n_rec, i // n_rec
        r = np.arange(int(base.start[s]), int(base.start[s + 1]), dtype=np.int64)
        rows.append(r[:max_calls] if max_calls is not None else r)
        copy_of.append(c)
        labels.append(base.session_ids[s] + (f"#{c + 1}" if c else ""))
    idx = np.concatenate(rows)
    lengths = np.array([r.size for r in rows], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    blens = np.diff(base.node_offsets)[idx]
    offs = np.concatenate([[0], np.cumsum(blens)]).astype(np.int64)
    parts = []
    for r, c in zip(rows, copy_of, strict=True):
        for call in r.tolist():
            parts.append(base.node_ids[base.node_offsets[call]:base.node_offsets[call + 1]] + c * base.n_nodes)
    node_ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    first = np.zeros(idx.size, dtype=bool)
    first[start[:-1]] = True

    def wait(x: np.ndarray) -> np.ndarray:
        y = x * time_scale
        return np.minimum(y, cap_wait) if cap_wait is not None else y

    gap = np.where(first, 0.0, wait(base.gap_s[idx]))
    fixed = np.where(np.isnan(base.fixed_s[idx]), np.nan, wait(np.nan_to_num(base.fixed_s[idx])))
    n_copies = max(copy_of) + 1
    plan = SessionPlan(
        session_ids=labels, start=start, head_s=np.zeros(n), tail_s=np.zeros(n),
        recorded_s=np.array([base.recorded_s[i % n_rec] for i in range(n)]), gap_s=gap,
        input_tokens=base.input_tokens[idx], output_tokens=base.output_tokens[idx], fixed_s=fixed,
        node_offsets=offs, node_ids=node_ids.astype(np.int64), block_size=base.block_size,
        n_nodes=base.n_nodes * n_copies, span_ids=[base.span_ids[i] for i in idx.tolist()],
        trace_ids=[base.trace_ids[i] for i in idx.tolist()], models=[base.models[i] for i in idx.tolist()],
        cache_read=base.cache_read[idx], cache_write=base.cache_write[idx], reuse_tokens=base.reuse_tokens[idx],
        notes=list(base.notes))
    notes = [x for x in base.notes if not x.startswith("human waits capped")]
    if n > n_rec:
        notes.append(f"{n_rec} recorded session(s) cycled to {n} session instances (copies share no blocks)")
    if max_calls is not None:
        notes.append(f"each session cut to its first {max_calls} call(s) (--max-calls)")
    if not plan.simulated.any():
        raise AgentprofError("no model call in the selection has token counts: nothing to send")
    return Workload(plan, labels, min(concurrency, n), notes)
