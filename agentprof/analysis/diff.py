"""``agentprof diff``: compare two sides (BASE and NEW, each one or more runs) figure by figure, test each
change, and say which regressions cross a CI threshold. Definitions and the statistics: ``docs/DIFF.md``.

- Every figure of :mod:`agentprof.analysis.run_figures` gets a base value, a new value (medians over each
  side's runs), the ratio new / base and a two-sided Mann–Whitney U test (``scipy.stats.mannwhitneyu``):
  across **runs** when both sides have at least two runs, else across the **calls / spans** the figure is
  made of (figures that exist once per run are then not tested).
- The p-values of all tested figures are adjusted together (Holm's step-down by default, which bounds the
  chance of *any* false flag per comparison at ``alpha``; Benjamini–Hochberg through
  ``scipy.stats.false_discovery_control`` on request). A change is **significant** when its adjusted p is
  below ``alpha`` *and* it moves the figure by at least ``min_change`` (relative): statistical and practical
  significance both.
- Cache-miss causes that explain misses in NEW but none in BASE are listed with examples and their fixes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentprof.analysis.active import is_outside_agent
from agentprof.analysis.misses import FIXES
from agentprof.analysis.run_figures import Key, SideFigures, miss_causes, side_figures
from agentprof.errors import AgentprofError
from agentprof.trace.schema import Trace

ALPHA = 0.01
MIN_CHANGE = 0.05
CORRECTIONS = ("holm", "bh")
EXACT_MAX_SPLITS = 5000
"""Samples with at most this many ways to split them are tested by enumerating every split."""

METRIC_ORDER = ("wall_s", "agent_active_s", "model_s", "tool_s", "parse_s", "orchestration_s", "wait_s",
                "tool_time_s", "model_calls", "input_tokens", "output_tokens", "prefix_reuse",
                "provider_cache_share", "ttft_s", "output_tokens_per_s")
LABELS = {
    "wall_s": "wall time", "agent_active_s": "agent-active time", "model_s": "model", "tool_s": "tools",
    "parse_s": "parse", "orchestration_s": "orchestration", "wait_s": "wait", "tool_time_s": "tool",
    "model_calls": "model calls", "input_tokens": "input tokens", "output_tokens": "output tokens",
    "prefix_reuse": "prefix reuse", "provider_cache_share": "cache read share", "ttft_s": "TTFT",
    "output_tokens_per_s": "output rate",
}
"""Short names for the terminal and the page (buckets are critical-path time, ``tool`` is summed span time)."""
UNITS = {"model_calls": "", "input_tokens": "tokens", "output_tokens": "tokens", "prefix_reuse": "share",
         "provider_cache_share": "share", "output_tokens_per_s": "tokens/s"}
SHARES = frozenset({"prefix_reuse", "provider_cache_share"})
ADDITIVE = frozenset({"tool_time_s", "wait_s"})
"""Figures a side without that tool or wait reason has as 0 (not unknown)."""


def unit_of(metric: str) -> str:
    """``s`` for times, ``share`` for shares, ``tokens``, ``tokens/s`` or ``""`` (a count)."""
    return UNITS.get(metric, "s")


def is_slowdown_figure(metric: str, scope: str) -> bool:
    """Figures ``--fail-if-slower`` watches: the agent's own times and the model's speed (waits on a person,
    an approval or idle time are not the agent being slower)."""
    if metric == "wait_s":
        return not is_outside_agent(scope.partition(":")[2])
    return unit_of(metric) == "s" or metric == "output_tokens_per_s"


@dataclass
class Change:
    """One figure compared: base and new values, their ratio, the test and whether the change is significant."""

    metric: str
    scope: str
    base: float | None
    new: float | None
    ratio: float | None
    significant: bool
    p: float | None = None
    p_adjusted: float | None = None
    n_base: int = 0
    n_new: int = 0
    unit: str | None = None  # what the test compared: "runs", "calls", "spans"; None when not tested
    note: str | None = None

    @property
    def key(self) -> Key:
        return (self.metric, self.scope)

    def slower_by(self) -> float | None:
        """How much slower NEW is on this figure (0.25 = 25 % slower); None when it is not a speed figure."""
        if not is_slowdown_figure(self.metric, self.scope) or self.ratio is None:
            return None
        if self.metric == "output_tokens_per_s":
            return 1.0 - self.ratio
        return self.ratio - 1.0

    def reuse_drop(self) -> float | None:
        """Drop of a share in percentage points (positive: NEW reuses less); None for other figures."""
        if self.metric not in SHARES or self.base is None or self.new is None:
            return None
        return (self.base - self.new) * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "scope": self.scope, "base": self.base, "new": self.new, "ratio": self.ratio,
                "significant": self.significant, "p": self.p, "p_adjusted": self.p_adjusted,
                "n_base": self.n_base, "n_new": self.n_new, "tested_across": self.unit, "value_unit": unit_of(self.metric),
                "label": LABELS.get(self.metric, self.metric), "note": self.note}


@dataclass
class DiffResult:
    """Everything ``agentprof diff`` computes (``to_dict()`` is its ``--json`` without ``failed``)."""

    base_runs: int
    new_runs: int
    method: dict[str, Any]
    changes: list[Change]
    new_miss_causes: list[dict[str, Any]]
    sides: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def change(self, metric: str, scope: str = "task") -> Change | None:
        return next((c for c in self.changes if c.metric == metric and c.scope == scope), None)

    @property
    def significant(self) -> list[Change]:
        return [c for c in self.changes if c.significant]

    def failures(self, slower_pct: float | None = None, reuse_drop_pct: float | None = None) -> list[dict[str, Any]]:
        """Significant regressions beyond the thresholds: ``slower_pct`` (relative, %) on speed figures,
        ``reuse_drop_pct`` (percentage points) on prefix reuse and provider cache share."""
        out: list[dict[str, Any]] = []
        for c in self.significant:
            slower = c.slower_by()
            if slower_pct is not None and slower is not None and slower * 100.0 > slower_pct:
                out.append({"metric": c.metric, "scope": c.scope, "rule": "slower", "threshold_pct": slower_pct,
                            "by_pct": slower * 100.0, "line": _fail_line(c, f"{slower:+.1%} slower, limit "
                                                                            f"{slower_pct:g} %")})
            drop = c.reuse_drop()
            if reuse_drop_pct is not None and drop is not None and drop > reuse_drop_pct:
                out.append({"metric": c.metric, "scope": c.scope, "rule": "reuse_drops",
                            "threshold_pct": reuse_drop_pct, "by_pct": drop,
                            "line": _fail_line(c, f"down {drop:.1f} points, limit {reuse_drop_pct:g} points")})
        return out

    def to_dict(self, failed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        d = {"base": self.sides.get("base", {}), "new": self.sides.get("new", {}), "method": self.method,
             "changes": [c.to_dict() for c in self.changes], "new_miss_causes": self.new_miss_causes,
             "notes": self.notes}
        if failed is not None:
            d["failed"] = failed
        return d


def fmt_value(metric: str, v: float | None) -> str:
    """A figure as the terminal, the failure lines and the page show it."""
    if v is None or not math.isfinite(v):
        return "–"
    u = unit_of(metric)
    if u == "s":
        return f"{v * 1e3:.1f} ms" if abs(v) < 1 else f"{v:,.2f} s"
    if u == "share":
        return f"{v:.1%}"
    if u == "tokens/s":
        return f"{v:,.0f} tok/s"
    return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:,.1f}"


def _fail_line(c: Change, why: str) -> str:
    p = f"p_adj {c.p_adjusted:.2g}" if c.p_adjusted is not None else ""
    return (f"{c.metric} [{c.scope}]: {fmt_value(c.metric, c.base)} -> {fmt_value(c.metric, c.new)} "
            f"({why}; {p}, across {c.n_base} vs {c.n_new} {c.unit})")


def mann_whitney(x: np.ndarray, y: np.ndarray) -> float | None:
    """Two-sided Mann–Whitney U p-value (scipy): exact (every split enumerated) when the samples can be split in
    at most :data:`EXACT_MAX_SPLITS` ways, else scipy's choice (exact without ties up to 8 values a side, the
    normal approximation with tie correction beyond); 1.0 when every value of both samples is the same; None
    when a side is empty."""
    from scipy.stats import mannwhitneyu

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if x.size == 0 or y.size == 0:
        return None
    if np.all(x == x[0]) and np.all(y == x[0]):
        return 1.0
    method: Any = "auto"
    if min(x.size, y.size) < 2:
        method = "exact"  # a permutation test needs two values a side; one value: the exact null distribution
    elif math.comb(x.size + y.size, x.size) <= EXACT_MAX_SPLITS:
        # small samples: every split enumerated (exact also with ties, where "auto" would take the normal
        # approximation, which is far too optimistic for 2 or 3 runs)
        from scipy.stats import PermutationMethod

        method = PermutationMethod(n_resamples=EXACT_MAX_SPLITS)
    p = float(mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue)
    return p if math.isfinite(p) else 1.0


def min_p(n: int, m: int) -> float:
    """The smallest two-sided p-value the exact Mann–Whitney test can give for samples of n and m."""
    if n < 1 or m < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n + m, n))


def adjust(p: Sequence[float], method: str = "holm") -> list[float]:
    """Adjusted p-values: Holm's step-down (family-wise error) or Benjamini–Hochberg (false discovery rate,
    ``scipy.stats.false_discovery_control``)."""
    if not p:
        return []
    arr = np.asarray(p, dtype=np.float64)
    if method == "bh":
        from scipy.stats import false_discovery_control

        return [float(v) for v in false_discovery_control(arr, method="bh")]
    if method != "holm":
        raise AgentprofError(f"unknown correction {method!r} (choose {', '.join(CORRECTIONS)})")
    k = arr.size
    order = np.argsort(arr, kind="stable")
    out = np.empty(k)
    running = 0.0
    for rank, i in enumerate(order):  # step-down: p_(r) * (k - r), kept monotone, capped at 1
        running = max(running, min(1.0, arr[i] * (k - rank)))
        out[i] = running
    return [float(v) for v in out]


def _ratio(b: float | None, n: float | None) -> float | None:
    if b is None or n is None:
        return None
    if b == 0:
        return 1.0 if n == 0 else None
    return n / b


def _moved(c: Change, min_change: float) -> bool:
    if c.base is None or c.new is None:
        return False
    if c.ratio is None:  # from zero to something
        return c.new != c.base
    return abs(c.ratio - 1.0) >= min_change


def _order(key: Key) -> tuple[int, str]:
    m, s = key
    return (METRIC_ORDER.index(m) if m in METRIC_ORDER else len(METRIC_ORDER), s)


def compare(base: SideFigures, new: SideFigures, alpha: float = ALPHA, min_change: float = MIN_CHANGE,
            correction: str = "holm") -> DiffResult:
    """Compare two sides' figures (see the module docstring)."""
    if not 0 < alpha < 1:
        raise AgentprofError(f"--alpha must be between 0 and 1, got {alpha}")
    if min_change < 0:
        raise AgentprofError(f"--min-change must not be negative, got {min_change}")
    by_runs = len(base.runs) >= 2 and len(new.runs) >= 2
    keys = sorted(set(base.per_run) | set(new.per_run) | set(base.samples) | set(new.samples), key=_order)
    changes: list[Change] = []
    for key in keys:
        metric, scope = key
        bv, nv = base.value(key), new.value(key)
        if bv is None and metric in ADDITIVE and key not in base.per_run:
            bv = 0.0 if base.runs else None  # a tool or wait reason only NEW has: 0 in BASE
        if nv is None and metric in ADDITIVE and key not in new.per_run:
            nv = 0.0 if new.runs else None
        c = Change(metric, scope, bv, nv, _ratio(bv, nv), False)
        if by_runs:
            # a tool or wait reason a side never had took 0 s in each of its runs; other figures it lacks
            # (no hashes, no TTFT) are unknown there, not 0
            absent = 0.0 if metric in ADDITIVE else np.nan
            x = base.per_run.get(key, np.full(len(base.runs), absent))
            y = new.per_run.get(key, np.full(len(new.runs), absent))
            c.unit = "runs"
        elif key in base.samples or key in new.samples:
            x = base.samples.get(key, np.empty(0))
            y = new.samples.get(key, np.empty(0))
            c.unit = base.sample_unit.get(key) or new.sample_unit.get(key)
        else:
            c.note = "not tested: one value per run and fewer than two runs on a side (repeat runs to test it)"
            changes.append(c)
            continue
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        c.n_base, c.n_new = int(np.isfinite(x).sum()), int(np.isfinite(y).sum())
        c.p = mann_whitney(x, y)
        if c.p is None:
            c.unit = None
            c.note = "not tested: a side has nothing to measure"
        changes.append(c)
    tested = [c for c in changes if c.p is not None]
    for c, pa in zip(tested, adjust([c.p for c in tested if c.p is not None], correction), strict=True):
        c.p_adjusted = pa
        c.significant = pa < alpha and _moved(c, min_change)
    notes: list[str] = []
    if by_runs and tested and min_p(len(base.runs), len(new.runs)) * len(tested) >= alpha and correction == "holm":
        notes.append(f"with {len(base.runs)} and {len(new.runs)} runs the smallest possible p-value is "
                     f"{min_p(len(base.runs), len(new.runs)):.3g}, too large to survive the correction over "
                     f"{len(tested)} figures: repeat runs (8 or more per side) to detect changes")
    if not by_runs:
        notes.append("fewer than two runs on a side: figures are tested across the calls and spans they are made "
                     "of, and figures that exist once per run (wall, agent-active, orchestration, call count) are "
                     "not tested; repeat runs to test them")
    method = {"test": "Mann-Whitney U, two-sided (scipy.stats.mannwhitneyu)",
              "across": "runs" if by_runs else "calls and spans",
              "correction": {"holm": "Holm step-down (family-wise error rate)",
                             "bh": "Benjamini-Hochberg (false discovery rate)"}[correction],
              "alpha": alpha, "min_change": min_change, "figures_tested": len(tested),
              "values": "median over each side's runs of the per-run figure"}
    return DiffResult(len(base.runs), len(new.runs), method, changes, new_only_causes(base, new), notes=notes)


def new_only_causes(base: SideFigures, new: SideFigures, examples: int = 5) -> list[dict[str, Any]]:
    """Cache-miss causes that are the top cause of some miss in NEW and of none in BASE."""
    b = miss_causes(base.analysis)
    out = []
    for cause, ms in sorted(miss_causes(new.analysis).items(), key=lambda kv: -len(kv[1])):
        if cause in b:
            continue
        out.append({
            "cause": cause, "misses": len(ms), "fix": FIXES.get(cause),
            "examples": [{"session_id": m["session_id"], "call": int(m["line_index"]) + 1,
                          "where": (m.get("location") or {}).get("where"),
                          "detail": m["causes"][0]["detail"],
                          "prefix_reuse_prev": m.get("prefix_reuse_prev")} for m in ms[:examples]],
        })
    return out


def _side_info(trace: Trace, f: SideFigures, label: str) -> dict[str, Any]:
    return {"label": label, "runs": len(f.runs), "run_ids": f.runs[:50], "sessions": f.analysis.n_sessions,
            "model_calls": f.analysis.n_model_calls, "files": len(trace.meta.sources),
            "sources": [s.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] for s in trace.meta.sources][:20],
            "source_format": trace.meta.source_format, "untimed_runs": len(f.untimed_runs),
            "misses": len(f.analysis.cache_misses)}


def diff(base: Trace, new: Trace, alpha: float = ALPHA, min_change: float = MIN_CHANGE, correction: str = "holm",
         labels: tuple[str, str] = ("base", "new")) -> DiffResult:
    """Compare two traces (each one or more runs) figure by figure; see the module docstring."""
    for name, t in (("BASE", base), ("NEW", new)):
        if t.spans.height == 0:
            raise AgentprofError(f"{name} ({labels[0] if t is base else labels[1]}): no spans to compare "
                                 "(empty trace)")
    bf, nf = side_figures(base), side_figures(new)
    for name, f, t in (("BASE", bf, base), ("NEW", nf, new)):
        if not f.runs:
            raise AgentprofError(f"{name}: no runs (top-level sessions) found in {len(t.meta.sources)} file(s)")
    res = compare(bf, nf, alpha, min_change, correction)
    res.sides = {"base": _side_info(base, bf, labels[0]), "new": _side_info(new, nf, labels[1])}
    return res
