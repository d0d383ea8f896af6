"""Panels drawn from stage results (analysis, cache simulation, replay): each adapter reads a result's
``to_dict()`` / DataFrame and returns ``{"status": "ok", ...}`` or ``{"status": "missing", "reason": ...}``.
They only reshape; every figure comes from the stage that computed it."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

MAX_MISSES = 200


def _missing(reason: str) -> dict[str, Any]:
    return {"status": "missing", "reason": reason}


def _first(d: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    return None


def _col(df: pl.DataFrame, *names: str) -> str | None:
    for n in names:
        if n in df.columns:
            return n
    return None


def _round(values: list[Any], digits: int = 4) -> list[Any]:
    return [round(v, digits) if isinstance(v, float) and math.isfinite(v) else (v if isinstance(v, int) else None)
            for v in values]


# ---------------------------------------------------------------- redundancy (analysis)
def redundancy_panel(analysis: Any, a: dict[str, Any] | None, labels: dict[str, str],
                     note: str | None = None) -> dict[str, Any]:
    """Per-call reusable vs provider-cached shares per session, the corpus summary and the explained misses.

    Call numbers are 1-based (``call_index + 1``) everywhere in the report.
    """
    if a is None:
        return _missing(note or "the analysis stage was not run, so per-call redundancy is not in this report")
    red = a.get("redundancy") or {}
    out: dict[str, Any] = {
        "status": "ok",
        "summary": {k: red.get(k) for k in ("prefix_reuse_prev", "session_hit_rate", "provider_cache_read_share")
                    if isinstance(red.get(k), dict)},
        "conversations": a.get("conversations"),
        "n_calls": a.get("model_calls"),
        "sessions": [],
    }
    calls = getattr(analysis, "calls", None)
    if isinstance(calls, pl.DataFrame) and calls.height:
        out["sessions"] = _per_call_series(calls, labels)
        if not out["sessions"]:
            out["sessions_reason"] = "no model call has prompt hashes or provider cache counts to compare"
    else:
        out["sessions_reason"] = "per-call figures need the analysis result object (its per-call table), not only its JSON"
    misses = [m for m in (a.get("cache_misses") or []) if isinstance(m, dict)]
    out["n_misses"] = len(misses)
    out["misses"] = [_miss_row(m, labels) for m in misses[:MAX_MISSES]]
    return out


def _per_call_series(calls: pl.DataFrame, labels: dict[str, str]) -> list[dict[str, Any]]:
    """One series set per session: x = call number, shares of the prompt, prompt size and miss markers."""
    need = {"session_id", "call_index"}
    if not need <= set(calls.columns):
        return []
    cols = {"reusable": _col(calls, "best_reuse"), "reuse_prev": _col(calls, "prefix_reuse_prev"),
            "cached": _col(calls, "provider_cache_read_share"), "input": _col(calls, "prompt_tokens", "input_tokens")}
    cause = _col(calls, "miss_cause")
    out = []
    for (sess,), g in calls.group_by("session_id", maintain_order=True):
        g = g.sort("call_index")
        series = {k: g.get_column(c).cast(pl.Float64, strict=False).to_list() for k, c in cols.items() if c}
        if not any(any(v is not None for v in series.get(k, [])) for k in ("reusable", "reuse_prev", "cached")):
            continue
        entry: dict[str, Any] = {"id": sess, "label": labels.get(sess, sess),
                                 "x": [i + 1 for i in g.get_column("call_index").to_list()]}
        for k, v in series.items():
            entry[k] = [int(x) if x is not None else None for x in v] if k == "input" else _round(v)
        # the prompt-size bars' unit: agentprof's offline estimate, or the provider's count when that is all
        entry["input_unit"] = "estimated" if cols["input"] == "prompt_tokens" else "as the provider reported"
        if cause:
            entry["misses"] = [{"index": i, "cause": c} for i, c in enumerate(g.get_column(cause).to_list()) if c]
        out.append(entry)
    out.sort(key=lambda e: -len(e["x"]))
    return out


def _miss_row(m: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    sess = m.get("session_id") or ""
    causes = [c for c in (m.get("causes") or []) if isinstance(c, dict)]
    top = max(causes, key=lambda c: c.get("score") or 0) if causes else {}
    loc = m.get("location") if isinstance(m.get("location"), dict) else {}
    where = loc.get("where")
    block = m.get("first_diverging_block")
    if block is not None:
        where = f"{where}, block {block}" if where else f"block {block}"
    call = m.get("call_index")
    return {
        "session": labels.get(sess, sess),
        "call": call + 1 if isinstance(call, int) else None,
        "cause": str(top.get("cause") or (m.get("trigger") or ["unexplained"])[0]).replace("_", " "),
        "others": [str(c.get("cause")).replace("_", " ") for c in causes if c is not top][:3],
        "where": where,
        "prompt_tokens": m.get("prompt_tokens"),
        "reusable_tokens": m.get("reusable_tokens"),
        "cached_tokens": m.get("cached_tokens"),
        "detail": top.get("detail"),
        "fix": top.get("fix"),
    }


# ---------------------------------------------------------------- cache (cachesim capacity sweeps)
def cache_panel(sweeps: Any, note: str | None = None, model: str | None = None) -> dict[str, Any]:
    """Hit rate against capacity from one or more capacity sweeps (``[(label, SweepResult), ...]``)."""
    if not sweeps:
        return _missing(note or "no cache simulation was run (pass --model to choose the model whose KV size to use)")
    if not isinstance(sweeps, (list, tuple)):
        sweeps = [("prefix cache (LRU)", sweeps)]
    curves = []
    unlimited = None
    for label, sw in sweeps:
        d = sw.to_dict() if hasattr(sw, "to_dict") else sw
        if not isinstance(d, dict):
            continue
        pts = [p for p in d.get("points") or [] if isinstance(p, dict) and (p.get("capacity_bytes") or 0) > 0]
        if not pts:
            continue
        u = _num(d.get("unlimited_hit_rate"))
        unlimited = u if unlimited is None else unlimited
        curves.append({"name": str(label), "capacity_bytes": [float(p["capacity_bytes"]) for p in pts],
                       "hit_rate": _round([_num(p.get("hit_rate")) for p in pts]),
                       "knee_bytes": _num(d.get("capacity_at_target_bytes")), "unlimited": u,
                       "chunk_bytes": d.get("chunk_bytes")})
    if not curves:
        return _missing(note or "the cache simulation produced no capacity points (no prompt hashes?)")
    return {"status": "ok", "model": model, "tiers": curves, "unlimited_hit_rate": unlimited,
            "note": note}


# ---------------------------------------------------------------- device what-if (replay)
def whatif_panel(r: dict[str, Any] | None, note: str | None = None,
                 headline: dict[str, Any] | None = None) -> dict[str, Any]:
    """Recorded run and each system as stacked model / tool / orchestration / wait seconds with speed-ups; the
    Amdahl bound drawn on it is the headline's (one figure under that name in the whole report)."""
    if r is None:
        return _missing(note or "no replay was run (pass --system to compare serving systems)")
    rows = []
    recorded = r.get("recorded") if isinstance(r.get("recorded"), dict) else None
    for row in ([recorded] if recorded else []) + [s for s in r.get("systems") or [] if isinstance(s, dict)]:
        rows.append({
            "name": str(row.get("name") or "?"),
            "display": row.get("display"),
            "e2e_s": _num(row.get("e2e_s")),
            "model_s": _num(row.get("model_s")),
            "orchestration_s": _num(row.get("orchestration_s")),
            "tool_s": _num(row.get("tool_s")),
            "wait_s": _num(row.get("wait_s")),
            "speedup": _num(row.get("speedup_vs_recorded")),
            "model_speedup": _num(row.get("model_calls_speedup")),
            "error": row.get("error"),
            "waiting_for": {str(k): _num(v) for k, v in (row.get("waiting_for") or {}).items()},
            "model_calls_s": _num(row.get("model_calls_s")),
            "band": {k: [_num(x) for x in v] for k, v in (row.get("band") or {}).items()
                     if k in ("e2e_s", "model_calls_s", "speedup_vs_recorded") and isinstance(v, list)},
            "band_ranged": [str(x) for x in (row.get("band") or {}).get("ranged") or []],
            "band_evidence": {str(k): str(v) for k, v in ((row.get("band") or {}).get("evidence") or {}).items()},
        })
    if not rows:
        return _missing(note or "the replay result lists no systems")
    notes = grouped_standins([str(v) for v in (r.get("standins") or {}).values()]) + \
        [str(n) for n in r.get("notes") or []]
    if note:
        notes.insert(0, note)
    hl = headline or {}
    bound = _num(hl.get("amdahl_bound_s")) if hl.get("amdahl_bound_s") is not None \
        else _num((recorded or {}).get("amdahl_e2e_s"))
    ratio = _num(hl.get("max_speedup")) if hl.get("amdahl_bound_s") is not None \
        else _num((recorded or {}).get("amdahl_bound"))
    return {"status": "ok", "rows": rows, "amdahl_bound_s": bound, "amdahl_ratio": ratio,
            "cache_policy": r.get("cache_policy"), "notes": notes}


def grouped_standins(lines: list[str]) -> list[str]:
    """Stand-in notes that differ only in the traced model ("A replayed as K (why)", "B replayed as K (why)") as
    one ("A, B (2 models) replayed as K (why)"), in first-seen order: ``replay``'s terminal and the report alike."""
    groups: dict[str, list[str]] = {}
    for line in lines:
        head, sep, tail = line.partition(" replayed as ")
        groups.setdefault(sep + tail if sep else line, []).append(head if sep else "")
    out = []
    for tail, heads in groups.items():
        named = [h for h in heads if h]
        if not tail.startswith(" replayed as "):
            out.append(tail)
        else:
            out.append(", ".join(named) + (f" ({len(named)} models)" if len(named) > 1 else "") + tail)
    return out


# ---------------------------------------------------------------- corpus view
def corpus_panel(spans: pl.DataFrame, a: dict[str, Any] | None, fig: dict[str, Any]) -> dict[str, Any] | None:
    """Distributions across top-level sessions (only for a corpus of two or more): from the analysis'
    per-session table when given, else figures read off the span table."""
    n = fig.get("top_sessions", 0)
    if n < 2:
        return None
    per = [p for p in ((a or {}).get("per_session") or []) if isinstance(p, dict)]
    top = [p for p in per if p.get("is_top_level", not p.get("parent_session_id"))]
    metrics: list[dict[str, Any]] = []
    if top:
        def series(key: str) -> list[float | None]:
            return [_num(p.get(key)) for p in top]

        wall, model = series("wall_s"), series("model_s")
        share = [m / w if m is not None and w else None for m, w in zip(model, wall, strict=True)]
        candidates = [
            ("wall_s", "Wall time per session", "s", wall, "#4a5563"),
            ("model_share", "Model share of wall time", "share", share, "#0072b2"),
            ("session_hit_rate", "Per-conversation hit rate (kv-cache-tester)", "share", series("session_hit_rate"),
             "#009e73"),
            ("prefix_reuse_prev", "Mean prompt share equal to the previous", "share",
             series("prefix_reuse_prev_mean"), "#56b4e9"),
            ("read_share", "Provider cache read share per session", "share",
             series("provider_cache_read_share_weighted"),
             "#56b4e9"),
        ]
        metrics = [{"key": k, "label": lab, "unit": u, "values": v, "color": c}
                   for k, lab, u, v, c in candidates if any(x is not None for x in v)]
    keys = {m["key"] for m in metrics}
    metrics += [m for m in _trace_metrics(spans) if m["key"] not in keys]
    for m in metrics:
        m["values"] = _round(m["values"])
    return {"status": "ok", "n_sessions": n, "metrics": metrics[:6]}


def _trace_metrics(spans: pl.DataFrame) -> list[dict[str, Any]]:
    """Per top-level session figures read off the span table: wall, calls, largest prompt, provider cache share."""
    ids = spans.get_column("session_id").unique().to_list()
    per = spans.select("session_id", "parent_session_id", "start_ns", "end_ns", "kind", "input_tokens",
                       "cache_read_tokens").group_by("session_id").agg(
        pl.col("parent_session_id").drop_nulls().first().alias("parent"),
        ((pl.col("end_ns").max() - pl.col("start_ns").min()) / 1e9).alias("wall_s"),
        (pl.col("kind") == "model").sum().alias("calls"),
        pl.col("input_tokens").filter(pl.col("kind") == "model").max().alias("max_in"),
        (pl.col("cache_read_tokens").filter(pl.col("kind") == "model").sum()
         / pl.col("input_tokens").filter((pl.col("kind") == "model") & pl.col("cache_read_tokens").is_not_null()).sum()
         ).alias("read_share"),
    ).filter(pl.col("parent").is_null() | ~pl.col("parent").is_in(ids)).sort("session_id")
    out = [
        {"key": "wall_s", "label": "Wall time per session", "unit": "s", "values": per.get_column("wall_s").to_list(),
         "color": "#4a5563"},
        {"key": "calls", "label": "Model calls per session", "unit": "count",
         "values": [float(v) for v in per.get_column("calls").to_list()], "color": "#0072b2"},
    ]
    if per.get_column("max_in").drop_nulls().len():
        out.append({"key": "max_in", "label": "Largest prompt per session (tokens)", "unit": "count",
                    "values": [float(v) if v is not None else None for v in per.get_column("max_in").to_list()],
                    "color": "#e69f00"})
    if per.get_column("read_share").drop_nulls().drop_nans().len():
        out.append({"key": "read_share", "label": "Provider cache read share per session", "unit": "share",
                    "values": per.get_column("read_share").to_list(), "color": "#56b4e9"})
    return out
