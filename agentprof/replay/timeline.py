"""Re-assemble a trace's sessions with replayed span durations, keeping the recorded structure.

Each session's wall time is cut along its recorded critical path: every instant belongs to the top-level span
covering it that ends last (sequential spans own their whole extent; when spans overlap, the one that
finishes later owns the overlap), or to the gaps no span covers (orchestration). Replay stretches or shrinks
each owned piece by its owner's factor (new/old duration) and keeps gaps as recorded; a model call's piece
during which other work ran alongside shrinks no further than that work (with model calls at zero this is
analyze's Amdahl bound). Nested spans change
their top-level ancestor by their own change; a sub-agent session changes the span that launched it (or, when
none did, stands as a top-level span of its parent session). Exact for sequential sessions; with parallel
work the recorded critical path is kept (a branch that becomes the longest only after replay is not
re-selected). Everything is numpy/polars over all spans and all systems at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from agentprof.analysis.timesplit import bucket_of

MODEL, ORCH, WAIT, TOOL = 0, 1, 2, 3
CATEGORIES = ("model", "orchestration", "wait", "tool")
NCAT = len(CATEGORIES)


@dataclass
class Layout:
    """The recorded structure, computed once per trace and shared by every replayed system."""

    n_spans: int
    category: np.ndarray        # per span: MODEL / ORCH / WAIT / TOOL (agent roots, parse: ORCH)
    old_dur: np.ndarray         # per span, seconds (0 when not placeable)
    excl_old: np.ndarray        # per span: duration minus its (host-tree) children's, clipped at 0
    host_parent: np.ndarray     # per span: parent within its host session's tree, -1 = top-level or excluded
    member: np.ndarray          # per span: is a top-level member of its host session
    host: np.ndarray            # per span: host session index (-1: a root session's agent span / unplaced)
    inside_model: np.ndarray    # per span: has a model-span ancestor (it keeps its own kind and change)
    depth: np.ndarray           # per span: depth in its host tree (0 = top-level member)
    root_of: np.ndarray         # per session: index of its root (agent) span, -1 when synthesized
    session_level: np.ndarray   # per session: nesting level (0 = top-level session)
    session_parent: np.ndarray  # per session: parent session index or -1
    old_e2e: np.ndarray         # per session: recorded wall time (s)
    fixed_s: np.ndarray         # per session: initial gap + uncovered gaps + tail (s)
    own_len: np.ndarray         # per member span: recorded critical-path time it owns (s)
    shadow: np.ndarray          # (spans, NCAT): of a model member's owned time, the part another member ran
                                # alongside, by that member's category (s)
    placed: np.ndarray          # per span: has both ends
    session_ids: list[str]
    top_level: np.ndarray       # per session: is a root session (no parent session)


def prepare(spans: pl.DataFrame) -> Layout:
    """Analyse the recorded structure of every session (once per trace)."""
    n = spans.height
    kind = spans.get_column("kind").to_numpy()
    start = spans.get_column("start_ns").to_numpy().astype("float64")
    end = spans.get_column("end_ns").to_numpy().astype("float64")
    placed = np.isfinite(start) & np.isfinite(end) & (end >= start)
    start = np.where(placed, start, 0.0)
    end = np.where(placed, end, 0.0)
    sess_codes, sess_ids = _codes(spans.get_column("session_id"))
    n_sess = len(sess_ids)
    ids = spans.select("trace_id", "span_id").with_row_index("_row")
    parent = (spans.select("trace_id", pl.col("parent_id").alias("span_id"))
              .join(ids, on=["trace_id", "span_id"], how="left", maintain_order="left")
              .get_column("_row").fill_null(-1).to_numpy().astype(np.int64))
    # analyze's buckets (parse folded into orchestration here); each span owns its exclusive time
    bucket = {"model": MODEL, "wait": WAIT, "tool": TOOL, "parse": ORCH, "orchestration": ORCH}
    category = np.array([bucket[bucket_of(k)] for k in kind.tolist()], dtype=np.int64)

    # sessions: root span (earliest agent span), parent session, extent
    root_of = np.full(n_sess, -1, dtype=np.int64)
    for i in np.flatnonzero((kind == "agent") & placed):
        s = sess_codes[i]
        r = root_of[s]
        if r < 0 or start[i] < start[r] or (start[i] == start[r] and end[i] > end[r]):
            root_of[s] = i
    psess = spans.get_column("parent_session_id").to_list()
    code_of = {sid: k for k, sid in enumerate(sess_ids)}
    session_parent = np.full(n_sess, -1, dtype=np.int64)
    for i, p in enumerate(psess):
        if p is not None and p in code_of and code_of[p] != sess_codes[i]:
            session_parent[sess_codes[i]] = code_of[p]
    for s in range(n_sess):  # a root whose parent span lives in another session also links the sessions
        r = root_of[s]
        if session_parent[s] < 0 and r >= 0 and parent[r] >= 0 and sess_codes[parent[r]] != s:
            session_parent[s] = sess_codes[parent[r]]
    session_level = np.zeros(n_sess, dtype=np.int64)
    for s in range(n_sess):
        lv, cur, seen = 0, s, {s}
        while session_parent[cur] >= 0 and session_parent[cur] not in seen:
            cur = int(session_parent[cur])
            seen.add(cur)
            lv += 1
        session_level[s] = lv

    # host session and host-tree parent of every span
    is_root = np.zeros(n, dtype=bool)
    is_root[root_of[root_of >= 0]] = True
    host = np.where(is_root, -1, sess_codes).astype(np.int64)
    for s in range(n_sess):
        r = root_of[s]
        if r >= 0 and session_parent[s] >= 0:
            host[r] = session_parent[s]
    host = np.where(placed, host, -1)
    host_parent = np.full(n, -1, dtype=np.int64)
    ok = (host >= 0) & (parent >= 0)
    pp = np.where(ok, parent, 0)
    nested = ok & ~is_root[pp] & (sess_codes[pp] == host) & (host[pp] == host) & placed[pp]
    host_parent[nested] = parent[nested]
    member = (host >= 0) & (host_parent < 0)

    # depth in host trees, and whether an ancestor is a model call
    depth = np.zeros(n, dtype=np.int64)
    inside_model = np.zeros(n, dtype=bool)
    cur = host_parent.copy()
    for _ in range(64):
        active = cur >= 0
        if not active.any():
            break
        depth[active] += 1
        inside_model[active] |= category[cur[active]] == MODEL
        cur[active] = host_parent[cur[active]]
    old_dur = np.where(placed, (end - start) / 1e9, 0.0)
    child_sum = np.bincount(host_parent[host_parent >= 0], weights=old_dur[host_parent >= 0], minlength=n)
    excl_old = np.maximum(old_dur - child_sum, 0.0)

    # per session: extent, and the critical-path ownership of its top-level members (old timeline)
    own = np.flatnonzero(placed)
    df_ext = (pl.DataFrame({"s": sess_codes[own], "a": start[own], "b": end[own]})
              .group_by("s").agg(pl.col("a").min(), pl.col("b").max()))
    s_start = np.zeros(n_sess)
    s_end = np.zeros(n_sess)
    s_start[df_ext.get_column("s").to_numpy()] = df_ext.get_column("a").to_numpy()
    s_end[df_ext.get_column("s").to_numpy()] = df_ext.get_column("b").to_numpy()
    has_root = root_of >= 0
    s_start[has_root] = start[root_of[has_root]]
    s_end[has_root] = end[root_of[has_root]]
    mem = np.flatnonzero(member)
    ms = np.clip(start[mem], s_start[host[mem]], s_end[host[mem]])
    me = np.clip(end[mem], s_start[host[mem]], s_end[host[mem]])
    df = pl.DataFrame({"i": mem, "h": host[mem], "s": ms, "e": me}).sort("h", "s", "e")
    df = df.with_columns(pl.col("e").cum_max().over("h").alias("c"))
    df = df.with_columns(
        pl.col("c").shift(1).over("h").alias("c_prev"),
        pl.col("s").shift(-1).over("h").alias("s_next"))
    df = df.with_columns(
        pl.when(pl.col("c_prev").is_null() | (pl.col("e") > pl.col("c_prev"))).then(pl.col("i"))
        .otherwise(None).forward_fill().over("h").alias("owner"))
    h = df.get_column("h").to_numpy()
    s_ = df.get_column("s").to_numpy()
    c = df.get_column("c").to_numpy()
    s_next = df.get_column("s_next").fill_null(np.nan).to_numpy()
    s_next = np.where(np.isnan(s_next), s_end[h], s_next)
    owned = np.maximum(np.minimum(s_next, c) - s_, 0.0) / 1e9
    gaps = np.maximum(s_next - np.maximum(c, s_), 0.0) / 1e9
    owner = df.get_column("owner").to_numpy()
    own_len = np.zeros(n)
    np.add.at(own_len, owner, owned)
    shadow = _shadow(df, s_next, owned, category, n)
    first = df.group_by("h", maintain_order=True).agg(pl.col("s").first())
    fixed_s = np.bincount(h, weights=gaps, minlength=n_sess)
    init = np.zeros(n_sess)
    init[first.get_column("h").to_numpy()] = (first.get_column("s").to_numpy()
                                              - s_start[first.get_column("h").to_numpy()]) / 1e9
    empty = np.ones(n_sess, dtype=bool)
    empty[h] = False
    fixed_s = fixed_s + init + np.where(empty, (s_end - s_start) / 1e9, 0.0)
    old_e2e = (s_end - s_start) / 1e9
    return Layout(n, category, old_dur, excl_old, host_parent, member, host, inside_model, depth, root_of,
                  session_level, session_parent, old_e2e, fixed_s, own_len, shadow, placed, sess_ids,
                  session_parent < 0)


def _shadow(df: pl.DataFrame, s_next: np.ndarray, owned: np.ndarray, category: np.ndarray, n: int) -> np.ndarray:
    """Of each model member's owned pieces, the time another member was still running (the latest-ending other
    one, by its category): a faster model call cannot shorten it, the other work goes on (as analyze's Amdahl
    bound keeps time when a tool ran alongside). Rows in ``prepare``'s sweep order; only sessions where members
    overlap are walked."""
    out = np.zeros((n, NCAT))
    c_prev = df.get_column("c_prev").fill_null(np.inf).to_numpy()
    s_ = df.get_column("s").to_numpy()
    h = df.get_column("h").to_numpy()
    hosts = np.unique(h[s_ < c_prev])
    if not hosts.size:
        return out
    rows = np.flatnonzero(np.isin(h, hosts))
    idx = df.get_column("i").to_numpy()
    e = df.get_column("e").to_numpy()
    owner = df.get_column("owner").to_numpy()
    last_h, top, second = -1, (-np.inf, -1), (-np.inf, -1)
    for r in rows.tolist():
        if h[r] != last_h:
            last_h, top, second = h[r], (-np.inf, -1), (-np.inf, -1)
        if e[r] > top[0]:
            top, second = (e[r], idx[r]), top
        elif e[r] > second[0]:
            second = (e[r], idx[r])
        o = owner[r]
        if owned[r] <= 0 or second[1] < 0 or category[o] != MODEL or second[0] <= s_[r]:
            continue
        out[o, category[second[1]]] += min(owned[r], (second[0] - s_[r]) / 1e9)
    return out


def _codes(col: pl.Series) -> tuple[np.ndarray, list[str]]:
    ids = col.unique(maintain_order=True).to_list()
    code = {s: i for i, s in enumerate(ids)}
    return np.array([code[s] for s in col.to_list()], dtype=np.int64), ids


@dataclass
class Assembled:
    """Per session and system: replayed wall time and its critical-path split into categories."""

    e2e: np.ndarray         # (sessions, systems)
    by_category: np.ndarray  # (sessions, systems, NCAT)


def assemble(lay: Layout, own_new: np.ndarray, model_new: np.ndarray,
             fixed_new: np.ndarray | None = None) -> Assembled:
    """Replayed session times for several systems at once.

    ``own_new`` (spans × systems): each span's new exclusive time (CPU-scaled orchestration; waits and
    unchanged spans = ``excl_old``); ``model_new`` (spans × systems): a model span's new own time, its nested
    spans (a subprocess the SDK spawned) apart, as :func:`agentprof.analysis.timesplit.bucket_of` splits it
    (ignored for other spans); ``fixed_new`` (sessions × systems, optional): each session's new gap time
    (default: the recorded ``fixed_s``). Sessions are processed from the deepest sub-agent level up."""
    n, k = own_new.shape
    n_sess = lay.old_e2e.size
    e2e = np.zeros((n_sess, k))
    cats = np.zeros((n_sess, k, NCAT))
    is_model = lay.category == MODEL
    dead = ~lay.placed
    # each span's own change; rolled up into its ancestors below (in place, deepest first)
    # (systems, spans) layout: every per-system pass below reads contiguous memory
    delta = np.where(is_model[None, :], model_new.T, own_new.T) - lay.excl_old[None, :]
    delta[:, dead] = 0.0
    # new time by category is carried only for spans whose subtree can mix categories
    nested = lay.host_parent >= 0
    child_root = np.zeros(n, dtype=bool)
    roots = lay.root_of
    has_root = roots >= 0
    child_root[roots[has_root]] = lay.host[roots[has_root]] >= 0
    tracked = nested | child_root
    tracked[lay.host_parent[nested]] = True
    t_idx = np.flatnonzero(tracked)
    pos = np.full(n, -1, dtype=np.int64)
    pos[t_idx] = np.arange(t_idx.size)
    amount = np.where(is_model[t_idx, None], model_new[t_idx], own_new[t_idx])
    amount[dead[t_idx]] = 0.0
    cat_t = np.zeros((t_idx.size, k, NCAT))
    cat_t[np.arange(t_idx.size), :, lay.category[t_idx]] = amount
    for level in sorted(set(lay.session_level.tolist()), reverse=True):
        sess = np.flatnonzero(lay.session_level == level)
        in_level = np.isin(lay.host, sess)
        for d in range(int(lay.depth[in_level].max(initial=0)), 0, -1):
            nodes = np.flatnonzero(in_level & (lay.depth == d))
            par = lay.host_parent[nodes]
            for j in range(k):
                delta[j] += np.bincount(par, weights=delta[j, nodes], minlength=n)
            pn, pp = pos[nodes], pos[par]
            for j in range(k):
                for c in range(NCAT):
                    cat_t[:, j, c] += np.bincount(pp, weights=cat_t[pn, j, c], minlength=t_idx.size)
        mem = np.flatnonzero(in_level & lay.member)
        old = lay.old_dur[mem]
        new = np.maximum(old[None, :] + delta[:, mem], 0.0)
        safe = np.where(old > 0, old, 1.0)[None, :]
        rate = np.where(old[None, :] > 0, new / safe, 1.0)
        contrib = lay.own_len[mem][None, :] * rate  # (systems, members)
        h = lay.host[mem]
        plain = pos[mem] < 0
        sels = [np.flatnonzero(plain & (lay.category[mem] == c)) for c in range(NCAT)]
        for j in range(k):
            e2e[:, j] += np.bincount(h, weights=contrib[j], minlength=n_sess)
            for c in range(NCAT):
                cats[:, j, c] += np.bincount(h[sels[c]], weights=contrib[j, sels[c]], minlength=n_sess)
        mixed = np.flatnonzero(~plain)
        if mixed.size:
            share = cat_t[pos[mem[mixed]]]  # (m, k, NCAT)
            tot = share.sum(axis=2, keepdims=True)
            onehot = np.eye(NCAT)[lay.category[mem[mixed]]][:, None, :]
            share = np.where(tot > 0, share / np.where(tot > 0, tot, 1.0), onehot)
            for j in range(k):
                for c in range(NCAT):
                    cats[:, j, c] += np.bincount(h[mixed], weights=contrib[j, mixed] * share[:, j, c],
                                                 minlength=n_sess)
        shaded = np.flatnonzero(lay.shadow[mem].sum(axis=1) > 0)
        if shaded.size:  # a model member sped up: the work that ran alongside it still takes its time
            for j in range(k):
                extra = lay.shadow[mem[shaded]] * np.maximum(1.0 - rate[j, shaded], 0.0)[:, None]
                e2e[:, j] += np.bincount(h[shaded], weights=extra.sum(axis=1), minlength=n_sess)
                for c in range(NCAT):
                    cats[:, j, c] += np.bincount(h[shaded], weights=extra[:, c], minlength=n_sess)
        fixed = lay.fixed_s[sess][:, None] if fixed_new is None else fixed_new[sess]
        e2e[sess] += fixed
        cats[sess, :, ORCH] += fixed
        # hand each finished sub-agent session's change to its root span in the parent session
        for s in sess:
            r = roots[s]
            if r >= 0 and lay.host[r] >= 0:
                delta[:, r] = e2e[s] - lay.old_e2e[s]
                cat_t[pos[r]] = cats[s]
    return Assembled(e2e, cats)
