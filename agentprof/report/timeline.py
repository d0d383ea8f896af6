"""The Gantt's data: sessions ordered with their subagents nested under them, spans placed on rows, shipped
as compact columns (integer microseconds from the trace's first instant, indices into string tables).

Rows: a session's non-agent spans go on rows by nesting depth (children below the span that contains them,
like a flame chart), and spans that overlap at one depth (parallel tool calls) get extra rows. The session's
``agent`` span is its band. Past ``max_spans`` spans, short neighbouring spans of one kind on a row are merged
into aggregates (the count is kept), so a corpus of any size stays small and smooth.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from agentprof import semconv as sc
from agentprof.report.lanes import pack_rows
from agentprof.trace.schema import KINDS

DEFAULT_MAX_SPANS = 50_000
TEXT_LIMIT = 1500
MAX_PARALLEL_ROWS = 8  # rows per nesting depth; more concurrent spans share rows (drawn overlapping)
_TEXT_IN = (sc.INPUT_MESSAGES, sc.TOOL_CALL_ARGUMENTS, sc.SUBPROCESS_ARGS)
_TEXT_OUT = (sc.OUTPUT_MESSAGES, sc.TOOL_CALL_RESULT)
_SPAN_KINDS = tuple(k for k in KINDS if k != "agent")


@dataclass
class SessionInfo:
    """One session as the report shows it."""

    session_id: str
    label: str
    role: str
    parent: str | None
    start_ns: int | None
    end_ns: int | None
    n_spans: int
    n_calls: int


def _role(attributes: str | None, parent: str | None) -> str:
    if attributes:
        try:
            role = json.loads(attributes).get(sc.SESSION_ROLE)
        except ValueError:
            role = None
        if isinstance(role, str) and role:
            return role
    return "subagent" if parent else "main"


def session_table(spans: pl.DataFrame) -> list[SessionInfo]:
    """Sessions in display order: top-level sessions by start time, each followed by its subagents (recursively)."""
    if spans.height == 0:
        return []
    # the needed columns first: grouping the whole table would rechunk its hash lists too
    per = spans.select("session_id", "start_ns", "end_ns", "parent_session_id", "kind").group_by(
        "session_id", maintain_order=True).agg(
        pl.col("start_ns").min().alias("start_ns"),
        pl.col("end_ns").max().alias("end_ns"),
        pl.col("parent_session_id").drop_nulls().first().alias("parent"),
        pl.len().alias("n_spans"),
        (pl.col("kind") == "model").sum().alias("n_calls"),
    )
    agents = spans.filter(pl.col("kind") == "agent").unique("session_id", keep="first", maintain_order=True)
    agent_info = {r["session_id"]: r for r in agents.select("session_id", "name", "attributes").iter_rows(named=True)}
    infos: dict[str, SessionInfo] = {}
    for r in per.iter_rows(named=True):
        sid = r["session_id"]
        a = agent_info.get(sid)
        parent = r["parent"] if r["parent"] != sid else None
        name = a["name"] if a else ""
        agent = name[len(sc.OP_INVOKE_AGENT):].strip() if name.startswith(sc.OP_INVOKE_AGENT) else name
        role = _role(a["attributes"] if a else None, parent)
        short = sid if len(sid) <= 14 else sid[:12] + "…"
        label = f"{agent} · {short}" if agent and agent != sid else short
        infos[sid] = SessionInfo(sid, label, role, parent, r["start_ns"], r["end_ns"], r["n_spans"], r["n_calls"])
    for s in infos.values():  # a child named "<ancestor id>/<suffix>" is labelled by its suffix
        anc, hops = s.parent, 0
        while anc and anc in infos and hops < 32:
            if len(s.session_id) > len(anc) + 1 and s.session_id.startswith(anc) and s.session_id[len(anc)] in "/:#":
                s.label = s.session_id[len(anc) + 1:]
                break
            anc, hops = infos[anc].parent, hops + 1
    children: dict[str | None, list[SessionInfo]] = defaultdict(list)
    for s in infos.values():
        key = s.parent if s.parent in infos else None
        children[key].append(s)
    big = 1 << 62
    for lst in children.values():
        lst.sort(key=lambda s: s.start_ns if s.start_ns is not None else big)
    out: list[SessionInfo] = []
    seen: set[str] = set()

    def visit(s: SessionInfo) -> None:
        if s.session_id in seen:
            return
        seen.add(s.session_id)
        out.append(s)
        for c in children.get(s.session_id, []):
            visit(c)

    for s in children[None]:
        visit(s)
    for s in infos.values():  # cycles in parent links: still show every session once
        visit(s)
    return out


def span_depths(spans: pl.DataFrame, clamp: bool = True) -> list[int]:
    """Nesting depth of each span below its session's agent span (the agent's direct children: 0; the agent
    itself: -1, or 0 with ``clamp``). The walk up the parent links stops at an ``agent`` span, a missing
    parent or a cycle."""
    keys = list(zip(spans.get_column("trace_id").to_list(), spans.get_column("span_id").to_list(), strict=True))
    parents = spans.get_column("parent_id").to_list()
    kinds = spans.get_column("kind").to_list()
    index = {k: i for i, k in enumerate(keys)}
    depth: list[int | None] = [-1 if k == "agent" else None for k in kinds]
    for i in range(len(keys)):
        if depth[i] is not None:
            continue
        chain: list[int] = []
        on_chain: set[int] = set()
        j: int | None = i
        while j is not None and depth[j] is None:
            chain.append(j)
            on_chain.add(j)
            p = parents[j]
            nxt = index.get((keys[j][0], p)) if p else None
            j = nxt if nxt is not None and nxt not in on_chain else None
        base = depth[j] if j is not None else -1
        for k in reversed(chain):
            base = (base if base is not None else -1) + 1
            depth[k] = base
    if clamp:
        return [max(0, d) if d is not None else 0 for d in depth]
    return [d if d is not None else 0 for d in depth]


def _aggregate(cols: dict[str, list[Any]], budget: int, extent_us: int) -> dict[int, int]:
    """Merge runs of short neighbouring spans on each row until at most ``budget`` spans remain.

    A merged span covers its run and takes the kind that fills most of it. Returns the number of original
    spans behind each merged span (by position in the new columns). The resolution starts at
    ``extent / budget`` (so a single row could keep ``budget`` spans) and doubles until the budget holds (or
    every row is one span). The columns (integers) are sorted by (start, row); each round walks them row by
    row (one greedy pass), and the kept spans' row-major order is the next round's, so only they are re-sorted.
    """
    res = max(1, extent_us // max(1, budget))
    n = len(cols["start"])
    if n <= budget:
        return {}
    arr = {k: np.asarray(v, dtype=np.int64) for k, v in cols.items()}
    counts = np.ones(n, dtype=np.int64)
    order = np.lexsort((arr["start"], arr["row"]))  # each row's spans by start (ties in column order)
    while n > budget and res <= 2 * extent_us + 2:
        start, dur, row, kind = (arr[k].tolist() for k in ("start", "dur", "row", "kind"))
        cnt = counts.tolist()
        keep: list[int] = []
        ends: list[int] = []
        merged: list[int] = []
        kinds: list[int] = []
        kind_time: dict[int, int] | None = None  # the current run's time per kind, once it has merged a span
        cur_row = -1
        cur_start = cur_end = 0
        for i in order.tolist():
            s = start[i]
            e = s + dur[i]
            r = row[i]
            if keep and r == cur_row and e - cur_start <= res and s - cur_end <= res:
                cur_end = max(cur_end, e)
                merged[-1] += cnt[i]
                if kind_time is None:
                    kind_time = {kind[keep[-1]]: max(1, dur[keep[-1]])}
                k = kind[i]
                kind_time[k] = kind_time.get(k, 0) + max(1, dur[i])
                continue
            if keep:
                ends.append(cur_end)
                kinds.append(_main_kind(kind_time, kind[keep[-1]]))
            cur_row, cur_start, cur_end, kind_time = r, s, e, None
            keep.append(i)
            merged.append(cnt[i])
        ends.append(cur_end)
        kinds.append(_main_kind(kind_time, kind[keep[-1]]))
        kept = np.asarray(keep, dtype=np.int64)
        # the kept spans by (start, row); ties keep their row-major order
        final = np.lexsort((arr["row"][kept], arr["start"][kept]))
        src = kept[final]
        arr = {k: v[src] for k, v in arr.items()}
        arr["dur"] = np.asarray(ends, dtype=np.int64)[final] - arr["start"]
        arr["kind"] = np.asarray(kinds, dtype=np.int64)[final]
        counts = np.asarray(merged, dtype=np.int64)[final]
        n = src.size
        order = np.empty(n, dtype=np.int64)  # where each kept span, taken row-major, now stands
        order[final] = np.arange(n, dtype=np.int64)
        res *= 2
    cols.clear()
    cols.update({k: v.tolist() for k, v in arr.items()})
    return {i: c for i, c in enumerate(counts.tolist()) if c > 1}


def _main_kind(kind_time: dict[int, int] | None, own: int) -> int:
    """The kind that fills most of a merged run (the first of equals), or the span's own if nothing merged."""
    return own if kind_time is None else max(kind_time.items(), key=lambda kv: kv[1])[0]


def build_timeline(spans: pl.DataFrame, max_spans: int = DEFAULT_MAX_SPANS, include_text: bool = False) -> dict[str, Any]:
    """The Gantt's data for the report (see the module docstring); JSON-safe.

    With ``include_text``, captured prompt/response text and tool arguments/results (only present when the
    capture opted in) travel along, cut to ``TEXT_LIMIT`` characters each.
    """
    sessions = session_table(spans)
    # the Gantt needs no block hashes: filtering without them saves gathering every call's list (seconds on
    # large kv-cache-tester corpora)
    spans = spans.drop([c for c in ("block_hashes", "segments") if c in spans.columns])
    timed = spans.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    n_untimed = spans.filter(pl.col("kind") != "agent").height - timed.filter(pl.col("kind") != "agent").height
    t0 = timed.get_column("start_ns").min() if timed.height else None
    out: dict[str, Any] = {
        "kinds": list(_SPAN_KINDS),
        "sessions": [],
        "rows": 0,
        "spans": {"start": [], "dur": [], "row": [], "kind": [], "name": []},
        "names": [],
        "calls": {"span": [], "input": [], "cache_read": [], "output": [], "ttft_ms": []},
        "errors": {"span": [], "type": []},
        "derived": [],
        "aggregated": {"span": [], "count": []},
        "n_spans_total": spans.filter(pl.col("kind") != "agent").height,
        "n_untimed": n_untimed,
        "t0_ns": str(t0) if t0 is not None else None,
        "extent_us": 0,
    }
    if t0 is None:
        out["sessions"] = _sessions_json(sessions, None, [(i, 1) for i in range(len(sessions))])
        out["rows"] = len(sessions)
        return out
    t0 = int(t0)
    body = timed.filter(pl.col("kind") != "agent").with_row_index("_i")
    depth = span_depths(timed)
    depth_by_key = dict(zip(zip(timed.get_column("trace_id").to_list(), timed.get_column("span_id").to_list(), strict=True), depth, strict=True))

    by_session: dict[str, list[int]] = defaultdict(list)
    b_sid = body.get_column("session_id").to_list()
    for i, sid in enumerate(b_sid):
        by_session[sid].append(i)
    b_start = [(v - t0) // 1000 for v in body.get_column("start_ns").to_list()]
    b_end = [(v - t0) // 1000 for v in body.get_column("end_ns").to_list()]
    b_depth = [depth_by_key.get(k, 0) for k in zip(body.get_column("trace_id").to_list(),
                                                      body.get_column("span_id").to_list(), strict=True)]
    row_of = [0] * body.height
    row0 = 0
    session_rows: list[tuple[int, int]] = []
    for s in sessions:
        idx = by_session.get(s.session_id, [])
        n_rows = 1
        if idx:
            by_depth: dict[int, list[int]] = defaultdict(list)
            for i in idx:
                by_depth[b_depth[i]].append(i)
            offset = 0
            for d in sorted(by_depth):
                members = by_depth[d]
                rows = pack_rows([b_start[i] for i in members], [b_end[i] for i in members], MAX_PARALLEL_ROWS)
                for i, r in zip(members, rows, strict=True):
                    row_of[i] = row0 + offset + r
                offset += max(rows) + 1
            n_rows = offset
        session_rows.append((row0, n_rows))
        row0 += n_rows

    names: dict[str, int] = {}
    kind_idx = {k: i for i, k in enumerate(_SPAN_KINDS)}
    b_names = body.get_column("name").to_list()
    b_kind = body.get_column("kind").to_list()
    cols: dict[str, list[Any]] = {
        "start": b_start,
        "dur": [max(0, e - s) for s, e in zip(b_start, b_end, strict=True)],
        "row": row_of,
        "kind": [kind_idx[k] for k in b_kind],
        "name": [names.setdefault(n, len(names)) for n in b_names],
        "src": list(range(body.height)),
    }
    order = sorted(range(body.height), key=lambda i: (cols["start"][i], cols["row"][i]))
    cols = {k: [v[i] for i in order] for k, v in cols.items()}
    extent = max(b_end, default=0)
    aggregated: dict[int, int] = {}
    if len(cols["start"]) > max_spans:
        aggregated = _aggregate(cols, max_spans, extent)
        for i, c in aggregated.items():
            label = f"{c} × {_SPAN_KINDS[cols['kind'][i]]} spans (aggregated)"
            cols["name"][i] = names.setdefault(label, len(names))

    # details of model calls, errors and derived timings, keyed by position in the shipped columns
    src = cols.pop("src")
    pos_of = {s: p for p, s in enumerate(src) if p not in aggregated}
    detail = body.select("input_tokens", "cache_read_tokens", "output_tokens", "ttft_s", "status",
                         "error_type", "timing", "kind")
    calls = out["calls"]
    errors = out["errors"]
    for i, r in enumerate(detail.iter_rows()):
        p = pos_of.get(i)
        if p is None:
            continue
        inp, cr, outp, ttft, status, etype, timing, kind = r
        if kind == "model":
            calls["span"].append(p)
            calls["input"].append(inp)
            calls["cache_read"].append(cr)
            calls["output"].append(outp)
            calls["ttft_ms"].append(round(ttft * 1000, 1) if ttft is not None else None)
        if status == "error":
            errors["span"].append(p)
            errors["type"].append(etype or "error")
        if timing == "derived":
            out["derived"].append(p)
    if include_text:
        out["text"] = _texts(body.get_column("attributes").to_list(), pos_of)
    out["spans"] = cols
    out["names"] = list(names)
    out["aggregated"] = {"span": list(aggregated), "count": list(aggregated.values())}
    out["rows"] = row0
    out["extent_us"] = int(extent)
    out["sessions"] = _sessions_json(sessions, t0, session_rows)
    return out


def _texts(attributes: list[str | None], pos_of: dict[int, int]) -> dict[str, list[Any]]:
    """Captured text per shipped span: ``{span, input, output}`` (only spans that have any)."""
    out: dict[str, list[Any]] = {"span": [], "input": [], "output": []}
    for i, raw in enumerate(attributes):
        p = pos_of.get(i)
        if p is None or not raw or not any(k in raw for k in (*_TEXT_IN, *_TEXT_OUT)):
            continue
        try:
            attrs = json.loads(raw)
        except ValueError:
            continue

        def pick(keys: tuple[str, ...], attrs: dict[str, Any] = attrs) -> str | None:
            for k in keys:
                v = attrs.get(k)
                if v is not None:
                    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " …"
            return None

        a, b = pick(_TEXT_IN), pick(_TEXT_OUT)
        if a is None and b is None:
            continue
        out["span"].append(p)
        out["input"].append(a)
        out["output"].append(b)
    return out


def _sessions_json(sessions: list[SessionInfo], t0: int | None, rows: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Sessions for the page: label, role, parent (index), nesting level, rows and extent in µs from t0."""
    index = {s.session_id: i for i, s in enumerate(sessions)}
    by_id = {s.session_id: s for s in sessions}
    out = []
    for s, (row0, n_rows) in zip(sessions, rows, strict=True):
        level, cur = 0, s
        while cur.parent and cur.parent in by_id and level < 32:
            level += 1
            cur = by_id[cur.parent]
        timed = t0 is not None and s.start_ns is not None and s.end_ns is not None
        out.append({
            "id": s.session_id,
            "label": s.label,
            "role": s.role,
            "parent": index.get(s.parent, -1) if s.parent else -1,
            "level": level,
            "row0": row0,
            "rows": n_rows,
            "start": (s.start_ns - t0) // 1000 if timed else None,  # type: ignore[operator]
            "end": (s.end_ns - t0) // 1000 if timed else None,  # type: ignore[operator]
            "calls": s.n_calls,
        })
    return out
