"""``agentprof diff``: compare two sides (BASE and NEW, each one or more runs) figure by figure, test each
change, and say which regressions cross a CI threshold. Definitions and the statistics: ``docs/DIFF.md``.

- **Per-call figures** (each tool's calls, each model's call duration, TTFT and output rate, parse spans,
  wait spans, orchestration gaps) are compared on a log scale with runs as blocks
  (:mod:`agentprof.analysis.call_stats`): one run a side is enough, since every call is a sample.
- **Per-run figures** (wall and agent-active time, the critical-path buckets, each tool's time per run, call
  and token counts) are the medians over each side's runs, tested with a two-sided Mann–Whitney U test
  (``scipy.stats.mannwhitneyu``) across runs when both sides have at least two; prefix reuse and the provider
  cache share across runs, or across calls with one run on a side.
- The p-values of all tested figures are adjusted together (Holm's step-down by default, which bounds the
  chance of *any* false flag per comparison at ``alpha``; Benjamini–Hochberg through
  ``scipy.stats.false_discovery_control`` on request). A change is **significant** when its adjusted p is
  below ``alpha`` *and* it is practically large: at least ``min_change`` relative and, for times, at least
  ``min_abs_s`` seconds.
- Cache-miss causes that explain misses in NEW but none in BASE are listed with examples and their fixes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentprof.analysis.active import is_outside_agent
from agentprof.analysis.call_stats import SideMean, logs, side_mean, t_test
from agentprof.analysis.misses import FIXES
from agentprof.analysis.run_figures import Key, SideFigures, miss_causes, side_figures
from agentprof.errors import AgentprofError
from agentprof.trace.schema import Trace

ALPHA = 0.01
MIN_CHANGE = 0.10
MIN_ABS_S = 0.001
"""A time figure must also move by at least this many seconds to count (a parse span of 40 µs that takes 80 µs
on a busy machine is not a regression anyone acts on)."""
CORRECTIONS = ("holm", "bh")
EXACT_MAX_VALUES = 200
"""Samples without ties up to this many values in all get scipy's exact p-value; beyond, the normal
approximation."""
TIED_EXACT_MAX_WORK = 1_000_000
"""Samples with ties get :func:`tied_rank_sum_p`'s exact p-value while the smaller side's size times the square
of all values stays under this (50 vs 50: ~70 ms); beyond (both sides large), the normal approximation."""

METRIC_ORDER = ("call_s", "ttft_s", "output_tokens_per_s", "wall_s", "agent_active_s", "model_s", "tool_s",
                "parse_s", "orchestration_s", "wait_s", "tool_time_s", "model_calls", "input_tokens",
                "output_tokens", "prefix_reuse", "provider_cache_share", "cpu_wait_s")
LABELS = {
    "wall_s": "wall time", "agent_active_s": "agent-active time", "model_s": "model", "tool_s": "tools",
    "parse_s": "parse", "orchestration_s": "orchestration", "wait_s": "wait time", "tool_time_s": "tool time",
    "model_calls": "model calls", "input_tokens": "input tokens", "output_tokens": "output tokens",
    "prefix_reuse": "prefix reuse", "provider_cache_share": "cache read share", "ttft_s": "TTFT",
    "output_tokens_per_s": "output rate", "call_s": "call", "cpu_wait_s": "CPU wait (machine load)",
}
"""Short names for the terminal and the page (buckets are critical-path time, ``tool`` is summed span time)."""
LOAD_KEY: Key = ("cpu_wait_s", "task")
"""The agent thread's time runnable but waiting for a CPU per run: context for the times, never a regression."""
LOAD_ALLOWANCE = 2.0
"""A change up to this many times the difference in CPU wait of its own spans is put down to the machine: a
thread's wait is a lower bound of what load costs (the child processes, the local servers and the other
threads it waits on are delayed too; on a loaded 2-core machine the model calls of a local server added up to
1.2 times the agent thread's extra wait)."""
TASK_LOAD = {"wall_s": "task", "agent_active_s": "task", "model_s": "model", "tool_s": "tool",
             "parse_s": "parse", "orchestration_s": "gap"}
"""The spans whose CPU wait can explain a per-run time (the scopes of ``cpu_wait_s``,
:func:`agentprof.analysis.run_figures.cpu_waits`)."""

UNITS = {"model_calls": "", "input_tokens": "tokens", "output_tokens": "tokens", "prefix_reuse": "share",
         "provider_cache_share": "share", "output_tokens_per_s": "tokens/s"}
SHARES = frozenset({"prefix_reuse", "provider_cache_share"})
ADDITIVE = frozenset({"tool_time_s", "wait_s"})
"""Figures a side without that tool or wait reason has as 0 (not unknown)."""


def unit_of(metric: str) -> str:
    """``s`` for times, ``share`` for shares, ``tokens``, ``tokens/s`` or ``""`` (a count)."""
    return UNITS.get(metric, "s")


def load_scope(metric: str, scope: str) -> str | None:
    """Which spans' wait for a CPU can explain a change of this figure (None: not a time load can slow)."""
    if metric == LOAD_KEY[0] or (unit_of(metric) != "s" and metric != "output_tokens_per_s"):
        return None
    if scope == "task":
        return TASK_LOAD.get(metric)
    if scope in ("parse", "gap") or scope.partition(":")[0] in ("tool", "model", "wait"):
        return scope
    return None


def is_per_call(metric: str, scope: str) -> bool:
    """Figures compared call by call on a log scale (:mod:`agentprof.analysis.call_stats`)."""
    return metric == "call_s" or scope.startswith("model:")


def figure_name(metric: str, scope: str) -> str:
    """A figure's name for people: ``tool run_tests`` (its calls), ``tool time · run_tests`` (per run),
    ``TTFT gpt-4o``, ``orchestration gap`` (trace names as they are: callers that print it escape it)."""
    label = LABELS.get(metric, metric)
    kind, _, name = scope.partition(":")
    if metric == "call_s":
        return {"parse": "parse span", "gap": "orchestration gap"}.get(scope, f"{kind} {name}")
    if kind == "model":
        return f"{label} {name}"
    if scope in ("task", "call"):
        return label + (" (per call)" if scope == "call" else "")
    return f"{label} · {name}"


def is_slowdown_figure(metric: str, scope: str) -> bool:
    """Figures ``--fail-if-slower`` watches: the agent's own times and the model's speed (waits on a person,
    an approval or idle time are not the agent being slower)."""
    if scope.startswith("wait:"):
        return not is_outside_agent(scope.partition(":")[2])
    if metric == LOAD_KEY[0]:
        return False
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
    unit: str | None = None  # what the test compared: "runs", "calls", "spans", "gaps"; None when not tested
    note: str | None = None
    runs_base: int = 0  # runs the per-call samples came from
    runs_new: int = 0
    practical: bool = False  # moved by at least min_change (and min_abs_s for times)
    added_s: float | None = None  # seconds the change adds to a run (per call: mean change x calls a run)
    load_explained: bool = False  # the whole change is within its spans' extra wait for a CPU: the machine
    load_s: float | None = None  # of added_s, the seconds a run its own spans' extra CPU wait explains
    load_share: float | None = None  # load_s / added_s: how much of the change the machine's load explains
    threshold_only: bool = False  # a per-call figure with too few calls to test: gated by the threshold alone

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

    @property
    def per_call(self) -> bool:
        return is_per_call(self.metric, self.scope)

    @property
    def name(self) -> str:
        return figure_name(self.metric, self.scope)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "scope": self.scope, "name": self.name, "base": self.base, "new": self.new,
                "ratio": self.ratio,
                "significant": self.significant, "p": self.p, "p_adjusted": self.p_adjusted,
                "n_base": self.n_base, "n_new": self.n_new, "runs_base": self.runs_base, "runs_new": self.runs_new,
                "tested_across": self.unit, "per_call": self.per_call, "threshold_only": self.threshold_only,
                "added_s_per_run": self.added_s, "load_explained": self.load_explained,
                "load_explains_s_per_run": self.load_s, "load_share": self.load_share,
                "value_unit": unit_of(self.metric), "label": LABELS.get(self.metric, self.metric), "note": self.note}


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
    load: dict[str, float | None] = field(default_factory=dict)  # each side's CPU wait a run, NEW's extra

    def change(self, metric: str, scope: str = "task") -> Change | None:
        return next((c for c in self.changes if c.metric == metric and c.scope == scope), None)

    @property
    def significant(self) -> list[Change]:
        return [c for c in self.changes if c.significant]

    @property
    def threshold_only(self) -> list[Change]:
        """Per-call figures with too few calls to test, which ``--fail-if-slower`` judges by its threshold alone."""
        return [c for c in self.changes if c.threshold_only]

    def failures(self, slower_pct: float | None = None, reuse_drop_pct: float | None = None) -> list[dict[str, Any]]:
        """Significant regressions beyond the thresholds: ``slower_pct`` (relative, %) on speed figures (per-call
        figures too few to test: past the threshold alone), ``reuse_drop_pct`` (percentage points) on prefix
        reuse and provider cache share."""
        out: list[dict[str, Any]] = []
        for c in self.changes:
            slower = c.slower_by()
            if (slower_pct is not None and slower is not None and slower * 100.0 > slower_pct
                    and (c.significant or (c.threshold_only and c.practical and not c.load_explained))):
                out.append({"metric": c.metric, "scope": c.scope, "name": c.name, "rule": "slower",
                            "threshold_pct": slower_pct, "by_pct": slower * 100.0, "tested": c.significant,
                            "line": _fail_line(c, f"{slower:+.1%} slower, limit {slower_pct:g} %")})
            if not c.significant:
                continue
            drop = c.reuse_drop()
            if reuse_drop_pct is not None and drop is not None and drop > reuse_drop_pct:
                out.append({"metric": c.metric, "scope": c.scope, "name": c.name, "rule": "reuse_drops",
                            "threshold_pct": reuse_drop_pct, "by_pct": drop,
                            "line": _fail_line(c, f"down {drop:.1f} points, limit {reuse_drop_pct:g} points")})
        return out

    def to_dict(self, failed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        d = {"base": self.sides.get("base", {}), "new": self.sides.get("new", {}), "method": self.method,
             "load": self.load, "changes": [c.to_dict() for c in self.changes],
             "new_miss_causes": self.new_miss_causes, "notes": self.notes}
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
    """``metric [scope]: base -> new (why; evidence)``; the scope is trace text (callers printing it escape it)."""
    if c.threshold_only:
        ev = f"too few to test: {c.n_base} vs {c.n_new} {c.unit or 'calls'}, threshold alone"
    else:
        ev = f"p_adj {c.p_adjusted:.2g}, across {c.n_base} vs {c.n_new} {c.unit}"
        if c.per_call:
            ev += f" of {c.runs_base} vs {c.runs_new} run(s)"
    return f"{c.metric} [{c.scope}]: {fmt_value(c.metric, c.base)} -> {fmt_value(c.metric, c.new)} ({why}; {ev})"


def tied_rank_sum_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided exact p-value of the Mann–Whitney test with tied values: the null distribution of x's sum of
    midranks over every way to choose len(x) of the pooled values, counted by dynamic programming over the
    doubled (integer) ranks; the same p as scipy's permutation test enumerating every split (its exact method
    assumes no ties), in milliseconds where that takes a second for 8 runs a side (docs/PERFORMANCE.md)."""
    from scipy.stats import rankdata

    if y.size < x.size:  # count subsets of the smaller side (the same two-sided p)
        x, y = y, x
    ranks = np.rint(2.0 * rankdata(np.r_[x, y])).astype(np.int64)
    n, top = x.size, int(ranks.sum())
    ways = np.zeros((n + 1, top + 1))  # ways[k, s]: subsets of k values whose doubled ranks sum to s
    ways[0, 0] = 1.0
    for r in ranks:
        ways[1:, r:] = ways[1:, r:] + ways[:-1, :-r]  # right side read before the write: each value used once
    dist = ways[n]
    seen = int(ranks[:n].sum())
    lower, upper = dist[:seen + 1].sum(), dist[seen:].sum()
    return float(min(1.0, 2.0 * min(lower, upper) / dist.sum()))


def mann_whitney(x: np.ndarray, y: np.ndarray) -> float | None:
    """Two-sided Mann–Whitney U p-value: exact for small samples (scipy's exact distribution without ties,
    :func:`tied_rank_sum_p` with them: the normal approximation is far too optimistic for 2 or 3 runs), else
    scipy's normal approximation with tie correction; 1.0 when every value of both samples is the same; None
    when a side is empty."""
    from scipy.stats import mannwhitneyu

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if x.size == 0 or y.size == 0:
        return None
    if np.all(x == x[0]) and np.all(y == x[0]):
        return 1.0
    n = x.size + y.size
    if np.unique(np.r_[x, y]).size < n:
        p = tied_rank_sum_p(x, y) if min(x.size, y.size) * n * n <= TIED_EXACT_MAX_WORK else \
            float(mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue)
    elif n <= EXACT_MAX_VALUES:  # no ties: scipy's exact distribution (16 vs 6 runs apart: 2.7e-5, normal: 3.6e-4)
        p = float(mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue)
    else:
        p = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
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


def _practical(c: Change, min_change: float, min_abs_s: float) -> bool:
    """Moved enough to matter: ``min_change`` relative and, for times, ``min_abs_s`` seconds."""
    if c.base is None or c.new is None:
        return False
    if unit_of(c.metric) == "s" and abs(c.new - c.base) < min_abs_s:
        return False
    if c.ratio is None:  # from zero to something
        return c.new != c.base
    return abs(c.ratio - 1.0) >= min_change


def _order(key: Key) -> tuple[int, int, str]:
    m, s = key
    return (0 if is_per_call(m, s) else 1, METRIC_ORDER.index(m) if m in METRIC_ORDER else len(METRIC_ORDER), s)


def _per_call_change(key: Key, base: SideFigures, new: SideFigures) -> Change:
    """A per-call figure: the median call of each side and their ratio (robust: one slow call of three does not
    move it), and a t-test on the logs with runs as blocks; a side with too few calls to test marks it
    ``threshold_only``."""
    c = Change(key[0], key[1], None, None, None, False)
    c.unit = base.sample_unit.get(key) or new.sample_unit.get(key) or "calls"
    est: list[SideMean | None] = []
    means: list[float] = []
    for f, side in ((base, "base"), (new, "new")):
        v = f.samples.get(key, np.empty(0))
        ok = np.isfinite(v)
        runs = f.sample_runs.get(key, np.zeros(v.size, dtype=np.int64))[ok]
        est.append(side_mean(logs(v), runs) if ok.any() else None)
        if ok.any():
            setattr(c, side, float(np.median(v[ok])))
            setattr(c, f"n_{side}", int(ok.sum()))
            setattr(c, f"runs_{side}", int(np.unique(runs).size))
            means.append(float(v[ok].mean()))
    c.ratio = _ratio(c.base, c.new)
    if len(means) == 2 and unit_of(c.metric) == "s":  # time added to a run: sums add up, medians do not
        c.added_s = (means[1] - means[0]) * c.n_new / c.runs_new
    sb, sn = est
    if c.base is None or c.new is None:
        c.unit = None
        c.note = f"not tested: only {'NEW' if c.base is None else 'BASE'} has it"
    elif sb is None or sn is None:
        c.threshold_only = True
        c.note = (f"too few {c.unit} to test ({c.n_base} vs {c.n_new}; two a side are needed): judged by the "
                  "threshold alone")
    else:
        c.p = t_test(sb, sn)
    return c


def _group_wait(f: SideFigures, scope: str) -> float | None:
    """A side's CPU wait a run of one group of spans; 0 where it has none of those spans but its groups were
    read (a baseline stored before groups were kept has only the run's: unknown)."""
    key = ("cpu_wait_s", scope)
    if key not in f.per_run and ("cpu_wait_s", "gap") in f.per_run:
        return 0.0
    return f.value(key)


def _explain_by_load(changes: list[Change], base: SideFigures, new: SideFigures) -> None:
    """Set each per-run time figure's ``added_s`` (per-call ones have theirs: mean change x calls a run) and how
    much of it the machine explains (``load_s``, ``load_share``): up to :data:`LOAD_ALLOWANCE` times the change
    in the CPU wait of the figure's own spans a run (:func:`load_scope`), in the same direction. A change the
    machine explains whole is ``load_explained``. An output rate follows its model's calls."""
    calls = {c.scope: c for c in changes if c.metric == "call_s"}
    for c in changes:
        if c.base is None or c.new is None or unit_of(c.metric) != "s" or c.key == LOAD_KEY:
            continue
        if not c.per_call:
            c.added_s = c.new - c.base
        scope = load_scope(c.metric, c.scope)
        if c.added_s is None or scope is None:
            continue
        bw, nw = (_group_wait(f, scope) for f in (base, new))
        if bw is None or nw is None:
            continue  # its spans' wait was not measured: judged on its own time
        allow = LOAD_ALLOWANCE * (nw - bw)
        c.load_s = min(c.added_s, allow) if c.added_s > 0 and allow > 0 else \
            max(c.added_s, allow) if c.added_s < 0 and allow < 0 else 0.0
        c.load_share = None if not c.added_s else c.load_s / c.added_s if c.load_s else 0.0
        c.load_explained = c.added_s != 0 and c.load_s == c.added_s
    parts = [c for c in changes if c.scope == "task" and TASK_LOAD.get(c.metric, "task") != "task" and c.added_s]
    if any(c.load_s is None for c in parts):
        parts = []  # a changed bucket whose spans' wait is unknown: the run's own wait is all there is
    for c in changes:
        if c.metric == "output_tokens_per_s" and c.scope in calls:
            c.load_explained, c.load_share = calls[c.scope].load_explained, calls[c.scope].load_share
        elif c.scope == "task" and TASK_LOAD.get(c.metric) == "task" and parts and c.added_s:
            # the run's time: at most what load explains of its parts (a sleeping tool's slowdown is no
            # more the machine's inside the run than alone)
            part = sum(p.load_s or 0.0 for p in parts)
            c.load_s = min(c.added_s, part, c.load_s or 0.0) if c.added_s > 0 and part > 0 else \
                max(c.added_s, part, c.load_s or 0.0) if c.added_s < 0 and part < 0 else 0.0
            c.load_share = c.load_s / c.added_s if c.load_s else 0.0
            c.load_explained = c.load_s == c.added_s


def compare(base: SideFigures, new: SideFigures, alpha: float = ALPHA, min_change: float = MIN_CHANGE,
            correction: str = "holm", min_abs_s: float = MIN_ABS_S) -> DiffResult:
    """Compare two sides' figures (see the module docstring)."""
    if not 0 < alpha < 1:
        raise AgentprofError(f"--alpha must be between 0 and 1, got {alpha}")
    if min_change < 0:
        raise AgentprofError(f"--min-change must not be negative, got {min_change}")
    if min_abs_s < 0:
        raise AgentprofError(f"--min-abs-ms must not be negative, got {min_abs_s * 1e3:g}")
    by_runs = len(base.runs) >= 2 and len(new.runs) >= 2
    keys = sorted(set(base.per_run) | set(new.per_run) | set(base.samples) | set(new.samples), key=_order)
    changes: list[Change] = []
    for key in keys:
        metric, scope = key
        if metric == LOAD_KEY[0] and key != LOAD_KEY:
            continue  # the CPU wait of a figure's spans: what load can explain of that figure, not a figure
        if is_per_call(metric, scope):
            changes.append(_per_call_change(key, base, new))
            continue
        if key == LOAD_KEY:
            bv, nv = base.value(key), new.value(key)
            changes.append(Change(metric, scope, bv, nv, _ratio(bv, nv), False,
                                  note="context (how loaded the machine was), not tested"))
            continue
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
    bw, nw = base.value(LOAD_KEY), new.value(LOAD_KEY)
    shift = nw - bw if bw is not None and nw is not None else 0.0
    _explain_by_load(changes, base, new)
    for c in changes:
        c.practical = _practical(c, min_change, min_abs_s)
        c.significant = c.p_adjusted is not None and c.p_adjusted < alpha and c.practical and not c.load_explained
    notes: list[str] = []
    explained = [c for c in changes if c.load_explained and c.practical
                 and (c.threshold_only or (c.p_adjusted is not None and c.p_adjusted < alpha))]
    if explained:
        busier = "NEW" if shift > 0 else "BASE"
        notes.append(f"{busier}'s agent thread waited {abs(shift):.2f} s more a run for a CPU (BASE "
                     f"{fmt_value('s', bw)}, NEW {fmt_value('s', nw)}: a busier machine); a change within "
                     "twice the extra CPU wait of its own spans is the machine's, not counted: "
                     + ", ".join(c.name for c in explained[:8]) + (" …" if len(explained) > 8 else ""))
    unmeasured = [c for c in changes if c.added_s and c.practical and c.load_s is None
                  and load_scope(c.metric, c.scope) not in (None, "task")]
    if unmeasured and bw is not None and nw is not None:
        notes.append("the captures recorded no CPU wait per span (older agentprof, or a sampler with no sample "
                     "in them): load explains none of " + ", ".join(c.name for c in unmeasured[:4])
                     + (" …" if len(unmeasured) > 4 else ""))
    run_tested = [c for c in tested if not c.per_call]
    if by_runs and run_tested and min_p(len(base.runs), len(new.runs)) * len(tested) >= alpha \
            and correction == "holm":
        notes.append(f"with {len(base.runs)} and {len(new.runs)} runs the smallest possible p-value of a per-run "
                     f"figure is {min_p(len(base.runs), len(new.runs)):.3g}, too large to survive the correction "
                     f"over {len(tested)} figures: per-run figures (wall time, call counts) need 8 or more runs "
                     "a side; per-call figures are tested all the same")
    if not by_runs:
        notes.append("one run on a side: per-call figures are tested across their calls; figures that exist once "
                     "per run (wall, agent-active, the buckets, call and token counts) are shown, not tested")
    few = [c for c in changes if c.threshold_only and is_slowdown_figure(c.metric, c.scope)]
    if few:
        notes.append(f"{len(few)} per-call figure(s) have too few calls to test; --fail-if-slower judges them by "
                     "its threshold alone: " + ", ".join(f"{c.name} ({c.n_base} vs {c.n_new})" for c in few[:8])
                     + (" …" if len(few) > 8 else ""))
    method = {"summary": f"per call: Welch t on logs, runs as blocks; per run: Mann-Whitney U; {correction.upper() if correction == 'bh' else 'Holm'}, "
                         f"alpha {alpha:g}; at least {min_change:.0%} and {min_abs_s * 1e3:g} ms; "
                         f"{len(tested)} figures tested",
              "per_call": "Welch t-test on log values, runs as random blocks (agentprof.analysis.call_stats)",
              "per_run": "Mann-Whitney U, two-sided (scipy.stats.mannwhitneyu)",
              "test": "per call: Welch t on logs, runs as blocks; per run: Mann-Whitney U",
              "across": "runs" if by_runs else "calls and spans",
              "correction": {"holm": "Holm step-down (family-wise error rate)",
                             "bh": "Benjamini-Hochberg (false discovery rate)"}[correction],
              "alpha": alpha, "min_change": min_change, "min_abs_s": min_abs_s, "figures_tested": len(tested),
              "values": "per call: the side's median call; per run: the median over the side's runs"}
    return DiffResult(len(base.runs), len(new.runs), method, changes, new_only_causes(base, new), notes=notes,
                      load={"base_cpu_wait_s": bw, "new_cpu_wait_s": nw, "new_minus_base_s": shift})


def new_only_causes(base: SideFigures, new: SideFigures, examples: int = 5) -> list[dict[str, Any]]:
    """Cache-miss causes that are the top cause of some miss in NEW and of none in BASE."""
    if new.analysis is None:
        return []
    out = []
    for cause, ms in sorted(miss_causes(new.analysis).items(), key=lambda kv: -len(kv[1])):
        if cause in base.causes:
            continue
        out.append({
            "cause": cause, "misses": len(ms), "fix": FIXES.get(cause),
            "examples": [{"session_id": m["session_id"], "call": int(m["line_index"]) + 1,
                          "where": (m.get("location") or {}).get("where"),
                          "detail": m["causes"][0]["detail"],
                          "prefix_reuse_prev": m.get("prefix_reuse_prev")} for m in ms[:examples]],
        })
    return out


def side_info(trace: Trace, f: SideFigures, label: str) -> dict[str, Any]:
    """What the terminal, the page and a stored baseline show of one side."""
    return {"label": label, "runs": len(f.runs), "run_ids": f.runs[:50], "sessions": f.info.get("sessions"),
            "model_calls": f.info.get("model_calls"), "files": len(trace.meta.sources),
            "sources": [s.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] for s in trace.meta.sources][:20],
            "source_format": trace.meta.source_format, "untimed_runs": len(f.untimed_runs),
            "misses": f.info.get("misses")}


def figures(trace: Trace, name: str = "BASE", label: str = "") -> SideFigures:
    """One side's figures from its trace (with ``info`` filled for display); errors name the side."""
    if trace.spans.height == 0:
        raise AgentprofError(f"{name} ({label}): no spans to compare (empty trace)" if label else
                             f"{name}: no spans to compare (empty trace)")
    f = side_figures(trace)
    if not f.runs:
        raise AgentprofError(f"{name}: no runs (top-level sessions) found in {len(trace.meta.sources)} file(s)")
    f.info = side_info(trace, f, label or name.lower())
    return f


def diff(base: Trace | SideFigures, new: Trace, alpha: float = ALPHA, min_change: float = MIN_CHANGE,
         correction: str = "holm", labels: tuple[str, str] = ("base", "new"),
         min_abs_s: float = MIN_ABS_S) -> DiffResult:
    """Compare two traces (each one or more runs; BASE may be a stored baseline's figures) figure by figure; see
    the module docstring."""
    bf = base if isinstance(base, SideFigures) else figures(base, "BASE", labels[0])
    nf = figures(new, "NEW", labels[1])
    res = compare(bf, nf, alpha, min_change, correction, min_abs_s)
    res.sides = {"base": bf.info, "new": nf.info}
    return res
