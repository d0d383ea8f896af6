"""Agent sessions as closed loops of their recorded model calls, ready for the serving simulation.

A session is one top-level conversation (sub-agent calls included) with its calls in recorded start order.
Each call is issued when the reply it waited for in the recording and the tools/waits after it are done: the
gap between them is kept as recorded (human waits capped at ``cap_wait`` seconds each when asked). That reply is
the latest one recorded before the call started, so calls a session ran side by side (parallel sub-agents) are
issued side by side, and counted. Each call carries its prompt's cache-block node ids (chained prefix keys, made
session-private under the ``session`` hash scope) so the shared cache can match prefixes across sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from agentprof.analysis.calls import CallBlocks, model_calls
from agentprof.errors import AgentprofError
from agentprof.trace.schema import Trace, has_token_counts
from agentprof.trace.waits import HUMAN_REASONS, LEGACY

HUMAN_WAITS = HUMAN_REASONS | {"think"}
"""Wait reasons ``--cap-wait`` caps (:mod:`agentprof.trace.waits`, old names read as new). ``think``
(kv-cache-tester) mixes tool time with human think time and is capped whole, as InferenceX AgentX caps idle
time on such traces."""
SCOPES = ("global", "session")


@dataclass
class SessionPlan:
    """Every replayable call of every session, flat, in session order (``start[s]:start[s+1]`` is session s)."""

    session_ids: list[str]
    start: np.ndarray  # int64, len(sessions) + 1
    head_s: np.ndarray  # per session: agent start -> first call issued
    tail_s: np.ndarray  # per session: last reply -> agent end
    recorded_s: np.ndarray  # per session: recorded wall time
    gap_s: np.ndarray  # per call: previous reply (or session start) -> issue; 0 for the first
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    fixed_s: np.ndarray  # per call: recorded duration for calls that are not simulated (NaN when simulated)
    node_offsets: np.ndarray  # per call, into node_ids
    node_ids: np.ndarray  # int64 dense ids of prompt blocks (prefix keys)
    block_size: int
    n_nodes: int
    span_ids: list[str]
    trace_ids: list[str]
    models: list[str | None]
    cache_read: np.ndarray
    cache_write: np.ndarray
    reuse_tokens: np.ndarray  # per call: leading prompt tokens an earlier call of its session had (unbounded)
    notes: list[str] = field(default_factory=list)
    after: np.ndarray | None = None
    """Per call: the call whose reply it waits for (a plan index in its session), or -1 for none (issued
    ``after_gap_s`` after the session's first call); None: each call waits for the one before it (``gap_s``)."""
    after_gap_s: np.ndarray | None = None
    """Per call, with ``after``: seconds from that reply (or from the session's first call) to its issue."""

    @property
    def n_sessions(self) -> int:
        return len(self.session_ids)

    @property
    def n_calls(self) -> int:
        return int(self.input_tokens.size)

    @property
    def simulated(self) -> np.ndarray:
        """Per call: True when the simulation (or a load test) sends it, i.e. it has token counts
        (:func:`agentprof.trace.schema.has_token_counts`); the others wait their recorded duration (``fixed_s``)."""
        return np.isnan(self.fixed_s)

    def calls_of(self, s: int) -> range:
        return range(int(self.start[s]), int(self.start[s + 1]))

    def waits_for(self) -> tuple[np.ndarray, np.ndarray]:
        """Per call: the call whose reply it waits for (-1: none) and the gap after it (:attr:`after`); each call
        after the one before it where the plan has no ``after``."""
        if self.after is not None and self.after_gap_s is not None:
            return self.after, self.after_gap_s
        after = np.arange(self.n_calls, dtype=np.int64) - 1
        after[self.start[:-1][np.diff(self.start) > 0]] = -1
        return after, self.gap_s


def _waits_for(conv: np.ndarray, t0: np.ndarray, t1: np.ndarray, run_end: np.ndarray, gap: np.ndarray,
               side: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per call (sorted by session, then start): the call whose reply it waited for in the recording (the latest
    reply before it started; -1 where none had come yet) and the seconds from that reply (or, for -1, from the
    session's first call) to its start. ``gap``: each call's seconds after the latest earlier reply (the session's
    running ``run_end``); ``side``: the calls that started before that reply, which wait for an earlier one."""
    idx = np.arange(t0.size, dtype=np.int64)
    latest = pl.DataFrame({"c": conv, "i": np.where(t1 == run_end, idx, -1)}).select(
        pl.when(pl.col("i") >= 0).then(pl.col("i")).forward_fill().over("c")).to_series().to_numpy()
    after = np.full(t0.size, -1, dtype=np.int64)
    after[1:] = latest[:-1]
    after[start[:-1]] = -1
    after_gap = gap.copy()
    s0 = np.repeat(start[:-1], np.diff(start))
    for j in np.flatnonzero(side).tolist():
        lo = int(s0[j])
        done = np.flatnonzero(t1[lo:j] <= t0[j])
        if done.size:
            i = lo + int(done[np.argmax(t1[lo:j][done])])
            after[j], after_gap[j] = i, (t0[j] - t1[i]) / 1e9
        else:
            after[j], after_gap[j] = -1, (t0[j] - t0[lo]) / 1e9
    return after, after_gap


def _wait_excess(spans: pl.DataFrame, cap_wait: float | None) -> pl.DataFrame:
    """Per human-wait span: its session and start, and the seconds above ``cap_wait`` (removed from the gap)."""
    empty = pl.DataFrame(schema={"session_id": pl.Utf8, "start_ns": pl.Int64, "excess_s": pl.Float64})
    if cap_wait is None:
        return empty
    w = spans.filter((pl.col("kind") == "wait") & pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    if not w.height:
        return empty
    reason = w.get_column("attributes").str.json_path_match("$['agentprof.wait.reason']").fill_null("user")
    reason = reason.replace(LEGACY)
    w = w.with_columns(reason.alias("_r")).filter(pl.col("_r").is_in(list(HUMAN_WAITS)))
    return w.select("session_id", "start_ns",
                    ((pl.col("end_ns") - pl.col("start_ns")) / 1e9 - cap_wait).clip(lower_bound=0.0).alias("excess_s"))


def dense_ids(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """``0..n-1`` ids of the distinct keys, in first-seen order (a hash join: ~4x faster than np.unique's sort)."""
    if not keys.size:
        return np.zeros(0, dtype=np.int64), 0
    uniq = pl.Series("k", keys).unique(maintain_order=True)
    table = pl.DataFrame({"k": uniq, "id": np.arange(uniq.len(), dtype=np.int64)})
    ids = pl.DataFrame({"k": keys}).join(table, on="k", how="left", maintain_order="left").get_column("id")
    return ids.to_numpy(), uniq.len()


def block_ids(keys: np.ndarray, offs: np.ndarray, conv: np.ndarray, first: np.ndarray,
              scope: str) -> tuple[np.ndarray, int, np.ndarray]:
    """Dense node ids of every prompt block, their count, and each call's leading blocks already seen earlier
    in its own session (the unbounded prefix reuse).

    Most of a call's blocks repeat its predecessor's leading blocks (found per call pair by a binary search
    over prefix keys); those copy their ids from it (one slice per call), and only the rest are hashed. Under the
    ``session`` scope a block's id is private to its session."""
    from agentprof.analysis.redundancy import common_prefix

    n = offs.size - 1
    total = int(offs[-1])
    if not total:
        return np.zeros(0, dtype=np.int64), 0, np.zeros(n, dtype=np.int64)
    lengths = np.diff(offs)
    prev = np.where(first, -1, np.arange(n, dtype=np.int64) - 1)
    cp = common_prefix(keys, offs, np.arange(n, dtype=np.int64), prev)
    mark = np.zeros(total + 1, dtype=np.int32)  # copied = inside [offs[i], offs[i] + cp[i]) of some call
    np.add.at(mark, offs[:-1], 1)
    np.add.at(mark, offs[:-1] + cp, -1)
    copied = np.cumsum(mark[:-1], dtype=np.int32).astype(bool)
    fresh = np.flatnonzero(~copied)
    sess_key = conv[np.searchsorted(offs, fresh, side="right") - 1] * np.int64(1 << 40)
    gid, n_g = dense_ids(keys[fresh])
    skey = sess_key + gid  # (session, block) as one integer: < 2**40 distinct blocks assumed
    sid, n_s = dense_ids(skey)
    seen_fresh = ~pl.Series(skey).is_first_distinct().to_numpy()
    ids_fresh, n_nodes = (sid, n_s) if scope == "session" else (gid, n_g)
    node = np.zeros(total, dtype=np.int64)
    node[fresh] = ids_fresh
    # copied blocks take their ids from the predecessor's same positions, call by call (slice copies)
    o = offs.tolist()
    for i, (c, pv) in enumerate(zip(cp.tolist(), prev.tolist(), strict=True)):
        if c:
            node[o[i]:o[i] + c] = node[o[pv]:o[pv] + c]
    seen = copied.copy()
    seen[fresh] = seen_fresh
    miss = np.flatnonzero(~seen)
    at = np.searchsorted(miss, offs[:-1])
    first_miss = np.where(at < miss.size, miss[np.minimum(at, max(miss.size - 1, 0))] if miss.size else total, total)
    reuse = np.minimum(first_miss - offs[:-1], lengths)
    return node, int(n_nodes), reuse


def known_starts(calls: pl.DataFrame) -> pl.Expr:
    """Each call's start as the simulation takes it, the same for every importer: the recorded start; where an
    importer could not tell it (a log that stamps only replies), its own end, so the unknown time before the reply
    stays in the gap as recorded (as the one-session replay keeps an unplaced call's time); with neither end, the
    latest instant known before it in its conversation, else the session's start. Never 0: a missing time filled
    with the epoch turns a session's wall time into a Unix timestamp."""
    prev = pl.coalesce("end_ns", "start_ns").shift(1).forward_fill().over("conversation_id")
    t0 = pl.coalesce(pl.col("start_ns"), pl.col("end_ns"), prev, pl.col("a0"))
    first_known = pl.coalesce("start_ns", "end_ns").drop_nulls().first().over("conversation_id")
    return pl.coalesce(t0, first_known, pl.lit(0, dtype=pl.Int64))


def build_plan(trace: Trace, cap_wait: float | None = None, scope: str = "global",
               keep: set[tuple[str, str]] | None = None) -> SessionPlan:
    """Sessions of ``trace`` as closed loops (see the module docstring). ``keep`` limits the calls simulated to
    these ``(trace_id, span_id)`` pairs (the rest keep their recorded duration as a delay)."""
    if scope not in SCOPES:
        raise AgentprofError(f"unknown hash scope {scope!r}: expected {' or '.join(SCOPES)}")
    if cap_wait is not None and cap_wait < 0:
        raise AgentprofError(f"--cap-wait must be at least 0 seconds, got {cap_wait}")
    cb: CallBlocks = model_calls(trace)
    calls = cb.calls.with_row_index("_cb")
    if not calls.height:
        raise AgentprofError("no model calls in the input: the serving simulation needs recorded model calls")
    inp = calls.get_column("input_tokens").cast(pl.Float64).fill_null(np.nan).to_numpy()
    out = calls.get_column("output_tokens").cast(pl.Float64).fill_null(np.nan).to_numpy()
    ok = calls.select(has_token_counts()).to_series().to_numpy()
    if keep is not None:
        pairs = list(zip(calls.get_column("trace_id").to_list(), calls.get_column("span_id").to_list(), strict=True))
        ok &= np.array([p in keep for p in pairs], dtype=bool)
    if not ok.any():
        raise AgentprofError("no model call has input and output token counts: the serving simulation needs "
                             "them (re-import with token usage, or capture through the SDKs)")
    spans = trace.spans
    agents = (spans.filter(pl.col("kind") == "agent").group_by("session_id")
              .agg(pl.col("start_ns").min().alias("a0"), pl.col("end_ns").max().alias("a1")))
    calls = calls.join(agents, left_on="conversation_id", right_on="session_id", how="left")
    calls = calls.with_columns(known_starts(calls).alias("_t0"))
    calls = calls.with_columns(pl.col("end_ns").fill_null(pl.col("_t0")))
    conv_order = calls.select("conversation_id").unique(maintain_order=True).with_row_index("_conv")
    calls = calls.join(conv_order, on="conversation_id", how="left").sort("_conv", "_t0", "_cb", maintain_order=True)
    order = calls.get_column("_cb").to_numpy().astype(np.int64)
    conv = calls.get_column("_conv").to_numpy().astype(np.int64)
    t0 = calls.get_column("_t0").to_numpy().astype(np.int64)
    t1 = np.maximum(calls.get_column("end_ns").to_numpy().astype(np.int64), t0)
    n = order.size
    bounds = np.flatnonzero(np.diff(conv)) + 1
    start = np.concatenate([[0], bounds, [n]]).astype(np.int64)
    first = np.zeros(n, dtype=bool)
    first[start[:-1]] = True
    prev_end = np.empty(n, dtype=np.int64)
    # the latest reply so far within the session
    run_end = pl.DataFrame({"c": conv, "e": t1}).select(pl.col("e").cum_max().over("c")).to_series().to_numpy()
    prev_end[1:] = run_end[:-1]
    gap = np.where(first, 0.0, (t0 - prev_end) / 1e9)
    side = (gap < 0) & ~first  # started before the latest earlier reply: a parallel branch
    overlapped = int(side.sum())
    gap = np.maximum(gap, 0.0)
    after, after_gap = _waits_for(conv, t0, t1, run_end, gap, side, start)
    a0 = calls.get_column("a0").fill_null(calls.get_column("_t0")).to_numpy().astype(np.int64)
    a1 = calls.get_column("a1").fill_null(calls.get_column("end_ns")).to_numpy().astype(np.int64)
    s_first, s_last = start[:-1], start[1:] - 1
    head = np.maximum((t0[s_first] - np.minimum(a0[s_first], t0[s_first])) / 1e9, 0.0)
    last_end = run_end[s_last]
    tail = np.maximum((np.maximum(a1[s_last], last_end) - last_end) / 1e9, 0.0)
    recorded = (np.maximum(a1[s_last], last_end) - np.minimum(a0[s_first], t0[s_first])) / 1e9
    # human waits above the cap come out of the gap that holds them
    ex = _wait_excess(spans, cap_wait)
    capped = 0.0
    if ex.height:
        sid = calls.get_column("conversation_id").to_list()
        conv_of = {s: int(c) for s, c in zip(sid, conv.tolist(), strict=True)}
        e_conv = np.array([conv_of.get(s, -1) for s in ex.get_column("session_id").to_list()], dtype=np.int64)
        e_t = ex.get_column("start_ns").to_numpy().astype(np.int64)
        e_x = ex.get_column("excess_s").to_numpy()
        sel = (e_conv >= 0) & (e_x > 0)
        if sel.any():
            # the call a wait precedes: the first call of its session starting at or after it
            e_conv, e_t, e_x = e_conv[sel], e_t[sel], e_x[sel]
            j = np.full(e_conv.size, -1, dtype=np.int64)
            for c in np.unique(e_conv).tolist():
                w = np.flatnonzero(e_conv == c)
                lo, hi = int(start[c]), int(start[c + 1])
                pos = lo + np.searchsorted(t0[lo:hi], e_t[w], side="left")
                j[w] = np.where(pos < hi, pos, -1)
            same = j >= 0
            into_gap = np.zeros(n)
            np.add.at(into_gap, j[same], e_x[same])
            tail_cut = np.zeros(start.size - 1)
            np.add.at(tail_cut, e_conv[~same], e_x[~same])
            head_cut = np.where(first, into_gap, 0.0)
            before = gap.copy()
            gap = np.maximum(gap - np.where(first, 0.0, into_gap), 0.0)
            new_head = np.maximum(head - head_cut[s_first], 0.0)
            new_tail = np.maximum(tail - tail_cut, 0.0)
            capped = float((before - gap).sum() + (head - new_head).sum() + (tail - new_tail).sum())
            # a call that waited for the latest reply has that gap as its own: capped the same
            after_gap = np.where(side, after_gap, gap)
            head, tail = new_head, new_tail
    # calls without token counts: their recorded duration becomes part of the following gap
    ok_o = ok[order]
    fixed = np.where(ok_o, np.nan, (t1 - t0) / 1e9)
    # prompt blocks: dense node ids of the prefix keys, session-private under the "session" scope
    keys = cb.prefix_keys()
    lengths = cb.lengths[order]
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offs[1:])
    if np.array_equal(order, np.arange(order.size)):
        k = keys
    else:
        src = np.repeat(cb.offsets[:-1][order] - offs[:-1], lengths) + np.arange(int(offs[-1]))
        k = keys[src] if keys.size else keys[:0]
    node, n_nodes, reuse_blocks = block_ids(k, offs, conv, first, scope)
    reuse = np.minimum(reuse_blocks * float(cb.block_size), np.maximum(np.nan_to_num(inp[order]) - 1.0, 0.0))
    notes: list[str] = []
    if overlapped:
        notes.append(f"{overlapped} call(s) overlapped an earlier call in the recording (parallel sub-agents): "
                     "the simulation issues them side by side, as recorded")
    if capped:
        notes.append(f"human waits capped at {cap_wait:g} s each: {capped / 3600:.2f} h of recorded waiting removed")
    if (~ok).any():
        notes.append(f"{int((~ok).sum())} call(s) lack token counts: they keep their recorded duration and do "
                     "not load the server")
    has = cb.calls.get_column("has_hashes").to_numpy()[order]
    if (~has & ok_o).any():
        notes.append(f"{int((~has & ok_o).sum())} call(s) have no prompt block hashes: they never hit the cache")
    sids = calls.get_column("conversation_id").to_list()
    return SessionPlan(
        session_ids=[sids[i] for i in start[:-1].tolist()], start=start, head_s=head, tail_s=tail,
        recorded_s=recorded, gap_s=gap, input_tokens=np.nan_to_num(inp[order]), output_tokens=np.nan_to_num(out[order]),
        fixed_s=fixed, node_offsets=offs, node_ids=node.astype(np.int64), block_size=cb.block_size, n_nodes=n_nodes,
        span_ids=calls.get_column("span_id").to_list(), trace_ids=calls.get_column("trace_id").to_list(),
        models=calls.get_column("model").to_list(),
        cache_read=calls.get_column("cache_read_tokens").cast(pl.Float64).fill_null(0.0).to_numpy(),
        cache_write=calls.get_column("cache_write_tokens").cast(pl.Float64).fill_null(0.0).to_numpy(),
        reuse_tokens=reuse, notes=notes, after=after if overlapped else None,
        after_gap_s=after_gap if overlapped else None)

