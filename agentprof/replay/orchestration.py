"""Which orchestration time is CPU-bound, and how it scales with the host CPU.

CPU-bound work (parsing, serialization, local compute tools, environment setup) runs faster on a host with
faster cores; I/O, network and waits do not. The CPU-bound fraction of a span's own time is taken, in order,
from: a tool declared CPU-bound (``--cpu-bound TOOL`` or a mapping file), the span attribute
``agentprof.cpu_bound`` (true/false or a fraction), the captured ``cpu_ns`` (CPU time inside the span, its
children's CPU time subtracted), and the span kind ``parse`` (JSON parsing is CPU work by definition).
Anything else counts as not CPU-bound, and the summary says how much time that was: nothing is guessed.

The gaps between spans (the agent's own loop) scale too, by their measured CPU-bound share: the run's thread
CPU and run-queue wait minus its spans' (:func:`agentprof.analysis.hotspots.orchestration_cpu`), or
``--cpu-bound orchestration=F``. Work whose CPU exceeded its wall time (threads or child processes in
parallel) scales with the hosts' multi-thread ratio instead of the single-thread one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from agentprof import semconv as sc
from agentprof.analysis.tools import tool_name
from agentprof.catalog import read_toml
from agentprof.errors import AgentprofError

CPU_BOUND_ATTR = sc.CPU_BOUND
REASONS = ("declared", "attribute", "cpu_ns", "parse", "none")
GAPS_KEY = "orchestration"
"""``--cpu-bound orchestration=F`` sets the CPU-bound share of the gaps between spans (the agent's own loop)."""
PARALLEL_CPU = 1.5
"""A span whose own CPU exceeds this many times its own wall time ran in parallel: multi-thread ratio."""


@dataclass
class CpuSplit:
    """Per span: CPU-bound fraction of its own (exclusive) time and where that fraction came from."""

    fraction: np.ndarray
    reason: np.ndarray  # index into REASONS
    declared_unused: list[str] = field(default_factory=list)
    parallel: np.ndarray | None = None  # per span: its measured CPU exceeded its wall time (multi-thread ratio)

    def summary(self, excl_s: np.ndarray, scaled: np.ndarray) -> dict[str, Any]:
        """Seconds of orchestration (exclusive span time) treated as CPU-bound, by reason, and the rest."""
        out: dict[str, Any] = {}
        for i, r in enumerate(REASONS):
            sel = scaled & (self.reason == i)
            if r == "none":
                out["not_cpu_bound_s"] = float(excl_s[sel].sum())
            else:
                out[f"cpu_bound_{r}_s"] = float((excl_s[sel] * self.fraction[sel]).sum())
        out["cpu_bound_s"] = float((excl_s[scaled] * self.fraction[scaled]).sum())
        if self.declared_unused:
            out["declared_but_absent"] = self.declared_unused
        return out


def load_cpu_map(path: str | Path) -> dict[str, float]:
    """A mapping file ``tool name -> CPU-bound fraction`` (TOML or JSON object; ``true`` = 1, ``false`` = 0)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8")) if p.suffix == ".json" else read_toml(p)
    except (OSError, ValueError) as e:
        raise AgentprofError(f"{p}: cannot read CPU-bound mapping ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("cpu_bound"), dict):
        data = data["cpu_bound"]
    if not isinstance(data, dict):
        raise AgentprofError(f"{p}: expected a table of tool name = fraction (0..1) or true/false")
    out: dict[str, float] = {}
    for k, v in data.items():
        if isinstance(v, bool):
            out[str(k)] = 1.0 if v else 0.0
        elif isinstance(v, (int, float)) and 0 <= v <= 1:
            out[str(k)] = float(v)
        else:
            raise AgentprofError(f"{p}: {k}: expected a fraction between 0 and 1 or true/false, got {v!r}")
    return out


def tool_names(spans: pl.DataFrame) -> pl.Series:
    """Tool name per span, by the analysis' one rule (:func:`agentprof.analysis.tools.tool_name`)."""
    return spans.select(tool_name()).to_series()


def cpu_split(spans: pl.DataFrame, host_parent: np.ndarray, excl_s: np.ndarray,
              declared: dict[str, float] | None = None, runq_s: np.ndarray | None = None) -> CpuSplit:
    """CPU-bound fraction of each span's exclusive time (see the module docstring for the order of sources).
    ``runq_s``: per span, the time its thread waited for a CPU in its own time (:func:`span_runq`; counts as
    CPU-bound with its ``cpu_ns``)."""
    n = spans.height
    declared = declared or {}
    kind = spans.get_column("kind").to_numpy()
    frac = np.zeros(n)
    reason = np.full(n, REASONS.index("none"), dtype=np.int64)
    eligible = np.isin(kind, ("tool", "parse", "orchestration"))

    # 4. parse spans
    sel = eligible & (kind == "parse")
    frac[sel] = 1.0
    reason[sel] = REASONS.index("parse")
    # 3. captured CPU time (children's subtracted)
    cpu = spans.get_column("cpu_ns").fill_null(-1).to_numpy().astype(float)
    has_cpu = cpu >= 0
    child_cpu = np.zeros(n)
    ok = (host_parent >= 0) & has_cpu
    if ok.any():
        child_cpu = np.bincount(host_parent[ok], weights=cpu[ok], minlength=n)
    cpu_excl = np.maximum(cpu - child_cpu, 0.0) / 1e9
    busy_excl = cpu_excl if runq_s is None else cpu_excl + runq_s
    sel = eligible & has_cpu & (excl_s > 0)
    frac[sel] = np.minimum(busy_excl[sel] / excl_s[sel], 1.0)
    reason[sel] = REASONS.index("cpu_ns")
    parallel = sel & (cpu_excl > PARALLEL_CPU * excl_s)
    # 2. attribute
    attr = spans.get_column("attributes").str.json_path_match(f"$['{CPU_BOUND_ATTR}']").to_list()
    for i in np.flatnonzero(eligible):
        v = attr[i]
        if v is None:
            continue
        low = v.strip().lower()
        val = 1.0 if low == "true" else 0.0 if low == "false" else None
        if val is None:
            try:
                val = min(max(float(low), 0.0), 1.0)
            except ValueError:
                continue
        frac[i] = val
        reason[i] = REASONS.index("attribute")
    # 1. declared tools
    unused = []
    if declared:
        names = tool_names(spans).to_list()
        seen = set()
        for i in np.flatnonzero(eligible & (kind == "tool")):
            v = declared.get(names[i])
            if v is not None:
                frac[i] = v
                reason[i] = REASONS.index("declared")
                seen.add(names[i])
        unused = sorted(set(declared) - seen - {GAPS_KEY})
    parallel &= reason == REASONS.index("cpu_ns")
    return CpuSplit(frac, reason, unused, parallel)


def scaled_exclusive(excl_s: np.ndarray, split: CpuSplit, speed_ratio: float,
                     mt_ratio: float | None = None) -> np.ndarray:
    """New exclusive time: the CPU-bound part divided by the host speed ratio (the multi-thread ratio for
    spans that ran in parallel, when given), the rest unchanged."""
    ratio = np.full(excl_s.shape, speed_ratio)
    if mt_ratio is not None and split.parallel is not None:
        ratio[split.parallel] = mt_ratio
    return excl_s * (1.0 - split.fraction) + excl_s * split.fraction / ratio


@dataclass
class GapSplit:
    """Per session: the CPU-bound share of its gaps (time no top-level span covers) and where it came from."""

    fraction: np.ndarray
    source: str  # "measured", "declared" or "none"

    def summary(self, fixed_s: np.ndarray, top: np.ndarray) -> dict[str, Any]:
        return {"gaps_s": float(fixed_s.sum()), "gaps_cpu_bound_s": float((fixed_s * self.fraction).sum()),
                "gaps_source": self.source}


def span_runq(trace: Any, host_parent: np.ndarray) -> np.ndarray | None:
    """Per span row: seconds its thread waited for a CPU in the span's own time, its children's apart, as the
    capture recorded it at the span's ends (``agentprof.runq_ns``, which holds the children's too) or, where it
    sampled stacks instead, as the samples inside it saw; None when the trace has neither."""
    from agentprof.analysis.hotspots import span_cpu_wait_s

    w = span_cpu_wait_s(trace)
    known = np.isfinite(w)
    if not known.any():
        return None
    w = np.where(known, w, 0.0)
    attrs = trace.spans.get_column("attributes")
    recorded = attrs.str.contains(f'"{sc.RUNQ_NS}"', literal=True).fill_null(False).to_numpy()
    ok = (host_parent >= 0) & recorded
    child = np.bincount(host_parent[ok], weights=w[ok], minlength=w.size) if ok.any() else np.zeros(w.size)
    return np.where(recorded, np.maximum(w - child, 0.0), w)


def model_client_busy(trace: Any) -> np.ndarray:
    """Per span row: seconds the session's thread was sampled busy (on a CPU or waiting for one) inside that
    model call, i.e. its client side (zeros without samples)."""
    from agentprof.analysis.hotspots import attribute

    out = np.zeros(trace.spans.height)
    a = attribute(trace)
    if a is None:
        return out
    s = a.samples
    ok = (a.span_row >= 0) & s.thread_is_session[s.thread]
    kinds = trace.spans.get_column("kind").to_numpy()
    ok &= kinds[np.maximum(a.span_row, 0)] == "model"
    np.add.at(out, a.span_row[ok], (s.cpu_ns[ok] + s.runq_ns[ok]) / 1e9)
    dur = trace.spans.select(((pl.col("end_ns") - pl.col("start_ns")) / 1e9).fill_null(0.0)).to_series().to_numpy()
    return np.minimum(out, dur)


def gap_split(trace: Any, fixed_s: np.ndarray, session_ids: list[str],
              declared: dict[str, float] | None = None) -> GapSplit:
    """CPU-bound share of each session's gaps: ``--cpu-bound orchestration=F`` when given, else measured
    (busy seconds of the agent's loop / gap seconds, at most 1), else 0."""
    n = len(session_ids)
    if declared and GAPS_KEY in declared:
        return GapSplit(np.full(n, float(declared[GAPS_KEY])), "declared")
    from agentprof.analysis.hotspots import attribute, orchestration_cpu

    _, _, busy, _ = orchestration_cpu(trace, attribute(trace))
    if not busy:
        return GapSplit(np.zeros(n), "none")
    got = np.array([busy.get(s, np.nan) for s in session_ids])
    frac = np.where(np.isfinite(got) & (fixed_s > 0), np.minimum(np.nan_to_num(got) / np.where(fixed_s > 0, fixed_s, 1),
                                                                    1.0), 0.0)
    return GapSplit(frac, "measured")


def scaled_gaps(fixed_s: np.ndarray, split: GapSplit, speed_ratio: float) -> np.ndarray:
    """New gap time per session: the CPU-bound part divided by the host's single-thread ratio."""
    return fixed_s * (1.0 - split.fraction) + fixed_s * split.fraction / speed_ratio


def has_cpu_data(spans: pl.DataFrame) -> bool:
    """Whether the trace recorded any CPU time (captured traces do; imported logs do not)."""
    return spans.height > 0 and spans.get_column("cpu_ns").null_count() < spans.height


def host_whatif(trace: Any, speed_ratios: list[float], declared: dict[str, float] | None = None) -> list[float]:
    """Task time (sum over top-level sessions, seconds) of the recorded run on hosts ``speed_ratios`` times as
    fast per thread, everything else as recorded (model calls keep their recorded time): the host half of a
    replay, used to check the what-if against runs measured on a slowed CPU."""
    from agentprof.replay.timeline import assemble, prepare

    lay = prepare(trace.spans)
    split = cpu_split(trace.spans, lay.host_parent, lay.excl_old, declared,
                      span_runq(trace, lay.host_parent))
    kinds = trace.spans.get_column("kind").to_numpy()
    scalable = np.isin(kinds, ("tool", "parse", "orchestration")) & lay.placed
    gaps = gap_split(trace, lay.fixed_s, lay.session_ids, declared)
    cols = [1.0, *speed_ratios]
    own = np.stack([np.where(scalable, scaled_exclusive(lay.excl_old, split, r, r), lay.excl_old) for r in cols], 1)
    # a model call keeps its recorded time except its client side (SDK, request and stream handling) that the
    # samples saw the agent's thread busy with: that is host CPU too
    client = model_client_busy(trace)
    is_model = kinds == "model"
    model = np.stack([np.where(is_model, np.maximum(lay.old_dur - client * (1 - 1 / r), 0.0), lay.old_dur)
                      for r in cols], 1)
    fixed = np.stack([scaled_gaps(lay.fixed_s, gaps, r) for r in cols], 1)
    asm = assemble(lay, own, model, fixed_new=fixed)
    return [float(x) for x in asm.e2e[lay.top_level].sum(axis=0)[1:]]
