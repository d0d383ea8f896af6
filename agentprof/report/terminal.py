"""Rich terminal renderers shared by ``analyze``, ``cachesim``, ``replay``, ``report`` and ``export``.

Each ``*_view`` function takes a stage's ``to_dict()`` and returns a rich renderable; ``show(renderable)``
prints it. Trace text (tool, model and session names) always goes in as :class:`rich.text.Text`, so square
brackets in a name are shown, never read as console markup. ``progress_bar`` wraps long work in a progress
bar that stays silent when stderr is not a terminal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from agentprof import safe_text
from agentprof.report.fit_width import Column, fitted_tables
from agentprof.report.formats import fmt_bytes, fmt_count, fmt_duration, fmt_int, fmt_pct, fmt_x
from agentprof.safe_text import console as safe_console

KIND_STYLE = {"model": "blue", "tool": "yellow", "parse": "magenta", "orchestration": "green", "wait": "bright_black"}
TIME_ROWS = (("model_s", "model"), ("tool_s", "tool"), ("parse_s", "parse"), ("orchestration_s", "orchestration"),
             ("wait_s", "wait"))


# ---------------------------------------------------------------- formatting
# the formats live in agentprof.report.formats (no rich import): every command's terminal output shares them


def _width(width: int | None) -> int:
    """``width``, or the terminal's when not given: what the ``*_view`` functions fit their tables to."""
    return width if width is not None else Console().width


def bar(share: float | None, width: int = 24, style: str = "blue") -> Text:
    """A horizontal bar of ``share`` (0–1) drawn with block characters."""
    if share is None or not math.isfinite(share):
        return Text("")
    share = min(1.0, max(0.0, share))
    eighths = round(share * width * 8)
    full, part = divmod(eighths, 8)
    return Text("█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else ""), style=style)


def _t(v: Any, style: str = "") -> Text:
    """Trace text as literal rich Text (no markup, no control characters, cut to a line)."""
    return safe_text.text(v, style=style)


def _table(title: str | None = None, **kw: Any) -> Table:
    return Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, **kw)


# ---------------------------------------------------------------- views
def time_split_view(time: dict[str, Any], width: int | None = None) -> RenderableType:
    """Wall time split into model / tool / parse / orchestration / wait, with shares of the wall and of the
    agent-active time (the analysis' ``shares``), waits by reason, and the Amdahl bound on both clocks; stacked
    to fit ``width`` (the console's by default)."""
    from agentprof.trace.waits import HUMAN_REASONS

    wall = time.get("wall_s")
    active_shares = (time.get("shares") or {}).get("of_agent_active") or {}
    active = time.get("agent_active_s")
    rows: list[list[RenderableType]] = []
    for key, label in TIME_ROWS:
        v = time.get(key)
        share = v / wall if v is not None and wall else None
        rows.append([Text(label, style=KIND_STYLE[label]), fmt_duration(v), fmt_pct(share),
                     fmt_pct(active_shares.get(label)) if active is not None else "",
                     bar(share, style=KIND_STYLE[label])])
        up = time.get("startup_s") or 0.0
        if label == "orchestration" and up > 1e-3:
            rows.append([_t("  start-up (before 1st span)", "dim"), fmt_duration(up),
                         fmt_pct(up / wall if wall else None), fmt_pct(up / active) if active else "", ""])
    for reason, v in sorted((time.get("waits_by_reason") or {}).items(), key=lambda kv: -kv[1]):
        human = reason in HUMAN_REASONS
        rows.append([_t(f"  wait: {reason}", "dim"), fmt_duration(v), fmt_pct(v / wall if wall else None),
                     "–" if human or not active else fmt_pct(v / active), ""])
    rows.append([Text("wall", style="bold"), Text(fmt_duration(wall), style="bold"), "", "", ""])
    notes = []
    if active is not None:
        rows.append([Text("agent-active", style="bold"), Text(fmt_duration(active), style="bold"),
                     fmt_pct(active / wall if wall else None), "", ""])
        notes.append("agent-active: the wall minus user turns, approvals and idle gaps")
    if time.get("critical_path_s") is not None:
        rows.append(["critical path", fmt_duration(time["critical_path_s"]),
                     fmt_pct(time["critical_path_s"] / wall if wall else None), "", ""])
    if time.get("amdahl_bound_s") is not None:
        amdahl = time["amdahl_bound_s"]
        rows.append(["Amdahl bound", fmt_duration(amdahl), "", "", ""])
        if wall and amdahl:
            notes.append(f"Amdahl bound: the wall with model calls taking no time, at most {fmt_x(wall / amdahl)} "
                         "faster")
    if time.get("amdahl_bound_active_s") is not None and active:
        sp = active_shares.get("max_speedup")
        rows.append(["  agent-active", fmt_duration(time["amdahl_bound_active_s"]), "", "", ""])
        if sp:
            notes.append(f"at most {fmt_x(sp)} faster while the agent works")
    cols = [Column("bucket", "left", name=True), Column("time"), Column("share"), Column("of agent-active"),
            Column("", "left")]
    tables = fitted_tables("Where the time went", cols, rows, _width(width))
    return Group(*tables, *([Text("; ".join(notes), style="dim")] if notes else []))


def distribution_view(dists: dict[str, Any], title: str, as_share: bool = True) -> Table:
    """Rows of ``{name: {mean, median, p10, p25, p75, p90}}`` summaries (other entries are skipped)."""
    t = _table(title)
    t.add_column("metric")
    for k in ("n", "mean", "median", "p10", "p25", "p75", "p90"):
        t.add_column(k, justify="right")
    fmt = fmt_pct if as_share else fmt_duration
    for name, d in dists.items():
        if not isinstance(d, dict) or "mean" not in d:
            continue
        t.add_row(name.replace("_", " "), fmt_int(d.get("n")),
                  *(fmt(d.get(k)) for k in ("mean", "median", "p10", "p25", "p75", "p90")))
    return t


def _top_cause(m: dict[str, Any]) -> dict[str, Any]:
    causes = [c for c in m.get("causes") or [] if isinstance(c, dict)]
    return max(causes, key=lambda c: c.get("score") or 0) if causes else {}


def misses_view(misses: Sequence[dict[str, Any]], limit: int = 15) -> Table:
    """The first cache misses (analysis ``cache_misses``) with their most likely cause, where and the fix.
    Call numbers are 1-based (``call_index + 1``), as in the HTML report."""
    t = _table(f"Cache misses ({len(misses):,})" + (f", first {limit}" if len(misses) > limit else ""))
    t.add_column("session", overflow="fold", max_width=22)
    t.add_column("call", justify="right")
    t.add_column("cause", style="red")
    t.add_column("where", overflow="fold")
    t.add_column("fix", overflow="fold", ratio=2)
    for m in misses[:limit]:
        top = _top_cause(m)
        loc = m.get("location") if isinstance(m.get("location"), dict) else {}
        where = loc.get("where")
        if m.get("first_diverging_block") is not None:
            where = f"{where or ''}{', ' if where else ''}block {m['first_diverging_block']}"
        call = m.get("call_index")
        t.add_row(_t(m.get("session_id")), fmt_int(call + 1 if isinstance(call, int) else None),
                  _t(str(top.get("cause") or "").replace("_", " ")), _t(where), _t(top.get("fix")))
    return t


def analysis_view(d: dict[str, Any], misses: int = 15) -> RenderableType:
    """``agentprof analyze``: headline counts, time split, redundancy distributions and the first misses."""
    parts: list[RenderableType] = []
    head = Text()
    head.append(f"{d.get('sessions', 0) or 0:,}", style="bold")
    head.append(" sessions · ")
    head.append(f"{d.get('conversations', 0) or 0:,}", style="bold")
    head.append(" conversations · ")
    head.append(f"{d.get('model_calls', 0) or 0:,}", style="bold")
    head.append(" model calls")
    parts.append(head)
    if isinstance(d.get("time"), dict):
        parts.append(time_split_view(d["time"]))
    if isinstance(d.get("redundancy"), dict):
        parts.append(distribution_view(d["redundancy"], "Prompt redundancy (per call; hit rate per conversation)"))
    found = d.get("cache_misses") or []
    if found and misses:
        parts.append(misses_view(found, misses))
    return Group(*parts)


def replay_view(d: dict[str, Any]) -> RenderableType:
    """``agentprof replay``: the recorded run and each system with times, model share and speed-ups."""
    rows = ([d["recorded"]] if isinstance(d.get("recorded"), dict) else []) + \
        [s for s in d.get("systems") or [] if isinstance(s, dict)]
    t = _table("Device what-if")
    for col, just in (("system", "left"), ("task time", "right"), ("model", "right"), ("tool", "right"),
                      ("orchestration", "right"), ("wait", "right"), ("model share", "right"),
                      ("task speed-up", "right"), ("model-call speed-up", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        if r.get("error"):
            t.add_row(_t(r.get("name")), safe_text.text("not replayed: " + str(r["error"]), 1000, style="red"),
                      "", "", "", "", "", "", "")
            continue
        t.add_row(_t(r.get("name")), fmt_duration(r.get("e2e_s")), fmt_duration(r.get("model_s")),
                  fmt_duration(r.get("tool_s")), fmt_duration(r.get("orchestration_s")), fmt_duration(r.get("wait_s")), fmt_pct(r.get("model_share")),
                  fmt_x(r.get("speedup_vs_recorded")), fmt_x(r.get("model_calls_speedup")))
    rec = d.get("recorded") or {}
    if rec.get("amdahl_e2e_s") is not None:
        t.caption = (f"task time with model calls taking no time, on the replayed timeline: "
                     f"{fmt_duration(rec['amdahl_e2e_s'])}"
                     + (f" ({fmt_x(rec['amdahl_bound'])})" if rec.get("amdahl_bound") else ""))
    notes = [str(v) for v in (d.get("standins") or {}).values()] + [str(n) for n in d.get("notes") or []]
    return Group(t, *(safe_text.text("• " + n, 1000, style="dim") for n in notes))


def cachesim_view(d: dict[str, Any]) -> Table:
    """``agentprof cachesim``: hit rate, bytes loaded and evictions per tier."""
    t = _table(f"KV cache simulation{(' · ' + safe_text.markup(d['model'])) if d.get('model') else ''}")
    for col in ("tier", "capacity", "token hit rate", "bytes loaded", "evictions"):
        t.add_column(col, justify="left" if col == "tier" else "right")
    for tier in d.get("tiers") or []:
        if not isinstance(tier, dict):
            continue
        cap = tier.get("capacity_bytes")
        t.add_row(_t(tier.get("name")), fmt_bytes(cap, none="unlimited"), fmt_pct(tier.get("hit_rate")),
                  fmt_bytes(tier.get("bytes_loaded")), fmt_int(tier.get("evictions")))
    if d.get("hit_rate") is not None:
        t.add_row(Text("all tiers", style="bold"), "", Text(fmt_pct(d["hit_rate"]), style="bold"), "", "")
    return t


def slow_tools_view(tools: Sequence[dict[str, Any]]) -> Table:
    """Tools by total time (from :func:`agentprof.report.slowest.slow_tools`)."""
    t = _table("Slowest tools (total time)")
    for col in ("tool", "calls", "total", "", "median", "max", "errors"):
        t.add_column(col, justify="left" if col in ("tool", "") else "right")
    top = tools[0]["total_s"] if tools else 1
    for r in tools:
        t.add_row(_t(r["tool"]), fmt_int(r["calls"]), fmt_duration(r["total_s"]),
                  bar(r["total_s"] / top if top else None, 16, "yellow"), fmt_duration(r["median_s"]),
                  fmt_duration(r["max_s"]), fmt_int(r["errors"]))
    return t


def report_view(path: str, size_bytes: int, payload: dict[str, Any], width: int | None = None) -> RenderableType:
    """What ``agentprof report`` wrote: the file, its size, the headline and what is missing; tables fit
    ``width`` (the console's by default)."""
    width = _width(width)  # once for every panel below
    hl = payload.get("headline", {})
    lines = Text()
    lines.append("wrote ")
    lines.append(path, style="bold")
    lines.append(f"  ({size_bytes / 1e6:.2f} MB, opens offline)\n")
    lines.append(f"{fmt_count(hl.get('top_sessions', 0), 'session')} · "
                 f"{fmt_count(hl.get('model_calls', 0), 'model call')} · "
                 f"wall {fmt_duration(hl.get('wall_s'))} · provider cache read share "
                 f"{fmt_pct(hl.get('cache_read_share'))}")
    parts: list[RenderableType] = [lines]
    if payload.get("answer"):
        parts.append(answer_view(payload["answer"]))
    if hl.get("time"):
        parts.append(time_split_view(hl["time"], width))
    elif hl.get("amdahl_bound_s") is not None:
        lines.append(f"\nAmdahl bound {fmt_duration(hl['amdahl_bound_s'])}"
                     + (f", at most {fmt_x(hl['max_speedup'])} faster" if hl.get("max_speedup") else ""))
    sv = payload.get("serving") or {}
    if sv.get("status") == "ok":
        parts.append(serving_view(sv, width))
    if (payload.get("measured") or {}).get("status") == "ok":
        parts.append(measured_view(payload["measured"], width))
    if payload.get("missing"):
        parts.append(Text("not in this report:", style="bold yellow"))
        parts.extend(safe_text.text("• " + m, 1000) for m in payload["missing"])
    return Group(*parts)


def answer_view(ans: dict[str, Any]) -> RenderableType:
    """The report's first screen (``payload["answer"]``): the split, each replayed system's task time and speed-up
    with its range and why not more, and the biggest lever, in the page's words."""
    parts: list[RenderableType] = []
    if ans.get("split"):
        parts.append(Text(ans["split"]))
    systems = ans.get("systems") or []
    if systems:
        t = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        t.add_column("replayed on", no_wrap=True)
        t.add_column("task time", justify="right", no_wrap=True)
        t.add_column("speed-up (range)", justify="right", no_wrap=True)
        t.add_column("why not more", ratio=1)
        for r in systems:
            if r.get("error"):
                t.add_row(_t(r["name"]), "—", "—", Text("not replayed: " + str(r["error"])))
                continue
            band = r.get("band")
            sp = fmt_x(r.get("speedup")) + (f" ({fmt_x(band[0])}–{fmt_x(band[1])})" if band else "")
            t.add_row(_t(r["name"]), fmt_duration(r.get("e2e_s")), sp, Text(r.get("why_not") or ""))
        parts.append(t)
    lever = ans.get("lever")
    ceiling = ans.get("ceiling")
    if lever or ceiling:
        line = Text()
        if lever:
            line.append("biggest lever: ", style="bold")
            line.append(lever["text"] + ". ")
        if ceiling:
            line.append(ceiling["text"][:1].upper() + ceiling["text"][1:] + ".")
        parts.append(line)
    return Group(*parts)


def serving_view(sv: dict[str, Any], width: int | None = None) -> RenderableType:
    """The serving panel: TTFT p99 and tasks/hour against concurrency for each system, stacked to fit ``width``
    (the console's by default)."""
    conc = sv["concurrency"]
    head = Text(f"serving {sv['sessions']} session(s) as {sv['model']} ({sv['cache']}): TTFT p99 · tasks/hour by "
                "concurrency", style="bold")
    rows: list[list[RenderableType]] = []
    for row in sv["systems"]:
        if row.get("error"):
            rows.append([_t(row["system"]), *["—"] * len(conc)])
            continue
        att = row.get("attention") or ["tp"] * len(conc)
        rows.append([_t(row["system"]), *[(f"{fmt_duration(a)} · {b:.1f}/h" if b else f"{fmt_duration(a)} · —")
                                          + (" · DP" if lay == "dp" else "")
                                          for a, b, lay in zip(row["ttft_p99_s"], row["tasks_per_hour"], att,
                                                               strict=True)]])
    cols = [Column("system", "left", name=True)] + [Column(str(n)) for n in conc]
    tables = fitted_tables(None, cols, rows, _width(width))
    notes = []
    if any("dp" in (row.get("attention") or []) for row in sv["systems"]):
        notes.append("DP: data-parallel attention ranks (the sessions' MLA KV outgrows what tensor-parallel attention "
                     "holds)")
    notes += [f"{row['system']} at {conc[-1]}: {row['beyond']}" for row in sv["systems"] if row.get("beyond")]
    for row in sv["systems"]:
        b = row.get("band") or {}
        p99, tph = b.get("serving_ttft_p99_s") or [], b.get("serving_tasks_per_hour") or []
        if len(p99) == 2 and all(v is not None for v in p99):
            notes.append(f"{row['system']} band at {b['concurrency']} (every ranged estimate at its fast / slow end): "
                         f"TTFT p99 {fmt_duration(min(p99))}–{fmt_duration(max(p99))}"
                         + (f", tasks/hour {min(tph):.1f}–{max(tph):.1f}" if len(tph) == 2 and None not in tph else ""))
    if (sv.get("not_simulated") or {}).get("reason"):
        notes.append(sv["not_simulated"]["reason"])
    return Group(head, *tables, *(safe_text.text(n, 1000, style="dim") for n in notes))


def measured_view(panel: dict[str, Any], width: int | None = None, title: str = "Measured on your backend"
                  ) -> RenderableType:
    """The load-test panel (:func:`agentprof.report.measured.panel`): per load test what ran, its counts and a
    figure / measured / predicted / error table, stacked to fit ``width`` (the console's by default)."""
    width = width if width is not None else Console().width
    parts: list[RenderableType] = [Text(title, style="bold")] if title else []
    for run in panel["runs"]:
        parts.append(safe_text.text((f"{run['label']}: " if run.get("label") else "") + run["head"], 1000))
        if run.get("sources"):
            parts.append(safe_text.text("trace files: " + run["sources"], 1000, style="dim"))
        parts.append(safe_text.text(run["counts"], 1000))
        cols = [Column(run["columns"][0], "left", name=True), *(Column(h) for h in run["columns"][1:])]
        parts.extend(fitted_tables(None, cols, [[safe_text.text(c, 200) for c in r["cells"]] for r in run["rows"]],
                                   width))
        parts.extend(safe_text.text("note: " + n, 1000, style="dim") for n in run["notes"])
    return Group(*parts)


def show(renderable: RenderableType, console: Console | None = None) -> None:
    """Print a renderable on ``console`` (stdout by default)."""
    (console or safe_console()).print(renderable)


@contextmanager
def progress_bar(description: str, total: int | None = None, console: Console | None = None,
                 enabled: bool | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for long work; yields ``advance(n=1)``. Silent when stderr is not a terminal
    (or ``enabled=False``)."""
    con = console or safe_console(stderr=True)
    if enabled is None:
        enabled = con.is_terminal
    if not enabled:
        yield lambda n=1: None
        return
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=con, transient=True) as p:
        task = p.add_task(description, total=total)
        yield lambda n=1: p.advance(task, n)
