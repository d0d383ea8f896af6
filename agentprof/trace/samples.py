"""Stack samples stored in an agentprof trace (``{"record": "samples", ...}`` lines, written by
:mod:`agentprof.capture.sampler`), decoded into flat arrays.

Each record adds the frames, stack nodes and threads first seen since the previous record of its session
(ids count up per session; a thread entry ``[index, ident, name, is the session's thread]`` may end with
``"child"``: a child process, ident = its pid, sampled for CPU and wait only), then its samples as columns: time (``t0`` plus ``dt``), thread, stack node,
thread CPU and run-queue wait (``rq``) since that thread's previous sample, and the span open on the stack when the sampler could read it
(``spans``: sparse ``[sample index, span id]`` pairs). A stack is a node of a prefix tree: ``[id, parent id
(-1 for the outermost frame), frame id]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Samples:
    """Decoded samples of one or more sessions (global ids: frames, stack nodes and threads are renumbered
    across sessions so they can be concatenated)."""

    frame_name: list[str] = field(default_factory=list)
    frame_file: list[str] = field(default_factory=list)
    node_parent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # -1 = outermost
    node_frame: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    thread_name: list[str] = field(default_factory=list)
    thread_is_session: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    thread_session: list[str] = field(default_factory=list)
    thread_kind: list[str] = field(default_factory=list)  # "thread", or "child" (a child process)
    t_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    thread: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cpu_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    runq_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # waiting for a CPU
    span_id: np.ndarray = field(default_factory=lambda: np.zeros(0, object))  # hex or None
    session_id: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    interval_ns: dict[str, int] = field(default_factory=dict)  # per session

    def __len__(self) -> int:
        return int(self.t_ns.size)

    def stack(self, node: int) -> list[int]:
        """Frame ids of a stack node, outermost first."""
        out = []
        while node >= 0:
            out.append(int(self.node_frame[node]))
            node = int(self.node_parent[node])
        return out[::-1]


class _SessionIds:
    def __init__(self) -> None:
        self.frames: dict[int, int] = {}
        self.nodes: dict[int, int] = {}
        self.threads: dict[int, int] = {}


def decode(records: Iterable[dict[str, Any]], where: str = "") -> Samples | None:
    """Samples from ``samples`` records in file order (None when there are none). Records that do not fit
    the layout raise ``ValueError`` naming what is wrong."""
    out = Samples()
    parents: list[int] = []
    nframes: list[int] = []
    t: list[np.ndarray] = []
    th: list[np.ndarray] = []
    st: list[np.ndarray] = []
    cpu: list[np.ndarray] = []
    rq: list[np.ndarray] = []
    spans: list[np.ndarray] = []
    sess_col: list[np.ndarray] = []
    ids: dict[str, _SessionIds] = {}
    any_rec = False
    for rec in records:
        any_rec = True
        sid = str(rec.get("session_id") or "")
        m = ids.setdefault(sid, _SessionIds())
        if rec.get("interval_ns"):
            out.interval_ns[sid] = int(rec["interval_ns"])
        for fid, name, file in rec.get("frames") or ():
            m.frames[int(fid)] = len(out.frame_name)
            out.frame_name.append(str(name))
            out.frame_file.append(str(file))
        for nid, parent, fid in rec.get("stacks") or ():
            m.nodes[int(nid)] = len(parents)
            parents.append(-1 if parent < 0 else m.nodes[int(parent)])
            nframes.append(m.frames[int(fid)])
        for idx, _ident, name, is_session, *kind in rec.get("threads") or ():
            m.threads[int(idx)] = len(out.thread_name)
            out.thread_name.append(str(name))
            out.thread_kind.append(str(kind[0]) if kind else "thread")
            out.thread_session.append(sid)
            out.thread_is_session = np.append(out.thread_is_session, bool(is_session))
        dt = rec.get("dt") or []
        n = len(dt)
        if not (len(rec.get("th") or []) == len(rec.get("st") or []) == len(rec.get("cpu") or []) == n):
            raise ValueError(f"{where}samples record: columns dt, th, st, cpu differ in length")
        if not n:
            continue
        t.append(int(rec["t0"]) + np.asarray(dt, dtype=np.int64))
        th.append(np.array([m.threads[int(x)] for x in rec["th"]], dtype=np.int64))
        st.append(np.array([m.nodes[int(x)] for x in rec["st"]], dtype=np.int64))
        cpu.append(np.asarray(rec["cpu"], dtype=np.int64))
        rq.append(np.asarray(rec.get("rq") or [0] * n, dtype=np.int64))
        col = np.full(n, None, dtype=object)
        for i, span in rec.get("spans") or ():
            col[int(i)] = str(span)
        spans.append(col)
        sess_col.append(np.full(n, sid, dtype=object))
    if not any_rec:
        return None
    out.node_parent = np.asarray(parents, dtype=np.int64)
    out.node_frame = np.asarray(nframes, dtype=np.int64)
    if t:
        out.t_ns, out.thread, out.node, out.cpu_ns, out.runq_ns = (np.concatenate(x) for x in (t, th, st, cpu, rq))
        out.span_id, out.session_id = np.concatenate(spans), np.concatenate(sess_col)
    return out


def concat(parts: Sequence[Samples | None]) -> Samples | None:
    """Samples of several traces as one (ids renumbered)."""
    items = [p for p in parts if p is not None]
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    out = Samples()
    parents, frames = [], []
    t, th, st, cpu, rq, spans, sess = [], [], [], [], [], [], []
    for p in items:
        f0, n0, h0 = len(out.frame_name), sum(a.size for a in parents), len(out.thread_name)
        out.frame_name += p.frame_name
        out.frame_file += p.frame_file
        parents.append(np.where(p.node_parent >= 0, p.node_parent + n0, -1))
        frames.append(p.node_frame + f0)
        out.thread_name += p.thread_name
        out.thread_session += p.thread_session
        out.thread_kind += p.thread_kind
        out.thread_is_session = np.concatenate([out.thread_is_session, p.thread_is_session])
        t.append(p.t_ns)
        th.append(p.thread + h0)
        st.append(p.node + n0)
        cpu.append(p.cpu_ns)
        rq.append(p.runq_ns)
        spans.append(p.span_id)
        sess.append(p.session_id)
        out.interval_ns.update(p.interval_ns)
    out.node_parent, out.node_frame = np.concatenate(parents), np.concatenate(frames)
    out.t_ns, out.thread, out.node, out.cpu_ns, out.runq_ns = (np.concatenate(x) for x in (t, th, st, cpu, rq))
    out.span_id, out.session_id = np.concatenate(spans), np.concatenate(sess)
    return out
