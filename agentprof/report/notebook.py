"""Jupyter display: small static HTML fragments (tables and inline SVG bars, no scripts) for traces and stage
results, so ``analyze(trace)`` or ``replay(...)`` show themselves in a notebook.

Wiring: the classes below this stage know nothing of their display. :func:`install` (run when
``agentprof.report`` is imported) gives each of ``agentprof.display.DISPLAYED_TYPES`` a ``_repr_html_``; in a running IPython,
``agentprof`` itself registers :func:`html_for` by type name (:func:`agentprof._notebook_display`), so a notebook
shows a result before anything imported this stage.
Everything from a trace is escaped with :func:`html.escape`.
"""

from __future__ import annotations

import html
import math
from typing import Any

from agentprof.report.formats import fmt_bytes, fmt_duration, fmt_int, fmt_pct, fmt_tokens, fmt_x
from agentprof.report.terminal import TIME_ROWS
from agentprof.trace.waits import HUMAN_REASONS

COLORS = {"model": "#0072b2", "tool": "#e69f00", "parse": "#cc79a7", "orchestration": "#009e73", "wait": "#9aa5b1"}
_BOX = ("font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:13px;color:#1c2430;"
        "max-width:880px")
_TH = "text-align:left;padding:3px 10px 3px 0;border-bottom:1px solid #dde2e8;font-weight:600;color:#4a5563"
_TD = "padding:3px 10px 3px 0;border-bottom:1px solid #f0f2f5"
_TDR = _TD + ";text-align:right;font-variant-numeric:tabular-nums"


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    right = right or set()
    head = "".join(f'<th style="{_TH}{";text-align:right" if i in right else ""}">{_e(h)}</th>'
                   for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td style="{_TDR if i in right else _TD}">{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f'<table style="border-collapse:collapse;margin:6px 0 10px">{"<thead><tr>" + head + "</tr></thead>"}<tbody>{body}</tbody></table>'


def split_bar_svg(time: dict[str, Any], width: int = 560, height: int = 16) -> str:
    """The time split as one stacked bar (inline SVG), widths proportional to wall time."""
    wall = time.get("wall_s")
    if not wall:
        return ""
    x = 0.0
    parts = []
    for key, label in TIME_ROWS:
        v = time.get(key)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            continue
        w = width * v / wall
        parts.append(f'<rect x="{x:.2f}" y="0" width="{w:.2f}" height="{height}" fill="{COLORS[label]}">'
                     f"<title>{_e(label)}: {_e(fmt_duration(v))} ({_e(fmt_pct(v / wall))})</title></rect>")
        x += w
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'style="display:block;border:1px solid #dde2e8;border-radius:3px">{"".join(parts)}</svg>')


def _time_table(time: dict[str, Any]) -> str:
    wall = time.get("wall_s")
    active = time.get("agent_active_s")
    active_shares = (time.get("shares") or {}).get("of_agent_active") or {}
    rows = []
    for key, label in TIME_ROWS:
        v = time.get(key)
        sw = f'<span style="display:inline-block;width:9px;height:9px;border-radius:2px;background:{COLORS[label]};margin-right:6px"></span>'
        rows.append([sw + _e(label), _e(fmt_duration(v)), _e(fmt_pct(v / wall if v is not None and wall else None)),
                     _e(fmt_pct(active_shares.get(label)))])
        up = time.get("startup_s") or 0.0
        if label == "orchestration" and up > 1e-3:
            rows.append([_e("  start-up (before the first span)"), _e(fmt_duration(up)),
                         _e(fmt_pct(up / wall if wall else None)), _e(fmt_pct(up / active if active else None))])
    for reason, v in sorted((time.get("waits_by_reason") or {}).items(), key=lambda kv: -kv[1]):
        rows.append([_e(f"wait: {reason}"), _e(fmt_duration(v)), _e(fmt_pct(v / wall if wall else None)),
                     "–" if reason in HUMAN_REASONS or not active else _e(fmt_pct(v / active))])
    rows.append(["<b>wall</b>", f"<b>{_e(fmt_duration(wall))}</b>", "", ""])
    if active is not None:
        rows.append(["<b>agent-active</b> (wall − user turns, approvals, idle)", f"<b>{_e(fmt_duration(active))}</b>",
                     _e(fmt_pct(active / wall if wall else None)), ""])
    if time.get("amdahl_bound_s") is not None:
        a = time["amdahl_bound_s"]
        rows.append(["Amdahl bound", _e(fmt_duration(a)), _e(f"≤ {fmt_x(wall / a)} faster" if wall and a else ""), ""])
    if time.get("amdahl_bound_active_s") is not None and active:
        sp = active_shares.get("max_speedup")
        rows.append(["Amdahl bound, agent-active", _e(fmt_duration(time["amdahl_bound_active_s"])), "",
                     _e(f"≤ {fmt_x(sp)} faster" if sp else "")])
    return _table(["bucket", "time", "share of wall", "share of agent-active"], rows, {1, 2, 3})


REDUNDANCY_LABELS = {"provider_cache_read_share": "provider cache read share, per call"}
"""Names that differ from the figure a report shows under the bare name (there: token-weighted)."""


def analysis_html(d: dict[str, Any]) -> str:
    """An ``Analysis.to_dict()`` as a notebook fragment: counts, time split, redundancy summaries, first misses."""
    out = [f'<div style="{_BOX}"><div style="font-weight:650;font-size:14px;margin-bottom:4px">agentprof analysis</div>',
           f"<div>{_e(fmt_int(d.get('sessions')))} sessions · {_e(fmt_int(d.get('conversations')))} conversations · "
           f"{_e(fmt_int(d.get('model_calls')))} model calls</div>"]
    time = d.get("time")
    if isinstance(time, dict):
        out.append('<div style="margin-top:8px">' + split_bar_svg(time) + "</div>")
        out.append(_time_table(time))
    red = d.get("redundancy")
    if isinstance(red, dict):
        rows = []
        for name, s in red.items():
            if isinstance(s, dict) and "mean" in s:  # summaries only (not the token totals)
                label = REDUNDANCY_LABELS.get(name, name.replace("_", " "))
                rows.append([_e(label)] + [_e(fmt_pct(s.get(k))) for k in ("mean", "median", "p10", "p90")])
        if rows:
            out.append(_table(["redundancy", "mean", "median", "p10", "p90"], rows, {1, 2, 3, 4}))
    misses = [m for m in d.get("cache_misses") or [] if isinstance(m, dict)]
    if misses:
        rows = []
        for m in misses[:10]:
            causes = [c for c in m.get("causes") or [] if isinstance(c, dict)]
            top = max(causes, key=lambda c: c.get("score") or 0) if causes else {}
            call = m.get("call_index")
            rows.append([_e(m.get("session_id")), _e(call + 1 if isinstance(call, int) else ""),
                         _e(str(top.get("cause") or "").replace("_", " ")), _e(top.get("fix"))])
        out.append(f"<div style='margin-top:6px;font-weight:600'>cache misses ({len(misses):,})</div>")
        out.append(_table(["session", "call", "cause", "fix"], rows, {1}))
    out.append("</div>")
    return "".join(out)


def replay_html(d: dict[str, Any]) -> str:
    """A ``ReplayResult.to_dict()`` as a table plus stacked model / tool / orchestration / wait bars."""
    rows_in = ([d["recorded"]] if isinstance(d.get("recorded"), dict) else []) + \
        [s for s in d.get("systems") or [] if isinstance(s, dict)]
    totals = [sum(r.get(k) or 0 for k in ("model_s", "tool_s", "orchestration_s", "wait_s")) for r in rows_in]
    top = max(totals + [r.get("e2e_s") or 0 for r in rows_in] + [1e-9])
    rows = []
    for r in rows_in:
        x, rects = 0.0, []
        for key, label in (("model_s", "model"), ("tool_s", "tool"), ("orchestration_s", "orchestration"),
                           ("wait_s", "wait")):
            v = r.get(key) or 0
            if v > 0:
                w = 260 * v / top
                rects.append(f'<rect x="{x:.2f}" y="2" width="{w:.2f}" height="12" fill="{COLORS[label]}"/>')
                x += w
        svg = f'<svg width="262" height="16" viewBox="0 0 262 16">{"".join(rects)}</svg>'
        rows.append([_e(r.get("name")), _e(fmt_duration(r.get("e2e_s"))), svg,
                     _e(fmt_duration(r.get("model_s"))), _e(fmt_duration(r.get("tool_s"))),
                     _e(fmt_duration(r.get("orchestration_s"))),
                     _e(fmt_duration(r.get("wait_s"))), _e(fmt_x(r.get("speedup_vs_recorded"))),
                     _e(fmt_x(r.get("model_calls_speedup")))])
    rec = d.get("recorded") or {}
    notes = [str(v) for v in (d.get("standins") or {}).values()]
    return (f'<div style="{_BOX}"><div style="font-weight:650;font-size:14px">agentprof replay</div>'
            + _table(["system", "task time", "", "model", "tool", "orchestration", "wait", "task speed-up",
                      "model-call speed-up"], rows, {1, 3, 4, 5, 6, 7, 8})
            + (f"<div>Task time with model calls taking no time, on the replayed timeline: "
               f"{_e(fmt_duration(rec['amdahl_e2e_s']))}</div>" if rec.get("amdahl_e2e_s") else "")
            + "".join(f'<div style="color:#6b7684;font-size:12px">{_e(n)}</div>' for n in notes)
            + "</div>")


def cachesim_html(d: dict[str, Any]) -> str:
    """A cache simulation result: hit rate, bytes loaded and evictions per tier."""
    rows = []
    for t in d.get("tiers") or []:
        if isinstance(t, dict):
            rows.append([_e(t.get("name")), _e(fmt_pct(t.get("hit_rate"))),
                         _e(fmt_tokens(t.get("hit_tokens"))), _e(fmt_int(t.get("evictions")))])
    return (f'<div style="{_BOX}"><div style="font-weight:650;font-size:14px">agentprof KV cache simulation '
            f'{_e(d.get("model") or "")}</div>' + _table(["tier", "token hit rate", "hit tokens", "evictions"], rows, {1, 2, 3})
            + "</div>")


def sweep_html(d: dict[str, Any]) -> str:
    """A capacity sweep: hit rate at each capacity and where it reaches its target share of unlimited."""
    rows = [[_e(fmt_bytes(p.get("capacity_bytes"), none="unlimited")), _e(fmt_pct(p.get("hit_rate")))] for p in d.get("points") or []
            if isinstance(p, dict)]
    target = d.get("capacity_at_target_bytes")
    return (f'<div style="{_BOX}"><div style="font-weight:650;font-size:14px">agentprof cache capacity sweep</div>'
            + _table(["capacity", "token hit rate"], rows, {0, 1})
            + (f"<div>{_e(fmt_pct(d.get('target')))} of the unlimited hit rate "
               f"({_e(fmt_pct(d.get('unlimited_hit_rate')))}) at {_e(fmt_bytes(target, none='unlimited'))}</div>" if target else "")
            + "</div>")


def trace_html(trace: Any) -> str:
    """A trace's headline figures (sessions, calls, tokens, wall) as a notebook fragment."""
    from agentprof.report.headline import trace_figures

    f = trace_figures(trace.spans)
    rows = [["sessions", _e(f"{f['top_sessions']:,} (+{f['subagent_sessions']:,} subagent)")],
            ["model calls", _e(fmt_int(f["model_calls"]))], ["tool calls", _e(fmt_int(f["tool_calls"]))],
            ["input tokens", _e(fmt_tokens(f["input_tokens"]))], ["output tokens", _e(fmt_tokens(f["output_tokens"]))],
            ["provider cache read share", _e(fmt_pct(f["cache_read_share"]))],
            ["wall time", _e(fmt_duration(f["wall_s"]))]]
    return (f'<div style="{_BOX}"><div style="font-weight:650;font-size:14px">agentprof trace '
            f'{_e(trace.meta.name or trace.meta.source_format)}</div>' + _table(["", ""], rows, {1}) + "</div>")


def html_for(obj: Any) -> str:
    """The fragment for a trace or a stage result (dispatch on what its ``to_dict()`` holds)."""
    if hasattr(obj, "spans") and hasattr(obj, "meta"):
        return trace_html(obj)
    d = obj.to_dict() if hasattr(obj, "to_dict") else obj
    if not isinstance(d, dict):
        return f"<pre>{_e(repr(obj))}</pre>"
    if "time" in d or "redundancy" in d:
        return analysis_html(d)
    if "systems" in d or "recorded" in d:
        return replay_html(d)
    if "tiers" in d:
        return cachesim_html(d)
    if "points" in d:
        return sweep_html(d)
    return f"<pre>{_e(repr(obj))}</pre>"


def _repr_html_(self: Any) -> str:
    return html_for(self)


def install() -> None:
    """Give every class of ``agentprof.display.DISPLAYED_TYPES`` a Jupyter ``_repr_html_`` (importing each stage)."""
    import importlib

    from agentprof.display import DISPLAYED_TYPES

    for module, name in DISPLAYED_TYPES:
        cls = getattr(importlib.import_module(module), name)
        cls._repr_html_ = _repr_html_
