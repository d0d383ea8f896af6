"""The report's data: the trace and whichever stage results exist, reduced to one compact JSON-safe dict
(columnar arrays, string tables) that the page script draws. Prompt text only with ``include_text``."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from agentprof import __version__
from agentprof.analysis.failures import failures
from agentprof.analysis.result import capture_cost
from agentprof.report import results
from agentprof.report.answer import answer
from agentprof.report.gaps import trace_gaps
from agentprof.report.headline import headline, trace_figures
from agentprof.report.slowest import slow_calls, slow_tools
from agentprof.report.timeline import DEFAULT_MAX_SPANS, build_timeline
from agentprof.trace import Trace

_ABSOLUTE_AFTER_NS = 10**17  # 1973: earlier "times" are offsets from a session start, not dates
_STAGE_NAMES = {"analysis": "Analysis", "cache": "Cache simulation", "replay": "Replay", "serving": "Serving"}


def as_dict(result: Any) -> dict[str, Any] | None:
    """A stage result as its ``to_dict()`` (dicts pass through; ``None`` stays ``None``)."""
    if result is None or isinstance(result, dict):
        return result
    to_dict = getattr(result, "to_dict", None)
    return to_dict() if callable(to_dict) else None


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _basename(p: str) -> str:
    return p.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def build_payload(trace: Trace, analysis: Any = None, replay: Any = None, cache: Any = None, *,
                  title: str | None = None, include_text: bool = False, notes: dict[str, str] | None = None,
                  max_spans: int = DEFAULT_MAX_SPANS, cache_model: str | None = None,
                  serving: dict[str, Any] | None = None, measured: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-safe data (see ``docs/REPORT.md`` for the layout).

    ``cache`` is a capacity sweep or a list of ``(label, sweep)``; ``cache_model`` names the model whose KV
    size the sweep used. ``notes`` explain missing or defaulted stages (``analysis``, ``cache``, ``replay``).
    ``measured`` is the load-test panel (:func:`agentprof.report.measured.panel`), shown only when given.
    """
    notes = dict(notes or {})
    spans = trace.spans
    fig = trace_figures(spans)
    a = as_dict(analysis)
    r = as_dict(replay)
    tl = build_timeline(spans, max_spans=max_spans, include_text=include_text)
    t0 = int(tl["t0_ns"]) if tl["t0_ns"] is not None else None
    # sources without absolute times (kv-cache-tester) start at epoch 0: show no date for them
    tl["t0_iso"] = _iso(t0) if t0 is not None and t0 >= _ABSOLUTE_AFTER_NS else None
    labels = {s["id"]: s["label"] for s in tl["sessions"]}
    starts = tl["spans"]["start"]  # sorted: shipped as differences, which are short numbers
    tl["spans"]["start_delta"] = [b - a for a, b in zip([0, *starts], starts, strict=False)]
    del tl["spans"]["start"]
    meta = trace.meta
    name = title or meta.name or (_basename(meta.sources[0]) if meta.sources else "") or "agent trace"
    missing = trace_gaps(fig)
    given = {"analysis": a is not None, "cache": bool(cache), "replay": r is not None, "serving": serving is not None}
    for stage, why in notes.items():
        if not given.get(stage, False):  # notes on stages that ran are shown in their panel instead
            missing.append(f"{_STAGE_NAMES.get(stage, stage)}: {why}")
    hl = headline(fig, a, r)
    whatif = results.whatif_panel(r, notes.get("replay"), hl)
    payload: dict[str, Any] = {
        "version": __version__,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "title": name,
        "meta": {
            "source_format": meta.source_format,
            "sources": [_basename(s) for s in meta.sources][:50],
            "n_sources": len(meta.sources),
            "tokenizer": meta.tokenizer,
            "tokenizer_exact": meta.tokenizer_exact,
            "block_size": meta.block_size,
            "capture": capture_cost(meta, hl.get("wall_s")),  # = the analysis' capture_overhead: same wall
            "first_start": _iso(int(fig["first_start_ns"])) if fig.get("first_start_ns") else None,
        },
        "headline": hl,
        "answer": answer(hl, whatif, spans, _catalog() if whatif.get("status") == "ok" else None),
        "missing": missing,
        "diagnostics": {"count": len(trace.diagnostics),
                        "first": [d.message for d in trace.diagnostics[:3]]},
        "timeline": tl,
        "slow": {"tools": slow_tools(spans, figures=(a or {}).get("tools")), "calls": slow_calls(spans, labels, t0), "failures": (a or {}).get("failures") or failures(spans)},
        "redundancy": results.redundancy_panel(analysis, a, labels, notes.get("analysis")),
        "cache": results.cache_panel(cache, notes.get("cache"), cache_model),
        "whatif": whatif,
        "serving": ({"status": "ok", **serving} if serving else
                    {"status": "missing", "reason": notes.get("serving") or "no serving simulation in this report"}),
        "corpus": results.corpus_panel(spans, a, fig),
        "flame": _flame(trace, analysis),
    }
    if measured is not None:
        payload["measured"] = measured
    return payload


def _catalog() -> Any:
    """The hardware catalog, for the plain names of a band's estimates (None when it cannot be read)."""
    try:
        from agentprof.catalog.hardware import load_catalog

        return load_catalog()
    except Exception:
        return None


def _flame(trace: Trace, analysis: Any) -> dict[str, Any] | None:
    """Sampled stacks as icicle trees (None when the trace has no samples)."""
    if trace.samples is None:
        return None
    from agentprof.report.flame import flame_data

    prof = getattr(analysis, "profile", None)
    return flame_data(trace, getattr(prof, "attributed", None))
