"""The figures ``agentprof diff`` compares, for one side: one value per run, and the per-call / per-span
samples the figures are made of.

A **run** is a top-level conversation (a captured ``agentprof.profile`` run, one Claude Code session with its
sub-agents, …). Per run: wall and agent-active time, the critical-path buckets (model, tool, parse,
orchestration, each wait reason; ``docs/ANALYSIS.md``), each tool's summed span time, model calls and tokens,
mean prefix reuse per call and the token-weighted provider cache share; ``cpu_wait_s``, the time the agent's
thread was runnable but waiting for a CPU (Linux schedstat, recorded by ``agentprof.profile``), tells how
loaded the machine was (scope ``task``), and per group of spans how much of a figure load can explain
(:func:`cpu_waits`).

Per call (``calls``): each tool's call durations (``call_s``, ``tool:NAME``), each model's call durations,
time to first token and output rate (``call_s`` / ``ttft_s`` / ``output_tokens_per_s``, ``model:NAME``), parse
spans (``call_s``, ``parse``), each wait reason's spans (``call_s``, ``wait:REASON``) and the orchestration
gaps of the agent's own loop (``call_s``, ``gap``), each value with the run it belongs to. Prefix reuse and
the provider cache share also keep their per-call values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from agentprof import semconv as sc
from agentprof.analysis.active import agent_active_s, waits_by_reason
from agentprof.analysis.analyzer import analyze
from agentprof.analysis.hotspots import session_gaps, span_cpu_wait_s
from agentprof.analysis.result import Analysis
from agentprof.analysis.timesplit import session_splits
from agentprof.analysis.tools import tool_name
from agentprof.trace.schema import Trace

Key = tuple[str, str]
"""(metric, scope): scope ``task`` (per run), ``call`` (per model call, summarised per run), ``tool:NAME``,
``wait:REASON``, ``model:NAME``, ``parse``, ``gap``."""

TASK_TIMES = ("wall_s", "agent_active_s", "model_s", "tool_s", "parse_s", "orchestration_s")


@dataclass
class SideFigures:
    """One side of a diff: its runs, one value per run for every figure, and per-call samples with their runs.

    A side read from a stored baseline (:mod:`agentprof.analysis.baseline`) has no ``analysis``; ``info`` and
    ``causes`` carry what the comparison needs of it."""

    runs: list[str]  # run (top-level conversation) ids, in start order
    per_run: dict[Key, np.ndarray]  # figure -> one value per run (NaN where the run has nothing to measure)
    samples: dict[Key, np.ndarray]  # figure -> per call / per span values of every run
    sample_unit: dict[Key, str]  # figure -> "calls" or "spans"
    analysis: Analysis | None = None
    untimed_runs: list[str] = field(default_factory=list)
    sample_runs: dict[Key, np.ndarray] = field(default_factory=dict)  # figure -> each sample's run (index in runs)
    info: dict[str, Any] = field(default_factory=dict)  # model calls, sessions, cache misses (for display)
    causes: dict[str, int] = field(default_factory=dict)  # top-ranked cache-miss cause -> misses

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
    sample_runs: dict[Key, np.ndarray] = {}
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
    run_index = {r: i for i, r in enumerate(runs)}
    conv_of = sessions.select("session_id", pl.col("conversation_id").alias("_run"))
    timed = (spans.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
             .join(conv_of, on="session_id", how="left")
             .with_columns(((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("_dur")))

    def add_samples(key: Key, frame: pl.DataFrame, col: str, what: str) -> None:
        """Per-call values of ``frame[col]`` that belong to a run, with their run's index."""
        f = frame.select(pl.col(col).cast(pl.Float64), pl.col("_run").replace_strict(
            run_index, default=None, return_dtype=pl.Int64).alias("_ri")).drop_nulls()
        v = f.get_column(col).to_numpy()
        ok = np.isfinite(v)
        if ok.any():
            samples[key], sample_runs[key] = v[ok], f.get_column("_ri").to_numpy()[ok]
            unit[key] = what

    add_samples(("call_s", "parse"), timed.filter(pl.col("kind") == "parse"), "_dur", "spans")
    waits = timed.filter(pl.col("kind") == "wait").with_columns(
        pl.col("attributes").str.json_path_match(f"$['{sc.WAIT_REASON}']").fill_null("unspecified").alias("_reason"))
    for reason in reasons:
        add_samples(("call_s", f"wait:{reason}"), waits.filter(pl.col("_reason") == reason), "_dur", "spans")
    tools = timed.filter(pl.col("kind") == "tool").with_columns(tool_name().alias("_tool"))
    for name in sorted(set(tools.get_column("_tool").drop_nulls().to_list())):
        t = tools.filter(pl.col("_tool") == name)
        per_run[("tool_time_s", f"tool:{name}")] = _per_run(t, "_run", pl.col("_dur").sum(), runs, 0.0)
        add_samples(("call_s", f"tool:{name}"), t, "_dur", "calls")
    gaps = session_gaps(spans)
    if gaps.height:
        gaps = gaps.join(conv_of, on="session_id", how="left").with_columns(
            ((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("_dur"))
        add_samples(("call_s", "gap"), gaps, "_dur", "gaps")

    # model calls: counts, tokens, reuse, provider cache; per model: duration, TTFT and output rate
    calls = a.calls.rename({"conversation_id": "_run"}) if a.calls.height else \
        pl.DataFrame(schema={"_run": pl.Utf8})
    per_run[("model_calls", "task")] = _per_run(calls, "_run", pl.len(), runs, 0.0)
    if a.calls.height:
        dur = (pl.col("end_ns") - pl.col("start_ns")) / 1e9
        rate = (pl.when((pl.col("ttft_s").is_not_null()) & (dur - pl.col("ttft_s") > 0) & (pl.col("output_tokens") > 0))
                .then(pl.col("output_tokens") / (dur - pl.col("ttft_s"))).otherwise(None))
        ok = calls.filter(pl.col("status") != "error").with_columns(
            rate.alias("_rate"), dur.alias("_dur"), pl.col("model").fill_null("unknown").alias("_model"))
        for metric, col in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
            per_run[(metric, "task")] = _per_run(calls, "_run", pl.col(col).sum(), runs, 0.0)
        figures = (
            (("prefix_reuse", "call"), "prefix_reuse_prev", pl.col("prefix_reuse_prev").mean()),
            (("provider_cache_share", "task"), "provider_cache_read_share",
             pl.col("cache_read_tokens").sum() / pl.col("input_tokens").filter(
                 pl.col("cache_read_tokens").is_not_null()).sum()),
        )
        for key, col, agg in figures:
            add_samples(key, calls, col, "calls")
            if key in samples:
                per_run[key] = _per_run(calls, "_run", agg, runs, np.nan)
        for model in sorted(set(ok.get_column("_model").to_list())):
            m = ok.filter(pl.col("_model") == model)
            for metric, col in (("call_s", "_dur"), ("ttft_s", "ttft_s"), ("output_tokens_per_s", "_rate")):
                add_samples((metric, f"model:{model}"), m, col, "calls")
    models = dict(ok.select("span_id", "_model").iter_rows()) if a.calls.height else {}
    per_run.update(cpu_waits(trace, conv_of, runs, models))
    info = {"sessions": a.n_sessions, "model_calls": a.n_model_calls, "misses": len(a.cache_misses),
            "untimed_runs": len(untimed)}
    causes = {k: len(v) for k, v in miss_causes(a).items()}
    return SideFigures(runs, per_run, samples, unit, a, untimed, sample_runs, info, causes)


def cpu_waits(trace: Trace, conv_of: pl.DataFrame, runs: list[str], models: dict[str, str]
              ) -> dict[Key, np.ndarray]:
    """Per run, the time spans waited for a CPU (``cpu_wait_s``), for each group of spans a figure is made of:
    ``task`` (the runs' roots: the agent thread over the whole run, how loaded the machine was), ``tool``,
    ``model``, ``parse``, ``wait`` (outermost spans of the kind), ``tool:NAME``, ``model:NAME``,
    ``wait:REASON`` and ``gap`` (the roots' wait outside the spans directly under them). A group whose spans
    in a run have no measured wait is NaN there (:func:`~agentprof.analysis.hotspots.span_cpu_wait_s`)."""
    spans = trace.spans
    if spans.height == 0:
        return {}
    w = spans.select(
        "span_id", "parent_id", "kind", tool_name().alias("_tool"),
        pl.col("attributes").str.json_path_match(f"$['{sc.WAIT_REASON}']").fill_null("unspecified").alias("_reason"),
        (pl.col("attributes").str.json_path_match(f"$['{sc.RUNQ_NS}']").cast(pl.Float64, strict=False) / 1e9)
        .alias("_root"), pl.Series("_w", span_cpu_wait_s(trace), nan_to_null=True),
        "session_id",
    ).join(conv_of, on="session_id", how="left").filter(pl.col("_run").is_in(runs))
    w = w.join(w.select(pl.col("span_id").alias("parent_id"), pl.col("kind").alias("_pkind")), on="parent_id",
               how="left").with_columns(pl.col("span_id").replace_strict(models, default=None,
                                                                        return_dtype=pl.Utf8).alias("_model"))

    def per_run(frame: pl.DataFrame, col: str = "_w") -> np.ndarray:
        """Sum per run: 0 for a run without such spans, NaN for one whose spans have no measured wait."""
        g = dict(frame.group_by("_run").agg(pl.when(pl.col(col).count() > 0).then(pl.col(col).sum()))
                 .iter_rows())
        return np.array([0.0 if r not in g else np.nan if g[r] is None else float(g[r]) for r in runs])

    out: dict[Key, np.ndarray] = {}
    roots = w.filter(pl.col("kind") == "agent")
    if roots.get_column("_root").null_count() < roots.height:
        out[("cpu_wait_s", "task")] = per_run(roots, "_root")
        under = (w.filter(pl.col("_pkind") == "agent").group_by("parent_id")  # unknown if one span's is
                 .agg(pl.when(pl.col("_w").null_count() == 0).then(pl.col("_w").sum()).alias("_in"))
                 .rename({"parent_id": "span_id"}))
        gap = roots.join(under.with_columns(pl.lit(True).alias("_has")), on="span_id", how="left").with_columns(
            (pl.col("_root") - pl.when(pl.col("_has").is_null()).then(0.0).otherwise(pl.col("_in")))
            .clip(lower_bound=0.0).alias("_gap"))
        out[("cpu_wait_s", "gap")] = per_run(gap, "_gap")
    for kind, by in (("tool", "_tool"), ("model", "_model"), ("parse", None), ("wait", "_reason")):
        k = w.filter(pl.col("kind") == kind)
        if k.height == 0:
            continue
        out[("cpu_wait_s", kind)] = per_run(k.filter(pl.col("_pkind").ne_missing(kind)))
        for name in sorted(set(k.get_column(by).drop_nulls().to_list())) if by else []:
            out[("cpu_wait_s", f"{kind}:{name}")] = per_run(k.filter(pl.col(by) == name))
    return out


def miss_causes(a: Analysis) -> dict[str, list[dict[str, Any]]]:
    """The analysis' cache misses grouped by their top-ranked cause."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in a.cache_misses:
        causes = m.get("causes") or []
        if causes:
            out.setdefault(causes[0]["cause"], []).append(m)
    return out
