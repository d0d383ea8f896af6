"""Model calls in analysis order, with their prompt block hashes as flat numpy arrays.

Every analysis of prompts works on one :class:`CallBlocks`: the model-call rows sorted by conversation, session
and start time (call index 0, 1, … within a session), plus the concatenated block hashes (``ids``) and the
``offsets`` where each call's hashes begin. Keeping the hashes flat lets redundancy, hit rates and the cache
simulator run as numpy/polars array operations instead of per-block Python loops.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from agentprof import semconv as sc
from agentprof.trace.schema import Trace

CHAINED_SCHEMES = frozenset({"", "agentprof", "xxh3", "xxh3-chained", "xxh3_64-chained"})
"""Hash schemes whose i-th hash already identifies the whole prefix through block i (agentprof's own)."""


def is_chained(scheme: object) -> bool:
    """Whether a trace's ``hash_scheme`` chains its hashes; a mix or an unknown one does not (its ids are chained
    again, which never claims a prefix the ids do not show)."""
    return str(scheme or "") in CHAINED_SCHEMES


@dataclass
class CallBlocks:
    """Model calls (``calls``, one row each, analysis order) and their block hashes as flat arrays."""

    calls: pl.DataFrame
    ids: np.ndarray  # int64, every call's block hashes, concatenated in call order
    offsets: np.ndarray  # int64, len(calls) + 1: call i owns ids[offsets[i]:offsets[i + 1]]
    block_size: int
    scheme: str
    _keys: np.ndarray | None = field(default=None, repr=False)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def chained(self) -> bool:
        return is_chained(self.scheme)

    def call_of_block(self) -> np.ndarray:
        """For every entry of ``ids``, the row number of the call it belongs to."""
        return np.repeat(np.arange(self.calls.height, dtype=np.int64), self.lengths)

    def position_of_block(self) -> np.ndarray:
        """For every entry of ``ids``, its block position within its call's prompt."""
        return positions(self.offsets)

    def prefix_keys(self) -> np.ndarray:
        """Keys that identify the whole prompt prefix through each block (see :func:`rechain`); computed once."""
        if self._keys is None:
            keys = self.ids if self.chained else rechain(self.ids, self.offsets)
            keys.flags.writeable = False
            self._keys = keys
        return self._keys


CONTINUATION_ROLES = frozenset({"compaction", "continuation", "segment"})
"""Session roles that continue their parent's conversation line (e.g. the prompt after a compaction)."""


_SESSIONS: dict[int, tuple[weakref.ref, pl.DataFrame]] = {}


def session_table(spans: pl.DataFrame) -> pl.DataFrame:
    """One row per session: parent, role, conversation line and top-level conversation (built once per span
    table: the analysis, replay, timeline and exports of one report ask for it; see :func:`_session_table`)."""
    key = id(spans)
    hit = _SESSIONS.get(key)
    if hit is not None and hit[0]() is spans:
        return hit[1].clone()
    table = _session_table(spans)
    _SESSIONS[key] = (weakref.ref(spans, lambda _r, k=key: _SESSIONS.pop(k, None)), table)
    return table.clone()


def _session_table(spans: pl.DataFrame) -> pl.DataFrame:
    """One row per session: parent, role, conversation line and top-level conversation.

    - ``conversation_id``: the root of the ``parent_session_id`` chain (used to nest sub-sessions in time);
    - ``line_id``: the session whose prompts this one continues: a compaction segment continues its parent's
      line, any other session starts its own. "Previous call" always means the previous call of the line;
    - ``primary``: the line is not a sub-agent's (kv-cache-tester counts only these "parent" requests).
      Roles come from ``agentprof.session.role`` on the agent span; a session with a parent and no role
      counts as a sub-agent.
    """
    agents = spans.filter(pl.col("kind") == "agent")
    sess = (spans.select("session_id", "parent_session_id", "trace_id")  # not the hash lists
            .group_by("session_id", maintain_order=True)
            .agg(pl.col("parent_session_id").drop_nulls().first(), pl.col("trace_id").first()))
    parent = dict(zip(sess.get_column("session_id").to_list(), sess.get_column("parent_session_id").to_list(),
                      strict=True))
    parent = {k: (v if v in parent and v != k else None) for k, v in parent.items()}
    roles: dict[str, str] = {}
    for sid, attrs in agents.select("session_id", "attributes").iter_rows():
        if attrs and sc.SESSION_ROLE in attrs:
            try:
                role = json.loads(attrs).get(sc.SESSION_ROLE)
            except ValueError:
                role = None
            if isinstance(role, str):
                roles.setdefault(sid, role)
    for sid, p in parent.items():
        roles.setdefault(sid, "main" if p is None else "subagent")

    def root(sid: str, step) -> str:
        seen = {sid}
        cur = sid
        while (nxt := step(cur)) is not None and nxt not in seen:
            cur = nxt
            seen.add(cur)
        return cur

    conv = {s: root(s, parent.get) for s in parent}
    line = {s: root(s, lambda c: parent[c] if roles[c] in CONTINUATION_ROLES else None) for s in parent}
    ids = list(parent)
    return pl.DataFrame({
        "session_id": ids,
        "parent_session_id": [parent[s] for s in ids],
        "conversation_id": [conv[s] for s in ids],
        "line_id": [line[s] for s in ids],
        "role": [roles[s] for s in ids],
        "primary": [roles[line[s]] != "subagent" for s in ids],
        "is_top_level": [parent[s] is None for s in ids],
        "trace_id": sess.get_column("trace_id").to_list(),
    }, schema={"session_id": pl.Utf8, "parent_session_id": pl.Utf8, "conversation_id": pl.Utf8,
               "line_id": pl.Utf8, "role": pl.Utf8, "primary": pl.Boolean, "is_top_level": pl.Boolean,
               "trace_id": pl.Utf8})


_MEMO: dict[tuple[int, int, str], tuple[weakref.ref, CallBlocks]] = {}


def model_calls(trace: Trace, sessions: pl.DataFrame | None = None) -> CallBlocks:
    """The trace's model calls in analysis order with their block hashes flattened (``sessions``, if given,
    is ``session_table(trace.spans)``).

    Built once per span table: analysis, replay and the cache sweeps of one report share it (its arrays are
    read-only; its prefix keys are computed on first use).


    Order: conversation lines in order of first appearance, calls by start time (a missing start takes the
    previous call's), ties in file order; kv-cache-tester traces keep their file order (the tool walks the
    requests as listed, also where their ``t`` is not sorted); ``call_index`` counts within the session,
    ``line_index`` within the line. ``prompt_tokens`` is the token count the hashes describe
    (``prompt_tokens_hashed``; else full blocks × block size; else the provider's ``input_tokens``).
    """
    spans = trace.spans
    bs = int(trace.meta.block_size or 64)
    scheme = str(trace.meta.extra.get("hash_scheme") or "")
    key = (id(spans), bs, scheme)
    hit = _MEMO.get(key)
    if hit is not None and hit[0]() is spans:
        return hit[1]
    cb = _model_calls(spans, sessions, bs, scheme)
    cb.ids.flags.writeable = False
    cb.offsets.flags.writeable = False
    _MEMO[key] = (weakref.ref(spans, lambda _r, k=key: _MEMO.pop(k, None)), cb)
    return cb


def _model_calls(spans: pl.DataFrame, sessions: pl.DataFrame | None, bs: int, scheme: str) -> CallBlocks:
    if sessions is None:
        sessions = session_table(spans)
    line_order = (sessions.select("line_id").unique(maintain_order=True)
                  .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("_line_order")))
    # order the calls on light columns only; the (large) hash lists are gathered once, at the end
    light = [c for c in spans.columns if c not in ("block_hashes", "segments")]
    m = (spans.select(light).with_row_index("_row")
         .with_columns(spans.get_column("block_hashes").list.len().alias("_n_blocks"))
         .filter(pl.col("kind") == "model")
         .join(sessions.select("session_id", "conversation_id", "line_id", "primary", "is_top_level", "role"),
               on="session_id", how="left")
         .join(line_order, on="line_id", how="left")
         .with_columns(pl.col("start_ns").forward_fill().over("session_id").alias("_t")))
    m = m.sort("_line_order", "_row") if scheme == "kv-cache-tester" else \
        m.sort("_line_order", "_t", "_row", nulls_last=False)
    rows = m.get_column("_row").cast(pl.Int64).to_numpy()
    prompt = (pl.when(pl.col("prompt_tokens_hashed").is_not_null()).then(pl.col("prompt_tokens_hashed"))
              .when(pl.col("has_hashes")).then(pl.col("n_blocks") * bs)
              .otherwise(pl.col("input_tokens")))
    m = (m.with_columns(pl.col("_n_blocks").is_not_null().alias("has_hashes"),
                        pl.col("_n_blocks").fill_null(0).cast(pl.Int64).alias("n_blocks"))
         .with_columns(prompt.alias("prompt_tokens"),
                       pl.int_range(pl.len(), dtype=pl.Int64).over("session_id").alias("call_index"),
                       pl.int_range(pl.len(), dtype=pl.Int64).over("line_id").alias("line_index")))
    hashes = spans.get_column("block_hashes")
    segments = spans.get_column("segments")
    if not (rows.size == spans.height and np.array_equal(rows, np.arange(rows.size))):
        hashes = hashes.gather(rows)
        segments = segments.gather(rows)
    ids = hashes.list.explode(empty_as_null=False, keep_nulls=False).to_numpy()
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    lengths = m.get_column("n_blocks").to_numpy()
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    calls = m.select(
        "session_id", "conversation_id", "line_id", "primary", "is_top_level", "role", "trace_id", "span_id",
        "call_index", "line_index",
        "start_ns", "end_ns", "timing", "provider", "model", "input_tokens", "cache_read_tokens",
        "cache_write_tokens", "output_tokens", "ttft_s", "stream", "status", "prompt_tokens", "n_blocks",
        "has_hashes", "attributes",
    ).with_columns(segments.alias("segments"))
    return CallBlocks(calls, ids, offsets, bs, scheme)


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on uint64 arrays (a bijection that spreads every input bit); returns a new array."""
    x = np.array(x, dtype=np.uint64, copy=True)
    tmp = np.empty_like(x)
    with np.errstate(over="ignore"):
        for shift, mul in ((30, _M1), (27, _M2), (31, None)):
            np.right_shift(x, np.uint64(shift), out=tmp)
            np.bitwise_xor(x, tmp, out=x)
            if mul is not None:
                np.multiply(x, mul, out=x)
    return x


def positions(offsets: np.ndarray) -> np.ndarray:
    """For every block of the flat array, its position within its call (0, 1, … restarting per call)."""
    lengths = np.diff(offsets)
    n = int(offsets[-1])
    pos = np.ones(n, dtype=np.int64)
    if n == 0:
        return pos
    starts = offsets[:-1][lengths > 0]
    prev_len = np.diff(np.concatenate([[0], starts]))  # distance from the previous non-empty call's start
    pos[starts] = 1 - prev_len
    pos[0] = 0
    np.cumsum(pos, out=pos)
    return pos


def _weights(n: int) -> np.ndarray:
    """Fixed pseudo-random odd 64-bit weight per block position (the same in every run)."""
    return mix64(np.arange(1, n + 1, dtype=np.uint64) * _GOLD) | np.uint64(1)


_CHUNK = 1 << 20  # blocks per slice: temporaries stay small and are reused (fresh large arrays cost page faults)


def _arange_into(buf: np.ndarray, start: int) -> np.ndarray:
    """``buf[:] = start, start + 1, …`` without allocating."""
    buf[0] = start
    buf[1:] = 1
    np.cumsum(buf, out=buf)
    return buf


def rechain(ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Prefix keys for block ids that identify only one block's content (e.g. kv-cache-tester ``hash_ids``).

    ``key_j = Σ_{i≤j} (id_i XOR c) · w_i  (mod 2^64)`` with fixed pseudo-random odd weights ``w_i`` per
    position: a random linear hash of the id sequence through block ``j``, so equal keys mean equal prefixes
    up to 64-bit hash collisions (as for every hash in agentprof). Slice by slice the weighted ids are formed,
    then one cumulative sum (restarted at every call) gives every call's keys: no per-block Python work.
    """
    n = ids.size
    if n == 0:
        return ids.astype(np.int64)
    lengths = np.diff(offsets)
    w = _weights(int(lengths.max()))
    keys = np.empty(n, dtype=np.uint64)
    src = ids.view(np.uint64)
    nz = lengths > 0
    starts = offsets[:-1][nz]
    size = min(n, _CHUNK)
    own_buf = np.empty(size, dtype=np.int64)
    idx_buf = np.empty(size, dtype=np.int64)
    tmp_buf = np.empty(size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for a in range(0, n, _CHUNK):
            b = min(n, a + _CHUNK)
            m = b - a
            own, idx, tmp = own_buf[:m], idx_buf[:m], tmp_buf[:m]
            # start index of the call owning each block of the slice, then the block's position in its call
            first = starts[np.searchsorted(starts, a, side="right") - 1]
            own.fill(0)
            inside = starts[(starts > a) & (starts < b)]
            own[0] = first
            own[inside - a] = inside
            np.maximum.accumulate(own, out=own)
            np.subtract(_arange_into(idx, a), own, out=own)
            out = keys[a:b]
            np.take(w, own, out=out, mode="clip")  # 'raise' mode would buffer the output
            np.bitwise_xor(src[a:b], _GOLD, out=tmp)
            np.multiply(out, tmp, out=out)
        # restart the running sum at every call: its first block subtracts the previous call's total
        totals = np.add.reduceat(keys, starts)
        keys[starts[1:]] -= totals[:-1]
        np.cumsum(keys, out=keys)
    return keys.view(np.int64)
