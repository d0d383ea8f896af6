"""The one-session replay's ``--overflow``: what the client sends once a session's context nears the served window.

The prompts are the serving simulation's (:func:`agentprof.replay.serving.overflow.fit` on the sessions plan of the
model's calls, the served window being the model's context or one replica's KV pool, whichever is smaller); this
module maps them back onto the replay's call table. A call whose prompt is the recorded one keeps the cache hits
the replay's own cache simulation gave it; a compacted or summarizing call hits the kept head, then its session's
own growing prefix (one session alone: its context, at most the window, stays in HBM).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agentprof.replay.cachepolicy import CacheHits
from agentprof.replay.costmodel import CallTimes
from agentprof.replay.serving.overflow import TRIGGER_SHARE, fit, served_window, shared_head
from agentprof.replay.serving.sessions import SessionPlan


@dataclass(frozen=True)
class ClientCalls:
    """One model's calls as the client sends them: per sent call its prompt, reply, the replay call it is or
    precedes (a position in the model's calls), whether its hits are the replay's own and its own-prefix hits."""

    pos: np.ndarray  # per sent call: position in the model's calls (an inserted summarizing call: the next call's)
    inp: np.ndarray
    out: np.ndarray
    own_hits: np.ndarray  # cached prompt tokens from the session's own prefix (HBM)
    recorded_prompt: np.ndarray  # the prompt is the recorded one: the replay's cache simulation's hits hold
    unserved: np.ndarray  # bool per model call: not sent (its session's task failed at or before it)
    record: dict[str, Any]  # ``beyond_context`` as the serving simulation reports it (Overflow.summary)


def touched(need: np.ndarray, context: float | None, pool_tokens: float, policy: str) -> bool:
    """Whether any call (prompt plus reply, ``need``) reaches what ``policy`` acts on: the compaction trigger, or
    for ``reject`` the served window itself; False leaves the replay as it was."""
    window, _ = served_window(context, pool_tokens)
    limit = window if policy == "reject" else TRIGGER_SHARE * window
    return bool(need.size) and bool((np.nan_to_num(need) > limit).any())


def _own_hits(plan: SessionPlan, want: np.ndarray) -> np.ndarray:
    """Per sent call (where ``want``): leading prompt tokens it shares with an earlier sent call of its session (the
    previous one, or the session's first: the kept head), capped at its prompt less one token."""
    bs, offs, ids = float(plan.block_size), plan.node_offsets, plan.node_ids
    hits = np.zeros(plan.n_calls)
    for s in range(plan.n_sessions):
        calls = list(plan.calls_of(s))
        for i, c in enumerate(calls):
            if not want[c]:
                continue
            mine = ids[offs[c]:offs[c + 1]]
            best = max((shared_head(mine, ids[offs[p]:offs[p + 1]]) for p in ({calls[0], calls[i - 1]} if i else ())),
                       default=0)
            hits[c] = min(best * bs, max(float(plan.input_tokens[c]) - 1.0, 0.0))
    return hits


def client_calls(plan: SessionPlan, plan_pos: np.ndarray, n_calls: int, context: float | None, pool_tokens: float,
                 policy: str) -> ClientCalls:
    """``plan`` (the sessions plan of one model's ``n_calls`` calls; ``plan_pos``: each plan call's position among
    them, -1 for calls not priced) as the client sends it under ``policy``, mapped back onto those calls."""
    sent = fit(plan, context, pool_tokens, policy, 1)
    ov = sent.overflow
    served, src = ov.plan, ov.source
    nxt = np.append(src[1:], -1)  # an inserted summarizing call precedes the call it makes room for
    pos = np.where(src >= 0, plan_pos[np.maximum(src, 0)], plan_pos[np.maximum(nxt, 0)])
    priced = np.isnan(served.fixed_s) & (pos >= 0)
    recorded = (src >= 0) & (served.input_tokens == plan.input_tokens[np.maximum(src, 0)])
    own = _own_hits(served, ~recorded)
    sent_pos = set(pos[priced & (src >= 0)].tolist())
    unserved = np.array([i not in sent_pos for i in range(n_calls)], dtype=bool)
    return ClientCalls(pos[priced], served.input_tokens[priced], served.output_tokens[priced], own[priced],
                       recorded[priced], unserved, sent.beyond_context)


def onto_calls(t: CallTimes, hits: CacheHits, c: ClientCalls, n_calls: int) -> tuple[CallTimes, CacheHits,
                                                                                        np.ndarray, np.ndarray]:
    """Times, hits and tokens of the sent calls (``t``, ``hits``) summed onto the model's ``n_calls`` calls: a
    summarizing call onto the call it precedes (its ``waiting_for`` parts too, so the parts still sum to the
    call); a call not served gets nothing."""

    def total(x: np.ndarray) -> np.ndarray:
        acc = np.zeros(n_calls)
        np.add.at(acc, c.pos, x)
        return acc

    times = CallTimes(total(t.ttft_s), total(t.decode_s), total(t.prefill_s), total(t.load_s), total(t.queue_s),
                      {k: total(v) for k, v in t.waiting_for.items()})
    return (times, CacheHits(total(hits.hbm), total(hits.cpu), total(hits.disk), hits.notes),
            total(c.inp), total(c.out))


def merged(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """One row's record over its models (counts added; the window of the first): ``b`` alone when ``a`` is None."""
    if a is None:
        return dict(b)
    return {**a, **{k: int(a[k]) + int(b[k]) for k in ("count", "sessions", "compactions", "failed_sessions")}}


def failed_note(system: str, record: dict[str, Any]) -> str:
    """The sentence the notes carry for a row whose sessions' tasks failed (reject, or too long even compacted)."""
    return (f"{system}: {record.get('failed_sessions', 0)} session(s) fail at a call beyond the served window "
            f"({record.get('window_tokens', 0):,} tokens, {record.get('window')}; --overflow {record.get('policy')}): "
            "it and the session's later calls are not served (0 s; tools and waits kept as recorded): not a finished task")
