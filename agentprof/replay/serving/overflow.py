"""Calls the simulated server cannot serve: what the client does instead (``--overflow``).

A call whose prompt and reply exceed the served window — the stand-in model's context, or the KV one replica's
pool holds, whichever is smaller (an engine refuses a ``max_model_len`` its pool cannot hold) — is never served
as recorded. The policy models the client:

- ``compact`` (default): the client compacts its history at the stand-in's window, as the recorded agent does at
  its own. Figures measured on the bundled Claude Code session ``258c7280`` (claude-opus-4-6, 200K window;
  ``traces/samples/claude-code``): it compacted once its context reached 167,060 tokens (83.5 % of the window);
  the summarizing call read the whole history (cached) and wrote 3,326 tokens; the next prompt was 33,957
  tokens, of which the first 21,460 (system prompt and tools) still hit the cache and the rest was new. Here a
  call whose context would pass 83.5 % of the served window is preceded by such a summarizing call (when the
  session has an earlier call to summarize; it reads that history, cut to what the window leaves beside its
  reply when a recorded jump past the window leaves no room), its prompt becomes 33,957 tokens plus what it adds to its
  predecessor's context, and the calls after it grow as recorded from there; the cache keeps only the head the
  prompt shares with the session's first call (at most 21,460 tokens), the rest is new blocks that the
  following calls of the session extend.
- ``reject``: the server refuses the call (context length exceeded) and the session ends there: its task fails
  (counted, not completed).
- ``stand-in``: the replay picks a stand-in whose window covers the trace
  (:func:`agentprof.replay.context.covering_standin`); what still passes one replica's KV pool is compacted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from agentprof.replay.serving.config import OVERFLOW_POLICIES, check_choice
from agentprof.replay.serving.sessions import SessionPlan

COMPACT_SOURCE = ("Claude Code auto-compaction measured on the bundled session 258c7280 "
                  "(traces/samples/claude-code; claude-opus-4-6, 200K window)")
TRIGGER_SHARE = 167_060 / 200_000
"""Context (prompt + reply of the last call) at which the recorded agent compacted, as a share of its window."""
SUMMARY_OUT = 3_326.0
"""Tokens the recorded summarizing call generated."""
POST_TOKENS = 33_957.0
"""Prompt of the first call after the recorded compaction."""
KEPT_TOKENS = 21_460.0
"""Of that prompt, the head still served from the cache (system prompt and tools)."""


@dataclass(frozen=True)
class Overflow:
    """The plan as the server sees it, and what the policy changed."""

    plan: SessionPlan
    source: np.ndarray  # per served call: the original plan call, -1 for an inserted summarizing call
    failed: np.ndarray  # per plan session: its task failed (reject, or too long even compacted)
    beyond: np.ndarray  # per plan session: had a call beyond the served window
    calls: int  # original calls beyond the served window
    compactions: int
    window_tokens: float
    window_basis: str

    def summary(self, policy: str) -> dict[str, object]:
        """``serving.beyond_context``: count, policy and sessions (plus what the count is measured against)."""
        return {"count": self.calls, "policy": policy, "sessions": int(self.beyond.sum()),
                "window_tokens": int(self.window_tokens), "window": self.window_basis,
                "compactions": self.compactions, "failed_sessions": int(self.failed.sum()),
                **({"compaction_source": COMPACT_SOURCE} if policy != "reject" else {})}


@dataclass(frozen=True)
class Sent:
    """The overflow step's output: the plan as the server sees it, its ``serving.beyond_context`` record and the KV
    the sessions keep between their calls (concurrency x their mean simulated prompt as sent)."""

    overflow: Overflow
    beyond_context: dict[str, object]
    kv_demand_tokens: float


def fit(plan: SessionPlan, context: float | None, pool_tokens: float, policy: str, concurrency: int) -> Sent:
    """The overflow step: ``plan`` as the client sends it to a model of ``context`` tokens whose replica holds
    ``pool_tokens`` of KV, calls beyond handled by ``policy`` (``stand-in``: the replay already picked a stand-in
    that covers the trace; what passes the pool is compacted)."""
    win, basis = served_window(context, pool_tokens)
    ov = apply(plan, win, basis, "compact" if policy == "stand-in" else policy)
    sim = ov.plan.simulated
    return Sent(ov, ov.summary(policy), concurrency * (float(ov.plan.input_tokens[sim].mean()) if sim.any() else 0.0))


def served_window(context: float | None, pool_tokens: float) -> tuple[float, str]:
    """The longest context one replica serves: the model's window or its KV pool, whichever is smaller."""
    ctx = float(context) if context else float("inf")
    if pool_tokens < ctx:
        return float(pool_tokens), "one replica's KV pool"
    return ctx, "the model's context window"


def shared_head(a: np.ndarray, b: np.ndarray) -> int:
    """Leading blocks two prompts share."""
    n = min(a.size, b.size)
    if not n:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def apply(plan: SessionPlan, window: float, basis: str, policy: str) -> Overflow:
    """``plan`` with every call beyond ``window`` handled by ``policy`` (see the module docstring); ``plan``
    itself when every call fits."""
    check_choice("overflow policy", policy, OVERFLOW_POLICIES)
    need = plan.input_tokens + plan.output_tokens
    over = need > window
    n_s = plan.n_sessions
    sess_of = np.repeat(np.arange(n_s), np.diff(plan.start))
    beyond = np.zeros(n_s, dtype=bool)
    beyond[sess_of[over]] = True
    trigger = TRIGGER_SHARE * window
    if policy != "reject":  # compaction also starts below the window, at the recorded agent's share of it
        touched = np.zeros(n_s, dtype=bool)
        touched[sess_of[need > trigger]] = True
    else:
        touched = beyond
    if not touched.any():
        return Overflow(plan, np.arange(plan.n_calls), np.zeros(n_s, dtype=bool), beyond, int(over.sum()), 0,
                        window, basis)
    bs = float(plan.block_size)
    offs = plan.node_offsets
    cols: dict[str, list] = {k: [] for k in ("src", "gap", "inp", "out", "ids")}
    start = [0]
    failed = np.zeros(n_s, dtype=bool)
    tail = plan.tail_s.copy()
    next_id = plan.n_nodes
    compactions = 0

    def add(src: int, gap: float, inp: float, out: float, ids: np.ndarray) -> None:
        cols["src"].append(src)
        cols["gap"].append(gap)
        cols["inp"].append(inp)
        cols["out"].append(out)
        cols["ids"].append(ids)

    after, after_gap = plan.waits_for()
    new_after: list[int] = []  # per served call: the served call whose reply it waits for (-1: none)
    new_gap: list[float] = []
    for s in range(n_s):
        calls = plan.calls_of(s)
        base = len(cols["src"])
        if not touched[s]:  # as recorded, side-by-side calls included
            for c in calls:
                add(c, float(plan.gap_s[c]), float(plan.input_tokens[c]), float(plan.output_tokens[c]),
                    plan.node_ids[offs[c]:offs[c + 1]])
                a = int(after[c])
                new_after.append(-1 if a < 0 else base + a - calls.start)
                new_gap.append(float(after_gap[c]))
            start.append(len(cols["src"]))
            continue
        first_ids = plan.node_ids[offs[calls.start]:offs[calls.start + 1]]
        removed = 0.0  # tokens the compactions so far took out of the recorded prompts
        epoch: np.ndarray | None = None  # the current compaction's new blocks (extended as the prompts grow)
        head = np.zeros(0, dtype=np.int64)
        prev: tuple[float, float, np.ndarray] | None = None  # the last served call: prompt, reply, blocks
        for c in calls:
            inp, out = float(plan.input_tokens[c]), float(plan.output_tokens[c])
            gap = float(plan.gap_s[c])
            ids = plan.node_ids[offs[c]:offs[c + 1]]
            if not np.isnan(plan.fixed_s[c]):  # not sent to the server (no token counts): kept as recorded
                add(c, gap, inp, out, ids)
                continue
            cur = inp - removed
            if policy == "reject":
                if inp + out > window:
                    failed[s] = True
                    tail[s] = 0.0
                    break
                add(c, gap, inp, out, ids)
                continue
            grown = (inp - float(plan.input_tokens[c - 1]) - float(plan.output_tokens[c - 1])
                     if c > calls.start else 0.0)
            new = POST_TOKENS + max(grown, 0.0)
            compact = cur + out > trigger and new < cur
            if (new if compact else cur) + out > window:  # too long even compacted: the session cannot go on
                failed[s] = True
                tail[s] = 0.0
                break
            if compact:  # the client compacts before sending this call
                if prev is not None:  # it summarizes the history, as much of it as the window leaves room for
                    read = min(prev[0] + prev[1], window - SUMMARY_OUT)
                    if read > 0:
                        add(-1, gap, read, SUMMARY_OUT, prev[2][:max(int(read // bs), 0)])
                        gap = 0.0
                removed = inp - new
                cur = new
                compactions += 1
                keep = min(shared_head(ids, first_ids), int(KEPT_TOKENS // bs))
                head = ids[:keep]
                epoch = None
            if removed:
                n_blocks = max(int(cur // bs), 0)
                fresh = max(n_blocks - head.size, 0)
                have = 0 if epoch is None else epoch.size
                if fresh > have:
                    more = np.arange(next_id, next_id + fresh - have, dtype=np.int64)
                    next_id += more.size
                    epoch = more if epoch is None else np.concatenate([epoch, more])
                ids = np.concatenate([head, epoch[:fresh]]) if epoch is not None else head[:n_blocks]
            add(c, gap, cur, out, ids)
            prev = (cur, out, ids)
        # a session the client compacts runs one call after another
        n_new = len(cols["src"]) - base
        new_after.extend(range(base - 1, base + n_new - 1))
        if n_new:
            new_after[base] = -1
        new_gap.extend(cols["gap"][base:])
        start.append(len(cols["src"]))
    src = np.array(cols["src"], dtype=np.int64)
    lengths = np.array([x.size for x in cols["ids"]], dtype=np.int64)
    node_offsets = np.zeros(src.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=node_offsets[1:])
    node_ids = np.concatenate(cols["ids"]).astype(np.int64) if cols["ids"] else np.zeros(0, dtype=np.int64)
    orig = np.maximum(src, 0)
    inserted = src < 0
    inp = np.array(cols["inp"])

    def pick(a: np.ndarray, fill: float) -> np.ndarray:
        return np.where(inserted, fill, a[orig]) if src.size else a[:0]

    reuse = np.minimum(pick(plan.reuse_tokens, 0.0), np.maximum(inp - 1.0, 0.0))
    reuse = np.where(inserted, np.maximum(inp - 1.0, 0.0), reuse)
    note = (f"{int(over.sum())} call(s) in {int(beyond.sum())} session(s) beyond the served window "
            f"({int(window):,} tokens, {basis}): --overflow {policy}")
    served = replace(
        plan, start=np.array(start, dtype=np.int64), tail_s=tail, gap_s=np.array(cols["gap"]),
        input_tokens=inp, output_tokens=np.array(cols["out"]),
        fixed_s=np.where(inserted, np.nan, plan.fixed_s[orig]) if src.size else plan.fixed_s[:0],
        node_offsets=node_offsets, node_ids=node_ids, n_nodes=int(next_id),
        span_ids=[plan.span_ids[i] if i >= 0 else "compaction" for i in src.tolist()],
        trace_ids=[plan.trace_ids[i] if i >= 0 else "" for i in src.tolist()],
        models=[plan.models[i if i >= 0 else int(src[j + 1])] for j, i in enumerate(src.tolist())],
        cache_read=pick(plan.cache_read, 0.0), cache_write=pick(plan.cache_write, 0.0), reuse_tokens=reuse,
        notes=[*plan.notes, note] if over.any() else list(plan.notes),
        after=np.array(new_after, dtype=np.int64) if plan.after is not None else None,
        after_gap_s=np.array(new_gap) if plan.after is not None else None)
    return Overflow(served, src, failed, beyond, int(over.sum()), compactions, window, basis)
