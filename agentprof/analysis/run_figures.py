"""The figures ``agentprof diff`` compares, for one side: one value per run, and the per-call / per-span
samples the figures are made of.

A **run** is a top-level conversation (a captured ``agentprof.profile`` run, one Claude Code session with its
sub-agents, …). Per run: wall and agent-active time, the critical-path buckets (model, tool, parse,
orchestration, each wait reason; ``docs/ANALYSIS.md``), each tool's summed span time, model calls and tokens,
mean prefix reuse per call, the token-weighted provider cache share, and the median TTFT and output rate of
its calls. Samples pool the spans and calls of every run (a model call's duration, a tool call's duration, a
call's reuse, …); figures that exist only once per run (wall, agent-active, orchestration, call count) have
none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from agentprof import semconv as sc
from agentprof.analysis.active import agent_active_s, waits_by_reason
from agentprof.analysis.analyzer import analyze
from agentprof.analysis.result import Analysis
from agentprof.analysis.timesplit import session_splits
from agentprof.analysis.tools import tool_name
from agentprof.trace.schema import Trace

Key = tuple[str, str]
"""(metric, scope): scope ``task`` (per run), ``call`` (per model call, summarised per run), ``tool:NAME``,
``wait:REASON``."""

TASK_TIMES = ("wall_s", "agent_active_s", "model_s", "tool_s", "parse_s", "orchestration_s")


@dataclass
class SideFigures:
    """One side of a diff: its runs, one value per run for every figure, and pooled per-call/span samples."""

    runs: list[str]  # run (top-level conversation) ids, in start order
    per_run: dict[Key, np.ndarray]  # figure -> one value per run (NaN where the run has nothing to measure)
    samples: dict[Key, np.ndarray]  # figure -> per call / per span values pooled over the runs
    sample_unit: dict[Key, str]  # figure -> "calls" or "spans"
    analysis: Analysis
    untimed_runs: list[str] = field(default_factory=list)

    def value(self, key: Key) -> float | None:
        """The side's figure: the median over its runs (None when no run measures it)."""
        v = self.per_run.get(key)
        if v is None:
            return None
        v = v[np.isfinite(v)]
        return float(np.median(v)) if v.size else None


def _per_run(df: pl.DataFrame, by: str, value: pl.Expr, runs: list[str], fill: float) -> np.ndarray:
    """``value`` aggregated per run (``df[by]`` holds the run id); runs without rows get ``fill``."""
    if df.height == 0:
        return np.full(len(runs), fill)
    g = dict(df.group_by(by).agg(value.alias("_v")).iter_rows())
    return np.array([float(g[r]) if g.get(r) is not None else fill for r in runs], dtype=np.float64)


def side_figures(trace: Trace, analysis: Analysis | None = None) -> SideFigures:
    """Every figure of one side, per run and as samples (see the module docstring)."""
    a = analysis if analysis is not None else analyze(trace)
    spans = trace.spans
    sessions = a.sessions
    top = sessions.filter(pl.col("is_top_level")) if sessions.height else sessions
    _, conv = session_splits(spans, sessions.select("session_id", "conversation_id")) if sessions.height \
        else (None, {})
    starts = dict(spans.group_by("session_id").agg(pl.col("start_ns").min()).iter_rows()) if spans.height else {}
    runs = sorted(top.get_column("session_id").to_list() if top.height else [],
                  key=lambda s: (starts.get(s) is None, starts.get(s) or 0, s))
    per_run: dict[Key, np.ndarray] = {}
    samples: dict[Key, np.ndarray] = {}
    unit: dict[Key, str] = {}
    untimed = [r for r in runs if not conv.get(r) or not conv[r].timed]

    # time: critical-path buckets and wait reasons per run
    times = [conv[r].to_dict() if r in conv and conv[r].timed else None for r in runs]
    for k in TASK_TIMES:
        per_run[(k, "task")] = np.array([np.nan if t is None else (agent_active_s(t) if k == "agent_active_s"
                                                                    else float(t[k])) for t in times])
    reasons = sorted({r for t in times if t for r in waits_by_reason(t)})
    for reason in reasons:
        per_run[("wait_s", f"wait:{reason}")] = np.array(
            [np.nan if t is None else waits_by_reason(t).get(reason, 0.0) for t in times])

    # spans, each with its run (conversation) id
    conv_of = sessions.select("session_id", pl.col("conversation_id").alias("_run"))
    timed = (spans.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
             .join(conv_of, on="session_id", how="left")
             .with_columns(((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("_dur")))
    for kind, metric in (("model", "model_s"), ("tool", "tool_s"), ("parse", "parse_s")):
        d = timed.filter(pl.col("kind") == kind)
        samples[(metric, "task")] = d.get_column("_dur").to_numpy()
        unit[(metric, "task")] = "spans"
    waits = timed.filter(pl.col("kind") == "wait").with_columns(
        pl.col("attributes").str.json_path_match(f"$['{sc.WAIT_REASON}']").fill_null("unspecified").alias("_reason"))
    for reason in reasons:
        samples[("wait_s", f"wait:{reason}")] = waits.filter(pl.col("_reason") == reason).get_column("_dur").to_numpy()
        unit[("wait_s", f"wait:{reason}")] = "spans"
    tools = timed.filter(pl.col("kind") == "tool").with_columns(tool_name().alias("_tool"))
    for name in sorted(set(tools.get_column("_tool").drop_nulls().to_list())):
        t = tools.filter(pl.col("_tool") == name)
        key = ("tool_time_s", f"tool:{name}")
        per_run[key] = _per_run(t, "_run", pl.col("_dur").sum(), runs, 0.0)
        samples[key] = t.get_column("_dur").to_numpy()
        unit[key] = "spans"

    # model calls: counts, tokens, reuse, provider cache, TTFT and output rate
    calls = a.calls.rename({"conversation_id": "_run"}) if a.calls.height else \
        pl.DataFrame(schema={"_run": pl.Utf8})
    per_run[("model_calls", "task")] = _per_run(calls, "_run", pl.len(), runs, 0.0)
    if a.calls.height:
        ok = calls.filter(pl.col("status") != "error")
        dur = (pl.col("end_ns") - pl.col("start_ns")) / 1e9
        rate = (pl.when((pl.col("ttft_s").is_not_null()) & (dur - pl.col("ttft_s") > 0) & (pl.col("output_tokens") > 0))
                .then(pl.col("output_tokens") / (dur - pl.col("ttft_s"))).otherwise(None))
        ok = ok.with_columns(rate.alias("_rate"))
        for metric, col in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
            per_run[(metric, "task")] = _per_run(calls, "_run", pl.col(col).sum(), runs, 0.0)
            samples[(metric, "task")] = calls.get_column(col).drop_nulls().cast(pl.Float64).to_numpy()
            unit[(metric, "task")] = "calls"
        figures = (
            (("prefix_reuse", "call"), "prefix_reuse_prev", calls, pl.col("prefix_reuse_prev").mean()),
            (("provider_cache_share", "task"), "provider_cache_read_share", calls,
             pl.col("cache_read_tokens").sum() / pl.col("input_tokens").filter(
                 pl.col("cache_read_tokens").is_not_null()).sum()),
            (("ttft_s", "call"), "ttft_s", ok, pl.col("ttft_s").median()),
            (("output_tokens_per_s", "call"), "_rate", ok, pl.col("_rate").median()),
        )
        for key, col, frame, agg in figures:
            s = frame.get_column(col).drop_nulls().cast(pl.Float64).to_numpy()
            s = s[np.isfinite(s)]
            if s.size == 0:
                continue
            per_run[key] = _per_run(frame, "_run", agg, runs, np.nan)
            samples[key] = s
            unit[key] = "calls"
    return SideFigures(runs, per_run, samples, unit, a, untimed)


def miss_causes(a: Analysis) -> dict[str, list[dict[str, Any]]]:
    """The analysis' cache misses grouped by their top-ranked cause."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in a.cache_misses:
        causes = m.get("causes") or []
        if causes:
            out.setdefault(causes[0]["cause"], []).append(m)
    return out
