"""Where a session's time went: wall time split along its critical path, and the Amdahl bound.

Definitions (also in ``docs/ANALYSIS.md``):

- **Critical path**: walking back from the end of the agent span, the child that finishes last (among those
  started before the cursor) is on the path for the part of it before the cursor; the walk then continues
  from that child's start, and recurses into the child's own children the same way. Time on the path not
  covered by any child is the parent's own time. Concurrent children therefore count once (the one that
  determined when the parent could go on), never summed.
- **Split**: every instant of the wall time is attributed to the kind of the span that owns it on the
  critical path: ``model`` (split into TTFT/prefill and decode for streamed calls with a TTFT), ``tool``,
  ``parse``, ``wait`` (by ``agentprof.wait.reason``) and ``orchestration`` (explicit orchestration spans plus
  agent time not covered by any child, "glue"). The buckets sum to ``wall_s``.
- ``critical_path_s``: the part of the critical path spent inside recorded child spans (wall minus the
  session's own uncovered glue time, ``glue_s``); ``span_sum_s`` is the plain sum of those spans' durations,
  larger than the critical path when work ran in parallel. ``startup_s``: the glue before the first span.
- ``amdahl_bound_s``: the task time if model calls took zero time: wall minus the time when model calls were
  the only thing running (time when a tool, parse, wait or glue ran alongside stays).
- ``agent_active_s``: wall minus the waits that are nobody's work on the task (``user_turn``, ``approval``,
  ``idle``, ``unrecorded``: :data:`agentprof.trace.waits.HUMAN_REASONS`); ``amdahl_bound_active_s`` the Amdahl bound on that
  clock. In imported traces, agent time no span covers is ``residue`` up to
  :data:`~agentprof.trace.waits.RESIDUE_MAX_S` and ``idle`` from :data:`~agentprof.trace.waits.IDLE_GAP_S`
  (the log shows nothing there), orchestration in between.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl

from agentprof import semconv as sc
from agentprof.analysis import intervals as iv
from agentprof.trace import waits

NS = 1e9
BUCKETS = ("model", "tool", "parse", "orchestration", "wait")
_PRIORITY = {"model": 0, "tool": 1, "parse": 2, "wait": 3, "orchestration": 4, "agent": 5, "root": 6}
UNRECORDED = waits.UNRECORDED  # wait reason for time between the sessions of one conversation
_RESIDUE_NS = int(waits.RESIDUE_MAX_S * 1e9)
_IDLE_NS = int(waits.IDLE_GAP_S * 1e9)


def bucket_of(kind: str) -> str:
    """The bucket a span's own time counts in: its kind (``model``, ``tool``, ``parse``, ``wait``), else
    ``orchestration`` (orchestration spans, and agent time no child covers). The one classification analyze and
    replay share: a span owns its extent minus its children's, whatever its parent is, so a process spawned
    inside a model call is tool time there, never model time."""
    return kind if kind in ("model", "tool", "parse", "wait") else "orchestration"


@dataclass
class Node:
    """One timed span in a session (or conversation) tree."""

    idx: int
    kind: str
    start: int
    end: int
    ttft_ns: int | None = None
    reason: str | None = None
    children: list[Node] = field(default_factory=list)


@dataclass
class TimeSplit:
    """Seconds per bucket for one session or conversation (buckets sum to ``wall_s``)."""

    wall_s: float = 0.0
    model_s: float = 0.0
    model_ttft_s: float = 0.0
    model_decode_s: float = 0.0
    tool_s: float = 0.0
    parse_s: float = 0.0
    orchestration_s: float = 0.0
    wait_s: float = 0.0
    glue_s: float = 0.0
    startup_s: float = 0.0
    """The part of ``glue_s`` before the session's first span (under ``agentprof run`` the interpreter's start,
    imports and clients; in a profiled function whatever it ran first), 0 for imported logs."""
    critical_path_s: float = 0.0
    span_sum_s: float = 0.0
    amdahl_bound_s: float = 0.0
    agent_active_s: float = 0.0
    amdahl_bound_active_s: float = 0.0
    wait_by_reason: dict[str, float] = field(default_factory=dict)
    timed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def human_wait_s(self) -> float:
        """Waits that are not the agent's work (user turns, approvals, idle gaps)."""
        return sum(v for r, v in self.wait_by_reason.items() if r in waits.HUMAN_REASONS)

    def shares(self) -> dict[str, dict[str, float | None]]:
        """Each bucket's share of the wall time and of the agent-active time (human waits left out of the
        latter), and the speed-up bound model calls allow on each clock: the one computation every report
        shows."""
        agent_wait = self.wait_s - self.human_wait_s
        parts = {"model": self.model_s, "tool": self.tool_s, "parse": self.parse_s,
                 "orchestration": self.orchestration_s}

        def share(x: float, of: float) -> float | None:
            return x / of if of > 0 else None

        wall = {**{k: share(v, self.wall_s) for k, v in parts.items()}, "wait": share(self.wait_s, self.wall_s)}
        active = {**{k: share(v, self.agent_active_s) for k, v in parts.items()},
                  "wait": share(agent_wait, self.agent_active_s)}
        wall["max_speedup"] = share(self.wall_s, self.amdahl_bound_s)
        active["max_speedup"] = share(self.agent_active_s, self.amdahl_bound_active_s)
        return {"of_wall": wall, "of_agent_active": active}

    def add(self, other: TimeSplit) -> None:
        for k, v in other.__dict__.items():
            if isinstance(v, float):
                setattr(self, k, getattr(self, k) + v)
        for r, v in other.wait_by_reason.items():
            self.wait_by_reason[r] = self.wait_by_reason.get(r, 0.0) + v


def _walk(node: Node, lo: int, hi: int, acc: dict[str, int], path_kind: str, imported: bool = False) -> None:
    """Attribute ``[lo, hi)`` of ``node`` along the critical path into ``acc`` (nanoseconds per bucket)."""
    cursor = hi
    kids = sorted((c for c in node.children if c.end > lo and c.start < hi),
                  key=lambda c: (c.end, -c.start, -_PRIORITY.get(c.kind, 9)), reverse=True)
    for c in kids:
        if cursor <= lo:
            break
        if c.start >= cursor:
            continue
        seg_end = min(c.end, cursor)
        seg_start = max(c.start, lo)
        if seg_end < cursor:
            _own(node, seg_end, cursor, acc, path_kind, imported)
        _walk(c, seg_start, seg_end, acc, c.kind, imported)
        cursor = seg_start
    if cursor > lo:
        _own(node, lo, cursor, acc, path_kind, imported)


def _own(node: Node, a: int, b: int, acc: dict[str, int], kind: str, imported: bool = False) -> None:
    """Time ``[a, b)`` that ``node`` itself owns on the critical path."""
    d = b - a
    if d <= 0:
        return
    if kind == "model":
        if node.ttft_ns is not None:
            split = node.start + max(0, min(node.ttft_ns, node.end - node.start))
            pre = max(0, min(b, split) - a)
            acc["model_ttft"] += pre
            acc["model_decode"] += d - pre
        acc["model"] += d
    elif kind == "wait":
        acc["wait"] += d
        key = "wait:" + (node.reason or "unspecified")
        acc[key] = acc.get(key, 0) + d
    elif kind == "root":
        acc["wait"] += d
        acc["wait:" + UNRECORDED] = acc.get("wait:" + UNRECORDED, 0) + d
    elif bucket_of(kind) in ("tool", "parse"):
        acc[kind] += d
    elif kind == "agent" and imported and (d <= _RESIDUE_NS or d >= _IDLE_NS):
        # an imported log's gap between records: clock residue when short, idle when long (nothing recorded)
        key = "wait:" + (waits.RESIDUE if d <= _RESIDUE_NS else waits.IDLE)
        acc["wait"] += d
        acc["gap"] += d
        acc[key] = acc.get(key, 0) + d
    else:  # orchestration spans, and agent time no child covers (glue)
        acc["orchestration"] += d
        if kind == "agent":
            acc["glue"] += d


def _collect(node: Node, out: list[Node]) -> None:
    for c in node.children:
        out.append(c)
        _collect(c, out)


def split_tree(root: Node, imported: bool = False) -> TimeSplit:
    """Time split, critical path and Amdahl bound of one tree rooted at an agent (or virtual) span.

    ``imported``: the spans come from an agent's log, so agent time between them is the log's residue or an
    idle gap rather than the agent's own code (see the module docstring)."""
    acc: dict[str, int] = {k: 0 for k in (*BUCKETS, "model_ttft", "model_decode", "glue", "gap")}
    # the root's own uncovered time is glue (agent time) or unrecorded time (virtual conversation root)
    _walk(root, root.start, root.end, acc, root.kind, imported)
    nodes: list[Node] = []
    _collect(root, nodes)
    wall = root.end - root.start
    span_sum = sum(n.end - n.start for n in nodes if n.kind != "agent")
    amdahl = wall - _model_only(nodes)
    ts = TimeSplit(
        wall_s=wall / NS, model_s=acc["model"] / NS, model_ttft_s=acc["model_ttft"] / NS,
        model_decode_s=acc["model_decode"] / NS, tool_s=acc["tool"] / NS, parse_s=acc["parse"] / NS,
        orchestration_s=acc["orchestration"] / NS, wait_s=acc["wait"] / NS, glue_s=acc["glue"] / NS,
        critical_path_s=(wall - acc["glue"] - acc["gap"] - acc.get("wait:" + UNRECORDED, 0)) / NS,
        span_sum_s=span_sum / NS, amdahl_bound_s=amdahl / NS,
        wait_by_reason={k[5:]: v / NS for k, v in acc.items() if k.startswith("wait:")},
    )
    if root.kind == "agent" and not imported and root.children:
        ts.startup_s = max(0, min(c.start for c in root.children) - root.start) / NS
    human = ts.human_wait_s
    ts.agent_active_s = max(0.0, ts.wall_s - human)
    ts.amdahl_bound_active_s = max(0.0, ts.amdahl_bound_s - human)
    return ts


def _model_only(nodes: Sequence[Node]) -> int:
    """Nanoseconds during which model calls (and spans merely waiting on them) were the only activity."""
    models = [n for n in nodes if n.kind == "model"]
    if not models:
        return 0
    m = iv.union(np.array([n.start for n in models]), np.array([n.end for n in models]))
    others_s: list[int] = []
    others_e: list[int] = []
    for n in nodes:
        if n.kind == "model":
            continue
        desc: list[Node] = []
        _collect(n, desc)
        dm = [d for d in desc if d.kind == "model"]
        if not dm:
            others_s.append(n.start)
            others_e.append(n.end)
            continue
        # a span that encloses model calls works only outside them
        inner = iv.union(np.array([d.start for d in dm]), np.array([d.end for d in dm]))
        cuts = np.concatenate([[n.start], inner[1]]), np.concatenate([inner[0], [n.end]])
        s = np.clip(cuts[0], n.start, n.end)
        e = np.clip(cuts[1], n.start, n.end)
        others_s.extend(s.tolist())
        others_e.extend(e.tolist())
    if not others_s:
        return iv.total(m)
    o = iv.union(np.array(others_s, dtype=np.int64), np.array(others_e, dtype=np.int64))
    return iv.total(m) - iv.total(iv.intersect(m, o))


@lru_cache(maxsize=4096)
def _reason(attrs: str | None) -> str | None:
    if not attrs or sc.WAIT_REASON not in attrs:
        return None
    try:
        r = json.loads(attrs).get(sc.WAIT_REASON)
    except ValueError:
        return None
    return waits.canonical(r) if isinstance(r, str) else None


def build_nodes(spans: pl.DataFrame) -> tuple[list[Node], dict[str, int], list[str | None], list[str]]:
    """Nodes for every span with both ends known (index aligned to ``spans`` rows)."""
    cols = spans.select("span_id", "parent_id", "session_id", "kind", "start_ns", "end_ns", "ttft_s", "stream",
                        "attributes", "trace_id")
    nodes: list[Node] = []
    by_id: dict[str, int] = {}
    parents: list[str | None] = []
    sessions: list[str] = []
    for i, (sid, pid, sess, kind, s, e, ttft, stream, attrs, tid) in enumerate(cols.iter_rows()):
        if s is None or e is None:
            s = e = -1
        ttft_ns = int(ttft * NS) if kind == "model" and ttft is not None and stream is not False else None
        nodes.append(Node(i, kind, s, max(s, e), ttft_ns, _reason(attrs) if kind == "wait" else None))
        by_id[f"{tid}\x1f{sid}"] = i
        parents.append(f"{tid}\x1f{pid}" if pid is not None else None)
        sessions.append(sess)
    return nodes, by_id, parents, sessions


def _tree(members: list[int], nodes: list[Node], by_id: dict[str, int], parents: list[str | None],
          roots: list[int]) -> Node:
    """Link ``members`` (timed span rows) under their parents; spans whose parent is outside the set go
    under the innermost root-level span containing them, else under a virtual root covering everything."""
    member = set(members)
    for i in members:
        nodes[i].children = []
    lo = min(nodes[i].start for i in members)
    hi = max(nodes[i].end for i in members)
    top = nodes[roots[0]] if len(roots) == 1 and nodes[roots[0]].start <= lo and nodes[roots[0]].end >= hi \
        else Node(-1, "root", lo, hi)
    orphans: list[int] = []
    for i in members:
        if nodes[i] is top:
            continue
        p = parents[i]
        pi = by_id.get(p) if p is not None else None
        if pi is not None and pi in member and pi != i:
            nodes[pi].children.append(nodes[i])
        else:
            orphans.append(i)
    for i in orphans:
        n = nodes[i]
        host = top
        if n.kind == "agent":  # a sub-session without a recorded parent span: innermost containing span
            best = None
            for j in members:
                c = nodes[j]
                if j != i and c.kind != "agent" and c.start <= n.start and c.end >= n.end and \
                        (best is None or c.end - c.start < best.end - best.start):
                    best = c
            host = best or top
        if host is not n:
            host.children.append(n)
    return top


_SPLITS: dict[tuple[int, bool], tuple[weakref.ref, list[tuple[str, str]], pl.DataFrame, dict[str, TimeSplit]]] = {}


def session_splits(spans: pl.DataFrame, sessions: pl.DataFrame, imported: bool = False
                   ) -> tuple[pl.DataFrame, dict[str, TimeSplit]]:
    """Per-session time split (one row per session) and per-conversation splits (sub-sessions nested).

    Spans without both ends are left out; a session with no timed span gets ``timed = False`` and zeros.
    ``imported``: the trace was read from agents' logs (see :func:`split_tree`).

    Computed once per span table and session list (the analysis and the replay's human-wait clock of one
    report ask for the same splits; a few seconds on 700 traces): treat the result as read-only.
    """
    key = (id(spans), imported)
    members = list(sessions.select("session_id", "conversation_id").iter_rows())
    hit = _SPLITS.get(key)
    if hit is not None and hit[0]() is spans and hit[1] == members:
        return hit[2], dict(hit[3])
    df, conv = _session_splits(spans, sessions, imported)
    _SPLITS[key] = (weakref.ref(spans, lambda _r, k=key: _SPLITS.pop(k, None)), members, df, conv)
    return df, dict(conv)


def _session_splits(spans: pl.DataFrame, sessions: pl.DataFrame, imported: bool
                    ) -> tuple[pl.DataFrame, dict[str, TimeSplit]]:
    nodes, by_id, parents, sess_of = build_nodes(spans)
    timed = [i for i, n in enumerate(nodes) if n.start >= 0]
    per_sess: dict[str, list[int]] = {}
    for i in timed:
        per_sess.setdefault(sess_of[i], []).append(i)
    rows: list[dict[str, Any]] = []
    results: dict[str, TimeSplit] = {}
    for sid in sessions.get_column("session_id").to_list():
        members = per_sess.get(sid, [])
        if not members:
            results[sid] = TimeSplit(timed=False)
        else:
            roots = [i for i in members if nodes[i].kind == "agent"]
            results[sid] = split_tree(_tree(members, nodes, by_id, parents, roots), imported)
        rows.append({"session_id": sid, **{k: v for k, v in results[sid].to_dict().items()
                                          if k != "wait_by_reason"},
                     "wait_by_reason": json.dumps(results[sid].wait_by_reason, sort_keys=True)})
    conv: dict[str, TimeSplit] = {}
    conv_members: dict[str, list[str]] = {}
    for sid, cid in sessions.select("session_id", "conversation_id").iter_rows():
        conv_members.setdefault(cid, []).append(sid)
    for cid, sids in conv_members.items():
        if len(sids) == 1:
            conv[cid] = results[sids[0]]
            continue
        members = [i for s in sids for i in per_sess.get(s, [])]
        if not members:
            conv[cid] = TimeSplit(timed=False)
            continue
        roots = [i for i in per_sess.get(cid, []) if nodes[i].kind == "agent"]
        conv[cid] = split_tree(_tree(members, nodes, by_id, parents, roots), imported)
    df = pl.DataFrame(rows, schema={"session_id": pl.Utf8, **{k: pl.Float64 for k in TimeSplit().to_dict()
                                                                if k not in ("wait_by_reason", "timed")},
                                    "timed": pl.Boolean, "wait_by_reason": pl.Utf8}) if rows else None
    return (df if df is not None else pl.DataFrame(schema={"session_id": pl.Utf8})), conv
