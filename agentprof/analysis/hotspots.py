"""Which code the agent's loop and its tools run: stack samples attributed to spans and gaps, hotspots, and the
measured CPU-bound share of orchestration and of each tool.

Attribution of a sample (thread T, time t):

1. taken inside an ``@agentprof.tool`` call or a recorded parse, it carries that span's id (the sampler read
   it from agentprof's wrapper frame): it belongs to that span, whatever thread or task ran it;
2. otherwise, on the thread that ran the session, it belongs to the innermost span of the session open at t
   (custom ``span(...)`` phases, model calls, waits, child-process tools), leaving out spans seen running on
   other threads; with none open it fell in an orchestration *gap* (the agent's own loop between spans);
3. otherwise (another thread of the agent, outside any tool) it is orchestration outside a gap.

``where`` is ``orchestration`` (gaps, orchestration spans, other threads), ``parse``, ``tool:<name>``, or
``model`` / ``wait`` (client-side work inside a model call, and what runs during a wait; not hotspots).
Sample weights: wall seconds = time since the same thread's previous sample (session thread; other threads
are sampled only when they ran, and weigh their CPU); CPU seconds = the thread CPU since that sample.

CPU-bound share = busy seconds / wall seconds, where busy = on a CPU or runnable and waiting for one (Linux
schedstat; on a shared machine a pure-Python loop gets a fraction of a core and would read far below 100 % on
CPU time alone). Orchestration uses the run's thread CPU and wait (on the root span) minus those of the tool
and parse spans it ran and, when sampled, of model calls' client side; see :func:`orchestration_cpu`.
Imported traces carry no CPU time: every figure here is then None.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from agentprof import semconv as sc
from agentprof.analysis.tools import tool_name
from agentprof.trace.samples import Samples
from agentprof.trace.schema import Trace

HOTSPOT_WHERE = ("orchestration", "parse", "tool")
TOP_FRAMES = 5
UNITS_IN_JSON = 100


@dataclass
class Attributed:
    """Per sample: where it belongs, the span row it belongs to (-1: none), the gap it fell in (-1: none),
    and its wall and CPU weights in seconds."""

    samples: Samples
    where: np.ndarray
    span_row: np.ndarray
    gap: np.ndarray
    wall_s: np.ndarray
    cpu_s: np.ndarray
    gaps: pl.DataFrame  # session_id, gap, start_ns, end_ns


@dataclass
class Profile:
    """Everything derived from CPU times and samples of one trace."""

    orchestration_cpu_s: float | None
    orchestration_busy_s: float | None  # CPU plus time waiting for a CPU
    orchestration_wall_s: float | None
    gap_busy_s: dict[str, float] = field(default_factory=dict)  # per session: busy seconds of its gaps (loop code)
    gap_wall_s: dict[str, float] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    hotspots: list[dict[str, Any]] = field(default_factory=list)
    units: pl.DataFrame | None = None  # per span and gap with samples: wall, CPU, top frames
    attributed: Attributed | None = None
    sampled: bool = False
    orchestration_cpu_err_s: float | None = None
    """How far ``orchestration_cpu_s`` can be off (clock resolution of the subtracted spans, one sample's CPU)."""

    @property
    def orchestration_cpu_share(self) -> float | None:
        """CPU-bound share of orchestration: busy seconds (on a CPU or waiting for one) / orchestration wall."""
        if self.orchestration_busy_s is None or not self.orchestration_wall_s:
            return None
        return min(self.orchestration_busy_s / self.orchestration_wall_s, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"orchestration_cpu_s": self.orchestration_cpu_s,
                "orchestration_cpu_err_s": self.orchestration_cpu_err_s,
                "orchestration_busy_s": self.orchestration_busy_s,
                "orchestration_wall_s": self.orchestration_wall_s,
                "orchestration_cpu_share": self.orchestration_cpu_share,
                "tools": self.tools, "sampled": self.sampled, "units": self.unit_rows()}

    def unit_rows(self, limit: int = UNITS_IN_JSON) -> list[dict[str, Any]]:
        """The spans and gaps with samples, longest first (wall, CPU, samples, top frames)."""
        if self.units is None or self.units.height == 0:
            return []
        rows = self.units.sort("wall_s", descending=True, nulls_last=True).head(limit).to_dicts()
        return [{k: (v if not isinstance(v, float) or v == v else None) for k, v in r.items()} for r in rows]


def span_where(spans: pl.DataFrame) -> list[str]:
    """Per span row, where its samples belong: ``tool:<name>`` (the name by the analysis' one rule,
    :func:`agentprof.analysis.tools.tool_name`), ``parse``, ``model``, ``wait``, else ``orchestration``."""
    kind = pl.col("kind")
    return spans.select(
        pl.when(kind == "tool").then(pl.lit("tool:") + tool_name())
        .when(kind.is_in(["parse", "model", "wait"])).then(kind)
        .otherwise(pl.lit("orchestration"))).to_series().to_list()


_GAPS_SCHEMA = {"session_id": pl.Utf8, "gap": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64}


def session_gaps(spans: pl.DataFrame) -> pl.DataFrame:
    """Per session: the gaps of its agent span no direct child covers (the agent's own loop), numbered.

    One vectorized pass: the agent spans' direct children (same trace, ``parent_id`` = the agent's span id:
    span ids are unique only within a trace, and importers reuse them across traces), sorted by start; a gap
    opens where a child starts after everything before it (the agent's start included) has ended, and a last
    one runs from there to the agent's end."""
    timed = pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()
    roots = (spans.filter((pl.col("kind") == "agent") & timed)
             .select("trace_id", pl.col("span_id").alias("parent_id"), "session_id",
                     pl.col("start_ns").alias("r0"), pl.col("end_ns").alias("r1"))
             .with_row_index("_root"))
    if roots.height == 0:
        return pl.DataFrame(schema=_GAPS_SCHEMA)
    kids = (spans.filter(timed & pl.col("parent_id").is_not_null())
            .select("trace_id", "parent_id", "start_ns", "end_ns")
            .join(roots, on=["trace_id", "parent_id"], how="inner")
            .sort("_root", "start_ns", maintain_order=True))
    covered = pl.max_horizontal(pl.col("r0"), pl.col("end_ns").cum_max().over("_root"))
    kids = kids.with_columns(covered.shift(1).over("_root").fill_null(pl.col("r0")).alias("cur"),
                             pl.int_range(pl.len()).over("_root").alias("_k"))
    inner = (kids.filter(pl.col("start_ns") > pl.col("cur"))
             .select("_root", "_k", "session_id", pl.col("cur").alias("start_ns"), pl.col("start_ns").alias("end_ns")))
    last = (roots.join(kids.group_by("_root").agg(pl.col("end_ns").max().alias("mx")), on="_root", how="left")
            .with_columns(pl.max_horizontal("r0", "mx").alias("cur"))
            .filter(pl.col("r1") > pl.col("cur"))
            .select("_root", pl.lit(1 << 62, dtype=pl.Int64).alias("_k"), "session_id",
                    pl.col("cur").alias("start_ns"), pl.col("r1").alias("end_ns")))
    out = pl.concat([inner.with_columns(pl.col("_k").cast(pl.Int64)), last]).sort("_root", "_k")
    return (out.with_columns(pl.int_range(pl.len()).over("_root").alias("gap"))
            .select(pl.col("session_id"), pl.col("gap").cast(pl.Int64), pl.col("start_ns").cast(pl.Int64),
                    pl.col("end_ns").cast(pl.Int64)))


def attribute(trace: Trace) -> Attributed | None:
    """Attribute every sample of ``trace`` (None when it has none)."""
    s: Samples | None = trace.samples
    if s is None or len(s) == 0:
        return None
    spans = trace.spans
    n = len(s)
    sid = spans.get_column("span_id").to_numpy()
    row_of = {v: i for i, v in enumerate(sid.tolist())}
    kind = spans.get_column("kind").to_list()
    start = spans.get_column("start_ns").fill_null(-1).to_numpy()
    end = spans.get_column("end_ns").fill_null(-1).to_numpy()
    sess = spans.get_column("session_id").to_numpy()
    span_row = np.full(n, -1, dtype=np.int64)
    for i in np.flatnonzero(s.span_id != None):  # noqa: E711 - object array
        span_row[i] = row_of.get(s.span_id[i], -1)
    is_session = s.thread_is_session[s.thread]
    # spans seen running on a thread other than the session's: not candidates for session-thread samples
    elsewhere = set(span_row[(span_row >= 0) & ~is_session].tolist())
    cand = np.array([k not in ("agent",) and i not in elsewhere and start[i] >= 0 and end[i] >= start[i]
                     for i, k in enumerate(kind)], dtype=bool)
    todo = np.flatnonzero((span_row < 0) & is_session)
    for ses in np.unique(s.session_id[todo]).tolist() if todo.size else []:
        rows = np.flatnonzero(cand & (sess == ses))
        pick = todo[s.session_id[todo] == ses]
        if not rows.size or not pick.size:
            continue
        a, b = start[rows], end[rows]
        for lo in range(0, pick.size, 2048):
            chunk = pick[lo:lo + 2048]
            t = s.t_ns[chunk][:, None]
            cover = (a[None, :] <= t) & (t < b[None, :])
            latest = np.where(cover, a[None, :], -1)
            best = latest.argmax(axis=1)
            hit = cover[np.arange(chunk.size), best]
            span_row[chunk[hit]] = rows[best[hit]]
    # child processes: the innermost tool span of their session open at the sample's time (the tool that waits
    # for them)
    is_child = np.array([k == "child" for k in s.thread_kind], dtype=bool)[s.thread] if s.thread_kind else \
        np.zeros(n, dtype=bool)
    kids = np.flatnonzero(is_child & (span_row < 0))
    is_tool = np.array([k == "tool" for k in kind], dtype=bool)
    for ses in np.unique(s.session_id[kids]).tolist() if kids.size else []:
        rows = np.flatnonzero(is_tool & (sess == ses) & (start >= 0) & (end >= start))
        pick = kids[s.session_id[kids] == ses]
        if not rows.size:
            continue
        a, b = start[rows], end[rows]
        t = s.t_ns[pick][:, None]
        cover = (a[None, :] <= t) & (t <= b[None, :])
        best = np.where(cover, a[None, :], -1).argmax(axis=1)
        hit = cover[np.arange(pick.size), best]
        span_row[pick[hit]] = rows[best[hit]]
    where = np.array(["orchestration"] * n, dtype=object)
    hit = np.flatnonzero(span_row >= 0)
    if hit.size:
        where[hit] = np.array(span_where(spans), dtype=object)[span_row[hit]]
    gaps = session_gaps(spans)
    gap = np.full(n, -1, dtype=np.int64)
    free = np.flatnonzero((span_row < 0) & is_session)
    for ses, g in gaps.group_by("session_id"):
        ses = ses[0]
        pick = free[s.session_id[free] == ses]
        if not pick.size:
            continue
        g = g.sort("start_ns")
        a, b = g.get_column("start_ns").to_numpy(), g.get_column("end_ns").to_numpy()
        k = np.searchsorted(a, s.t_ns[pick], side="right") - 1
        ok = (k >= 0) & (s.t_ns[pick] <= b[np.maximum(k, 0)])
        gap[pick[ok]] = g.get_column("gap").to_numpy()[k[ok]]
    # weights
    wall = np.zeros(n)
    cpu_s = s.cpu_ns / 1e9
    order = np.lexsort((s.t_ns, s.thread))
    t_sorted, th_sorted = s.t_ns[order], s.thread[order]
    prev = np.r_[-1, t_sorted[:-1]]
    same = np.r_[False, th_sorted[1:] == th_sorted[:-1]]
    interval = np.array([s.interval_ns.get(x, 5_000_000) for x in s.session_id[order]], dtype=float)
    dt = np.where(same, t_sorted - prev, interval)
    wall[order] = np.minimum(dt, 20 * interval) / 1e9
    wall = np.where(is_session, wall, cpu_s)
    wall = np.where(is_child, 0.0, wall)  # a child's time is already its tool's wall time
    return Attributed(s, where, span_row, gap, wall, cpu_s, gaps)


def _frames_of(a: Attributed, i: int) -> list[int]:
    return a.samples.stack(int(a.samples.node[i]))


def hotspots(a: Attributed, limit: int | None = 50) -> list[dict[str, Any]]:
    """Functions by self time per place (orchestration, parse, each tool): ``{frame, file, where, samples,
    self_s, total_s, self_cpu_s, total_cpu_s}``, largest self time first."""
    return rank_hotspots(hotspot_sums(a), limit)


def hotspot_sums(a: Attributed) -> list[dict[str, Any]]:
    """Every (place, function) with its sample count and self/total wall and CPU seconds, unranked and
    unfiltered: sums that add across partitions of a corpus (a function is its name and file)."""
    s = a.samples
    acc: dict[tuple[str, int], list[float]] = {}
    key_of: dict[tuple[str, str], int] = {}
    fkey = [key_of.setdefault((s.frame_name[f], s.frame_file[f]), len(key_of)) for f in range(len(s.frame_name))]
    leaf_cache: dict[int, tuple[int, frozenset[int]]] = {}
    for i in range(len(s)):
        w = a.where[i]
        if not (w in HOTSPOT_WHERE or w.startswith("tool:")):
            continue
        nd = int(s.node[i])
        got = leaf_cache.get(nd)
        if got is None:
            fr = s.stack(nd)
            got = leaf_cache[nd] = (fkey[fr[-1]] if fr else -1, frozenset(fkey[f] for f in fr))
        leaf, every = got
        for f in every:
            rec = acc.setdefault((w, f), [0, 0.0, 0.0, 0.0, 0.0])
            rec[2] += a.wall_s[i]
            rec[4] += a.cpu_s[i]
            if f == leaf:
                rec[0] += 1
                rec[1] += a.wall_s[i]
                rec[3] += a.cpu_s[i]
    names = list(key_of)
    return [{"frame": names[f][0], "file": names[f][1], "where": w, "samples": int(v[0]), "self_s": float(v[1]),
             "total_s": float(v[2]), "self_cpu_s": float(v[3]), "total_cpu_s": float(v[4])}
            for (w, f), v in acc.items()]


def rank_hotspots(rows: list[dict[str, Any]], limit: int | None = 50) -> list[dict[str, Any]]:
    """The functions that ran themselves (self samples), largest self time first, at most ``limit``."""
    out = [r for r in rows if r["samples"] > 0]
    out.sort(key=lambda d: (-d["self_s"], -d["total_s"], d["frame"], d["file"], d["where"]))
    return out if limit is None else out[:limit]


def _runq_by_span(a: Attributed | None, span_ids: list[str]) -> dict[str, float]:
    """Sampled run-queue wait (seconds) per span id."""
    out: dict[str, float] = {}
    if a is None:
        return out
    rq = a.samples.runq_ns / 1e9
    for i in np.flatnonzero((a.span_row >= 0) & (rq > 0)):
        k = span_ids[int(a.span_row[i])]
        out[k] = out.get(k, 0.0) + float(rq[i])
    return out


def span_cpu_wait_s(trace: Trace) -> np.ndarray:
    """Per span row: seconds its thread was runnable but waiting for a CPU inside it, as the capture recorded it
    (``agentprof.runq_ns``), else as the stack samples saw it where the trace has samples; NaN where neither
    (and for the sessions' roots, whose wait is the whole run's)."""
    spans = trace.spans
    rec = spans.select(pl.when(pl.col("kind") != "agent").then(pl.col("attributes").str.json_path_match(
        f"$['{sc.RUNQ_NS}']").cast(pl.Float64, strict=False) / 1e9)).to_series().to_numpy().astype(np.float64)
    missing = np.isnan(rec) & (spans.get_column("kind").to_numpy() != "agent")
    if missing.any():
        a = attribute(trace)
        if a is not None:
            sampled = np.zeros(spans.height)
            ok = a.span_row >= 0
            np.add.at(sampled, a.span_row[ok], a.samples.runq_ns[ok] / 1e9)
            rec[missing] = sampled[missing]
    return rec


def orchestration_cpu(trace: Trace, a: Attributed | None
                      ) -> tuple[float | None, float | None, dict[str, float], float | None]:
    """The agent's own loop (gaps and orchestration spans), summed over captured sessions: (CPU seconds,
    busy seconds = CPU plus time waiting for a CPU), per session the busy seconds of its gaps alone, and how far
    the CPU seconds can be off (:func:`cpu_uncertainty_s`; a session's difference below 0 counts as 0 within it).

    Per session: the root span's thread CPU (and run-queue wait, ``agentprof.runq_ns``), minus that of the
    tool and parse spans under it that no other CPU-measured span contains (their ``cpu_ns`` includes nested
    spans; their wait comes from samples), minus, when sampled, the session thread's CPU and wait inside model
    calls, waits and tools without CPU time. None when no session recorded its thread CPU."""
    import json

    spans = trace.spans.select("span_id", "parent_id", "session_id", "kind", "cpu_ns", "attributes")
    roots = spans.filter((pl.col("kind") == "agent") & pl.col("cpu_ns").is_not_null())
    if roots.height == 0:
        return None, None, {}, None
    ids = spans.get_column("span_id").to_list()
    parent = dict(zip(ids, spans.get_column("parent_id").to_list(), strict=False))
    cpu = dict(zip(ids, spans.get_column("cpu_ns").to_list(), strict=False))
    # the root counts its thread's CPU only: a span's child-process CPU (recorded apart) is not subtracted from it
    children = spans.get_column("attributes").str.json_path_match(f"$['{sc.CHILD_CPU_NS}']").cast(pl.Int64,
                                                                                                   strict=False)
    thread_cpu = {i: (c - (k or 0) if c is not None else None)
                  for i, c, k in zip(ids, cpu.values(), children.to_list(), strict=False)}
    kinds = dict(zip(ids, spans.get_column("kind").to_list(), strict=False))
    root_ids = set(roots.get_column("span_id").to_list())
    runq = _runq_by_span(a, ids)
    other_cpu: dict[str, float] = {}
    other_busy: dict[str, float] = {}
    elsewhere: set[str] = set()
    if a is not None:
        s = a.samples
        on_session = s.thread_is_session[s.thread]
        rows = a.span_row
        for i in np.flatnonzero(on_session & (rows >= 0)):
            span_id = ids[int(rows[i])]
            k = kinds.get(span_id)
            if k in ("model", "wait") or (k == "tool" and cpu.get(span_id) is None):
                key = str(s.session_id[i])
                other_cpu[key] = other_cpu.get(key, 0.0) + float(a.cpu_s[i])
                other_busy[key] = other_busy.get(key, 0.0) + float(a.cpu_s[i] + s.runq_ns[i] / 1e9)
        is_child = np.array([k == "child" for k in s.thread_kind], dtype=bool)[s.thread] if s.thread_kind else \
            np.zeros(len(s), dtype=bool)
        elsewhere = {ids[int(r)] for r in rows[(rows >= 0) & ~on_session & ~is_child]}
    reads: dict[str, int] = {}  # per root: CPU-measured spans subtracted (two clock reads each)
    top_cpu: dict[str, float] = {}  # per root: its outermost CPU-measured tool/parse spans on its thread
    top_busy: dict[str, float] = {}
    orch_cpu: dict[str, float] = {}
    orch_busy: dict[str, float] = {}
    for span_id, c in cpu.items():
        if c is None or span_id in root_ids or kinds.get(span_id) not in ("tool", "parse", "orchestration"):
            continue
        p = parent.get(span_id)
        inner = False
        while p is not None and p not in root_ids:
            if cpu.get(p) is not None and kinds.get(p) in ("tool", "parse", "orchestration"):
                inner = True
                break
            p = parent.get(p)
        if inner or p is None or span_id in elsewhere:
            continue
        tc, tb = (orch_cpu, orch_busy) if kinds[span_id] == "orchestration" else (top_cpu, top_busy)
        own = (thread_cpu[span_id] or 0) / 1e9
        tc[p] = tc.get(p, 0.0) + own
        tb[p] = tb.get(p, 0.0) + own + runq.get(span_id, 0.0)
        reads[p] = reads.get(p, 0) + 1
    cpu_total = busy_total = err = 0.0
    gaps: dict[str, float] = {}
    sample_cpu: dict[str, float] = {}  # per session: the largest CPU one sample carried (its attribution error)
    if a is not None and len(a.samples):
        for key, x in zip(a.samples.session_id.tolist(), a.cpu_s.tolist(), strict=False):
            sample_cpu[str(key)] = max(sample_cpu.get(str(key), 0.0), float(x))
    for rid, ses, c, attrs in roots.select("span_id", "session_id", "cpu_ns", "attributes").iter_rows():
        try:
            rq = float((json.loads(attrs) if attrs else {}).get(sc.RUNQ_NS) or 0) / 1e9
        except (ValueError, AttributeError):
            rq = 0.0
        raw = c / 1e9 - top_cpu.get(rid, 0.0) - orch_cpu.get(rid, 0.0) - other_cpu.get(ses, 0.0)
        err += cpu_uncertainty_s(reads.get(rid, 0), sample_cpu.get(ses, 0.0))
        loop_cpu = max(raw, 0.0)
        loop_busy = max(c / 1e9 + rq - top_busy.get(rid, 0.0) - orch_busy.get(rid, 0.0) - other_busy.get(ses, 0.0),
                        loop_cpu)
        gaps[ses] = loop_busy
        cpu_total += loop_cpu + orch_cpu.get(rid, 0.0)
        busy_total += loop_busy + orch_busy.get(rid, 0.0)
    return cpu_total, busy_total, gaps, err


def cpu_uncertainty_s(reads: int, sample_cpu_s: float) -> float:
    """How far a session's loop CPU (its root's thread CPU minus the spans under it) can be off: two thread-clock
    reads per subtracted span and the root at the clock's resolution, and, when sampled, one sample's CPU (a
    sample's CPU is attributed whole to the span it lands in)."""
    res = time.get_clock_info("thread_time").resolution
    return 2.0 * res * (reads + 1) + sample_cpu_s


def tool_shares(trace: Trace, a: Attributed | None = None) -> list[dict[str, Any]]:
    """Per tool: calls, wall seconds, CPU seconds (thread + children, as recorded), busy seconds (CPU plus
    sampled wait for a CPU) and the CPU-bound share (busy / wall)."""
    runq = _runq_by_span(a, trace.spans.get_column("span_id").to_list())
    t = trace.spans.filter((pl.col("kind") == "tool") & pl.col("cpu_ns").is_not_null()
                           & pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    if t.height == 0:
        return []
    rq = [runq.get(x, 0.0) for x in t.get_column("span_id").to_list()]
    df = (t.with_columns(tool_name().alias("tool"), pl.Series("rq", rq, dtype=pl.Float64),
                         ((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("wall"))
          .group_by("tool").agg(pl.len().alias("calls"), pl.col("wall").sum().alias("wall_s"),
                                (pl.col("cpu_ns").sum() / 1e9).alias("cpu_s"), pl.col("rq").sum().alias("rq_s"))
          .sort("wall_s", descending=True))
    return [{"tool": r["tool"], "calls": r["calls"], "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
             "busy_s": r["cpu_s"] + r["rq_s"],
             "cpu_bound_share": min((r["cpu_s"] + r["rq_s"]) / r["wall_s"], 1.0) if r["wall_s"] > 0 else None}
            for r in df.to_dicts()]


def units(trace: Trace, a: Attributed) -> pl.DataFrame:
    """Per span and per gap that has samples: where, name, wall, CPU (recorded, else sampled), samples and
    the top frames by self time."""
    s = a.samples
    spans = trace.spans
    recs: dict[tuple[str, int, int], dict[str, Any]] = {}
    for i in range(len(s)):
        r, g = int(a.span_row[i]), int(a.gap[i])
        key = (str(s.session_id[i]), r, g)
        u = recs.get(key)
        if u is None:
            u = recs[key] = {"n": 0, "cpu": 0.0, "self": {}}
        u["n"] += 1
        u["cpu"] += float(a.cpu_s[i])
        fr = s.stack(int(s.node[i]))
        if fr:
            u["self"][fr[-1]] = u["self"].get(fr[-1], 0.0) + float(a.wall_s[i])
    gaps = {(row["session_id"], row["gap"]): row for row in a.gaps.to_dicts()}
    where_of = span_where(spans) if any(r >= 0 for _, r, _ in recs) else []
    out = []
    for (ses, r, g), u in recs.items():
        if r >= 0:
            row = spans.row(r, named=True)
            where = where_of[r]
            a0, b0, label, cpu = row["start_ns"], row["end_ns"], row["name"], row["cpu_ns"]
            sid = row["span_id"]
        elif g >= 0:
            gr = gaps[(ses, g)]
            where, a0, b0, label, cpu, sid = "orchestration", gr["start_ns"], gr["end_ns"], f"gap {g}", None, None
        else:
            where, a0, b0, label, cpu, sid = "orchestration", None, None, "other threads", None, None
        top = sorted(u["self"].items(), key=lambda kv: -kv[1])[:TOP_FRAMES]
        out.append({"session_id": ses, "span_id": sid, "gap": g if g >= 0 else None, "where": where, "name": label,
                    "start_ns": a0, "end_ns": b0,
                    "wall_s": (b0 - a0) / 1e9 if a0 is not None and b0 is not None else None,
                    "cpu_s": cpu / 1e9 if cpu is not None else u["cpu"], "cpu_from": "span" if cpu is not None
                    else "samples", "samples": u["n"],
                    "top_frames": [f"{s.frame_name[f]} ({s.frame_file[f]})" for f, _ in top]})
    return pl.DataFrame(out, schema={"session_id": pl.Utf8, "span_id": pl.Utf8, "gap": pl.Int64, "where": pl.Utf8,
                                     "name": pl.Utf8, "start_ns": pl.Int64, "end_ns": pl.Int64, "wall_s": pl.Float64,
                                     "cpu_s": pl.Float64, "cpu_from": pl.Utf8, "samples": pl.Int64,
                                     "top_frames": pl.List(pl.Utf8)}).sort("start_ns", nulls_last=True)


def profile(trace: Trace, orchestration_wall_s: float | None = None) -> Profile:
    """CPU-bound shares and, when the trace was sampled, hotspots and per-span/gap units.
    ``orchestration_wall_s``: the orchestration time of the time split (its denominator)."""
    a = attribute(trace)
    cpu, busy, gaps, err = orchestration_cpu(trace, a)
    prof = Profile(cpu, busy, orchestration_wall_s if cpu is not None else None, gap_busy_s=gaps,
                   tools=tool_shares(trace, a), attributed=a, sampled=a is not None, orchestration_cpu_err_s=err)
    g = session_gaps(trace.spans)
    if g.height:
        wall = g.with_columns(((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("w")).group_by("session_id") \
            .agg(pl.col("w").sum())
        prof.gap_wall_s = dict(zip(wall.get_column("session_id").to_list(), wall.get_column("w").to_list(), strict=False))
    if a is not None:
        prof.hotspots = hotspots(a)
        prof.units = units(trace, a)
    return prof
