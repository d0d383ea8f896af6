"""``agentprof analyze`` by partitions: each partition is imported and analyzed where it runs; the client
merges the per-partition results into the analysis a single process would have produced.

What merges how (a partition holds whole conversation lines, sub-agents with their parent):

- per-call, per-session and per-conversation tables: concatenated and put back in single-process order
  (sessions by import order, calls by line then time), so every per-row figure is the same;
- counts and token sums: recomputed from the merged rows, exact;
- distributions (medians, percentiles of prefix reuse and hit rates): recomputed from the merged per-call and
  per-conversation values, exact (no sketch);
- the time split: the same per-conversation splits added in the same order, so the same floating-point sums;
- failures and per-tool figures: recomputed from the failed and the tool spans of every partition in import
  order;
- diagnostics: every partition's (the same notes as a single run, in import order where it can be
  reconstructed; notes the kv-cache-tester importer counts per import batch of 64 files, such as requests
  without ``api_time``, come per partition batch: other lines, the same total).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from agentprof.analysis.analyzer import _call_diagnostics, _redundancy
from agentprof.analysis.failures import counted, failures
from agentprof.analysis.result import Analysis
from agentprof.analysis.timesplit import TimeSplit
from agentprof.analysis.tools import tool_figures, tool_spans
from agentprof.distributed.load import Hashing, partition_trace
from agentprof.distributed.partition import Unit
from agentprof.trace.schema import TraceMeta


@dataclass
class Part:
    """One partition's analysis, the import rank of each of its sessions and its failed spans."""

    analysis: Analysis
    ranks: dict[str, int]
    failed: pl.DataFrame
    files: list[str]
    load_diagnostics: list[dict[str, Any]]
    untimed: int
    hashing: Hashing
    tools: pl.DataFrame | None = None  # tool_spans rows with their session_id (per-tool figures, merged exactly)


def analyze_partition(part: list[Unit], given: list[str], skip_bad_lines: bool = False) -> Part:
    """Import and analyze one partition (runs on a Dask worker, or in the client when streaming)."""
    from agentprof.analysis import analyze

    trace, ranks, hashing = partition_trace(part, given, skip_bad_lines)
    a = analyze(trace)
    prof = a.profile
    if prof is not None and prof.attributed is not None:  # every function's sums, for an exact merge; the
        from agentprof.analysis.hotspots import hotspot_sums  # samples themselves stay on the worker

        prof.hotspots = hotspot_sums(prof.attributed)
        prof.attributed = None
    failed = counted(trace.spans).select("session_id", "kind", "status", "error_type", "start_ns", "end_ns",
                                         "attributes")
    untimed = trace.spans.filter(pl.col("start_ns").is_null() | pl.col("end_ns").is_null()).height
    tools = pl.concat([trace.spans.filter(pl.col("kind") == "tool").select("session_id"),
                       tool_spans(trace.spans)], how="horizontal")
    return Part(a, ranks, failed, [f for u in part for f in u.files], [d.to_dict() for d in trace.diagnostics],
                untimed, hashing, tools)


def _ordered(frame: pl.DataFrame, order: dict[str, int], col: str, part: int) -> pl.DataFrame:
    return frame.with_columns(pl.col(col).replace_strict(order, default=None, return_dtype=pl.Int64).alias("_o"),
                              pl.lit(part).alias("_p"), pl.int_range(pl.len(), dtype=pl.Int64).alias("_r"))


def merge(parts: list[Part], given: list[str], file_rank: dict[str, int],
          load_diagnostics: list[dict[str, Any]] | None = None) -> Analysis:
    """The single-process analysis from per-partition ones (see the module docstring)."""
    load_diagnostics = load_diagnostics or []
    parts = sorted(parts, key=lambda p: min(p.ranks.values(), default=1 << 62))
    if not parts:
        raise ValueError("nothing to merge")
    # sessions in import order: by their unit's rank, then as their partition listed them
    sess = pl.concat([_ordered(p.analysis.sessions, p.ranks, "session_id", i) for i, p in enumerate(parts)],
                     how="vertical_relaxed").sort("_o", "_p", "_r")
    order = {s: i for i, s in enumerate(sess.get_column("session_id").to_list())}
    sessions = sess.drop("_o", "_p", "_r")
    calls = pl.concat([_ordered(p.analysis.calls, order, "line_id", i) for i, p in enumerate(parts)],
                      how="vertical_relaxed").sort("_o", "_p", "_r").drop("_o", "_p", "_r")
    conv = pl.concat([_ordered(p.analysis.conversations, order, "conversation_id", i) for i, p in enumerate(parts)],
                     how="vertical_relaxed").sort("_o", "_p", "_r").drop("_o", "_p", "_r")
    # the time split: the same conversation splits, added in the same order as analyze() does
    splits: dict[str, TimeSplit] = {}
    for p in parts:
        splits.update(p.analysis.conversation_time)
    time = TimeSplit()
    summed: dict[str, TimeSplit] = {}
    for cid in sessions.filter(pl.col("is_top_level")).get_column("session_id").to_list():
        ts = splits.get(cid)
        if ts is not None:
            time.add(ts)
            summed[cid] = ts
    redundancy = _redundancy(calls, conv)
    redundancy["timed_conversations"] = len(summed)
    call_pos = {(s, c): i for i, (s, c) in enumerate(zip(calls.get_column("session_id").to_list(),
                                                        calls.get_column("span_id").to_list(), strict=True))}
    misses = sorted((m for p in parts for m in p.analysis.cache_misses),
                    key=lambda m: call_pos.get((m["session_id"], m["span_id"]), len(call_pos)))
    failed = pl.concat([_ordered(p.failed, order, "session_id", i) for i, p in enumerate(parts)],
                       how="vertical_relaxed").sort("_o", "_p", "_r").drop("_o", "_p", "_r")
    tool_rows = [_ordered(p.tools, order, "session_id", i) for i, p in enumerate(parts) if p.tools is not None]
    tools = tool_figures(pl.concat(tool_rows, how="vertical_relaxed").sort("_o", "_p", "_r")
                         .drop("_o", "_p", "_r", "session_id")) if tool_rows else []
    # diagnostics as analyze() orders them: the import's, sessions without calls, untimed spans, call checks
    diags: list[dict[str, Any]] = list(load_diagnostics)
    for p in parts:
        diags.extend(d for d in p.load_diagnostics if d not in load_diagnostics)
    for p in parts:  # found by the miss explainer, per session (a partition holds whole sessions)
        diags.extend(d for d in p.analysis.diagnostics if d.get("kind") == "new_conversation")
    for sid in sessions.filter(pl.col("model_calls") == 0).get_column("session_id").to_list():
        diags.append({"kind": "no_model_calls", "message": f"session {sid} has no model calls; only its time is "
                      "analyzed", "session_id": sid})
    untimed = sum(p.untimed for p in parts)
    if untimed:
        diags.append({"kind": "untimed_spans", "message": f"{untimed} spans have no start or end time and are left "
                      "out of the time split"})
    _call_diagnostics(calls, diags)
    n_conv = conv.height if conv.height else int(sessions.get_column("primary").sum() or 0)
    files = sorted({f for p in parts for f in p.files}, key=lambda f: file_rank.get(f, len(file_rank)))
    hashing = Hashing()
    for p in parts:
        hashing.add(p.hashing)
    meta = _meta([p.analysis.meta for p in parts], files, given, hashing)
    profile = _profile([p.analysis.profile for p in parts], time.orchestration_s if summed else None)
    return Analysis(meta, calls, sessions, conv, time, redundancy, misses, diags, n_conversations=n_conv,
                    failures=failures(failed), tools=tools, profile=profile, conversation_time=summed)


def _profile(profiles: list[Any], orchestration_s: float | None) -> Any:
    """The CPU-bound profile of the corpus from the partitions' (sessions never straddle partitions): CPU and
    busy seconds and per-tool figures summed, per-session gap figures united, per-span/gap units concatenated,
    hotspots summed per (place, function) from every partition's unranked sums and then ranked. Counts are
    exact; seconds are the same sums in another order (equal to rounding)."""
    from agentprof.analysis.hotspots import Profile, rank_hotspots

    present = [p for p in profiles if p is not None]
    if not present:
        return None
    cpu = _sum_known([p.orchestration_cpu_s for p in present])
    busy = _sum_known([p.orchestration_busy_s for p in present])
    merged = Profile(cpu, busy, orchestration_s if cpu is not None else None, sampled=any(p.sampled for p in present),
                     orchestration_cpu_err_s=_sum_known([p.orchestration_cpu_err_s for p in present]))
    for p in present:
        merged.gap_busy_s.update(p.gap_busy_s or {})
        merged.gap_wall_s.update(p.gap_wall_s or {})
    tools: dict[str, dict[str, Any]] = {}
    for p in present:
        for t in p.tools:
            m = tools.setdefault(t["tool"], {"tool": t["tool"], "calls": 0, "wall_s": 0.0, "cpu_s": 0.0, "busy_s": 0.0})
            for k in ("calls", "wall_s", "cpu_s", "busy_s"):
                m[k] += t[k]
    merged.tools = sorted(({**t, "cpu_bound_share": min(t["busy_s"] / t["wall_s"], 1.0) if t["wall_s"] > 0 else None}
                           for t in tools.values()), key=lambda t: -t["wall_s"])
    sums: dict[tuple[str, str, str], dict[str, Any]] = {}
    for p in present:
        for h in p.hotspots:
            k = (h["where"], h["frame"], h["file"])
            m = sums.get(k)
            if m is None:
                sums[k] = dict(h)
            else:
                for f in ("samples", "self_s", "total_s", "self_cpu_s", "total_cpu_s"):
                    m[f] += h[f]
    merged.hotspots = rank_hotspots(list(sums.values()))
    units = [p.units for p in present if p.units is not None and p.units.height]
    if units:
        merged.units = pl.concat(units, how="vertical_relaxed").sort("start_ns", nulls_last=True)
    return merged


def _sum_known(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _meta(metas: list[TraceMeta], files: list[str], given: list[str], hashing: Hashing) -> TraceMeta:
    """The corpus meta as the import's merge builds it (formats, tokenizer, hash schemes), from the
    partitions' metas in import order."""
    first = metas[0]
    formats = sorted({f for m in metas for f in (m.extra.get("formats") or [m.source_format])})

    extra: dict[str, Any] = {}
    for m in metas:
        for k, v in m.extra.items():
            extra.setdefault(k, v)
    schemes = sorted({s for m in metas for s in (m.extra.get("hash_schemes") or [m.extra.get("hash_scheme", "agentprof")])})
    if len(schemes) > 1:
        extra["hash_scheme"] = "mixed"
        extra["hash_schemes"] = schemes
    exact_for = sorted({x for m in metas for x in m.extra.get("tokenizer_exact_for") or []})
    if exact_for:
        extra["tokenizer_exact_for"] = exact_for
    extra["formats"] = formats
    if hashing.tokenizer and hashing.hashed_prompts:
        tokenizer, exact = hashing.tokenizer, not hashing.inexact_models
    else:
        tokenizer, exact = first.tokenizer, first.tokenizer_exact
    return replace(first, source_format=formats[0] if len(formats) == 1 else "mixed", tokenizer=tokenizer,
                   tokenizer_exact=exact,
                   sources=files, name=Path(given[0]).name if len(given) == 1 else "import",
                   capture_overhead_ns=_summed([m.capture_overhead_ns for m in metas]),
                   capture_background_cpu_ns=_summed([m.capture_background_cpu_ns for m in metas]), extra=extra)


def _summed(values: list[int | None]) -> int | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None
