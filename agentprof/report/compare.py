"""Several traces in one report page, side by side: a comparison panel (headline figures, time split and the
device what-if of each trace in columns), then each trace's full report under its own label.

The page is the same single file as :func:`agentprof.report.html.render` (same template, script and safety
rules); its data is ``{"compare": {"runs": [{"label", "about", "payload"}, ...], "table", "whatif", "notes"}}``
where each ``payload`` is exactly what a one-trace report embeds.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprof import __version__
from agentprof.report.html import render_payload
from agentprof.report.payload import build_payload
from agentprof.trace import Trace

# (key, label, format) of the comparison table; formats: dur, pct, int, tok, x
TABLE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("wall_s", "Wall time", "dur"),
    ("agent_active_s", "Agent-active time (wall minus user turns, approvals, idle)", "dur"),
    ("share_model", "Model share", "pct"),
    ("share_tool", "Tool share", "pct"),
    ("share_parse", "JSON parse share", "pct"),
    ("share_orchestration", "Orchestration share", "pct"),
    ("share_wait", "Wait share (all waits: user turns, approvals, idle, retries, residue)", "pct"),
    ("model_calls", "Model calls", "int"),
    ("tool_calls", "Tool calls", "int"),
    ("input_tokens", "Input tokens", "tok"),
    ("prefix_reuse_median", "Prompt equal to the previous prompt (median per call)", "pct"),
    ("cache_read_share", "Provider cache read share (tokens)", "pct"),
    ("amdahl_bound_s", "Amdahl bound: task time with instant model calls", "dur"),
    ("max_speedup", "Most any faster model could give", "x"),
)


@dataclass
class ComparePart:
    """One trace of the page with its stage results (as for :func:`agentprof.report.html.render`)."""

    label: str
    trace: Trace
    analysis: Any = None
    replay: Any = None
    cache: Any = None
    notes: dict[str, str] = field(default_factory=dict)
    cache_model: str | None = None
    about: str | None = None


def _figures(payload: dict[str, Any]) -> dict[str, Any]:
    hl = payload.get("headline") or {}
    shares = hl.get("shares") or {}
    red = (payload.get("redundancy") or {}).get("summary") or {}
    out: dict[str, Any] = {k: hl.get(k) for k in ("wall_s", "agent_active_s", "model_calls", "tool_calls", "input_tokens",
                                                   "cache_read_share", "amdahl_bound_s", "max_speedup")}
    for kind in ("model", "tool", "parse", "orchestration", "wait"):
        out[f"share_{kind}"] = shares.get(f"{kind}_s")
    out["prefix_reuse_median"] = (red.get("prefix_reuse_prev") or {}).get("median")
    return out


def comparison_table(payloads: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the side-by-side table: ``{key, label, fmt, values}`` with one value per trace."""
    figs = [_figures(p) for p in payloads]
    return [{"key": k, "label": label, "fmt": fmt, "values": [f.get(k) for f in figs]} for k, label, fmt in TABLE_ROWS]


def comparison_whatif(payloads: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per replayed system (in first-seen order): per trace its task time, speed-ups, and the task speed-up's
    range and why it is not larger (the first screen's, :mod:`agentprof.report.answer`), or ``None``."""
    order: list[str] = []
    display: dict[str, Any] = {}
    per: list[dict[str, dict[str, Any]]] = []
    ranges: list[dict[str, Any]] = []
    for p in payloads:
        w = p.get("whatif") or {}
        rows = {r["name"]: r for r in (w.get("rows") or []) if isinstance(r, dict) and r.get("name")}
        per.append(rows)
        ranges.append({a["name"]: a for a in (p.get("answer") or {}).get("systems") or []})
        for name, r in rows.items():
            if name not in display:
                order.append(name)
                display[name] = r.get("display")
    out = []
    for name in order:
        cells = []
        for rows, answered in zip(per, ranges, strict=True):
            r, a = rows.get(name), answered.get(name) or {}
            cells.append(None if r is None else {"e2e_s": r.get("e2e_s"), "speedup": r.get("speedup"),
                                                 "model_speedup": r.get("model_speedup"), "error": r.get("error"),
                                                 "band": a.get("band"), "why_not": a.get("why_not")})
        out.append({"name": name, "display": display[name], "cells": cells})
    return out


def build_compare_payload(parts: Sequence[ComparePart], title: str = "agentprof comparison",
                          notes: Sequence[str] = (), include_text: bool = False) -> dict[str, Any]:
    """The page data for ``parts`` side by side (each part's own payload is built by ``build_payload``)."""
    if not parts:
        raise ValueError("a comparison needs at least one trace")
    payloads = [build_payload(p.trace, analysis=p.analysis, replay=p.replay, cache=p.cache, title=p.label,
                              include_text=include_text, notes=p.notes, cache_model=p.cache_model) for p in parts]
    return {
        "version": __version__,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "title": title,
        "compare": {
            "runs": [{"label": p.label, "about": p.about, "payload": pl} for p, pl in zip(parts, payloads, strict=True)],
            "table": comparison_table(payloads),
            "whatif": comparison_whatif(payloads),
            "notes": [str(n) for n in notes],
        },
    }


def render_compare(parts: Sequence[ComparePart], title: str = "agentprof comparison", notes: Sequence[str] = (),
                   include_text: bool = False) -> str:
    """One self-contained HTML page with ``parts`` side by side."""
    return render_payload(build_compare_payload(parts, title, notes, include_text))


def write_compare_report(path: str | os.PathLike[str], parts: Sequence[ComparePart],
                         title: str = "agentprof comparison", notes: Sequence[str] = (),
                         include_text: bool = False) -> Path:
    """Render the comparison page and write it to ``path`` (parent folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_compare(parts, title, notes, include_text), encoding="utf-8")
    return out
