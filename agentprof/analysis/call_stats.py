"""Per-call comparison for ``agentprof diff``: is a tool call, a model call or a gap typically slower on one side?

Durations and rates are compared on a log scale (a change is a ratio; the long right tail of durations
shrinks): the test compares each side's mean log value. Calls of one run share that run's conditions, so runs
are blocks: with several runs a side, the spread of the run means beyond what the calls explain (a one-way
random-effects variance component, never below zero) is added to the side's uncertainty, and the sides are
compared with Welch's t-test. With one run a side the two spreads are pooled (Student's t: a duration varies
by a similar factor on both sides; with three calls a side Welch's test has about two degrees of freedom and
misses even a fivefold change on a busy machine); this is exactly
``scipy.stats.ttest_ind(log_base, log_new)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FLOOR = 1e-6
"""Values below this (a microsecond, for durations) are taken as this before the log (a gap of 0 has no log)."""


@dataclass(frozen=True)
class SideMean:
    """One side's mean log value, its variance and degrees of freedom."""

    mean: float
    var: float
    df: float
    n: int
    runs: int


def logs(values: np.ndarray) -> np.ndarray:
    """Natural logs of the finite values, floored at :data:`FLOOR`."""
    v = np.asarray(values, dtype=np.float64)
    return np.log(np.maximum(v[np.isfinite(v)], FLOOR))


def side_mean(y: np.ndarray, runs: np.ndarray) -> SideMean | None:
    """The mean of log values ``y`` (one per call; ``runs`` holds each call's run) with runs as random blocks;
    None when nothing can be estimated (one call in all, or one call in each of a single run)."""
    y = np.asarray(y, dtype=np.float64)
    runs = np.asarray(runs)
    n = y.size
    if n == 0:
        return None
    ids, inv = np.unique(runs, return_inverse=True)
    r = ids.size
    n_r = np.bincount(inv, minlength=r).astype(np.float64)
    m_r = np.bincount(inv, weights=y, minlength=r) / n_r
    ssw = float(((y - m_r[inv]) ** 2).sum())
    dfw = n - r
    if r == 1:
        if dfw < 1:
            return None
        return SideMean(float(m_r[0]), ssw / dfw / n, float(dfw), n, 1)
    if dfw < 1:  # one call per run: the runs are the samples
        return SideMean(float(m_r.mean()), float(m_r.var(ddof=1)) / r, float(r - 1), n, r)
    msw = ssw / dfw
    grand = float(y.mean())
    msb = float((n_r * (m_r - grand) ** 2).sum()) / (r - 1)
    n0 = (n - float((n_r ** 2).sum()) / n) / (r - 1)
    between = max(0.0, (msb - msw) / n0) if n0 > 0 else 0.0
    w = 1.0 / (between + msw / n_r) if msw > 0 or between > 0 else n_r
    mean = float((w * m_r).sum() / w.sum())
    var = 1.0 / float(w.sum()) if msw > 0 or between > 0 else 0.0
    # degrees of freedom between the run count (run-to-run spread dominates) and the call count (it is nil),
    # by the share of the within-run variance in a typical run mean's variance
    within = msw / (n / r)
    share = within / (within + between) if within + between > 0 else 1.0
    return SideMean(mean, var, (r - 1) + dfw * share, n, r)


def t_test(b: SideMean, n: SideMean) -> float:
    """Two-sided p-value of the difference of two side means: Student's t with the spreads pooled when each
    side is one run, else Welch's t with Welch–Satterthwaite degrees of freedom; 1.0 when both sides are
    constant and equal, 0.0 when they are constant and differ."""
    from scipy.stats import t as student_t

    d = n.mean - b.mean
    if b.runs == n.runs == 1:
        pooled = (b.var * b.n * b.df + n.var * n.n * n.df) / (b.df + n.df)
        v, df = pooled * (1 / b.n + 1 / n.n), b.df + n.df
    else:
        v = b.var + n.var
        df = v * v / ((b.var ** 2 / b.df if b.var > 0 else 0.0) + (n.var ** 2 / n.df if n.var > 0 else 0.0)) \
            if v > 0 else 1.0
    if v <= 0:
        return 1.0 if d == 0 else 0.0
    p = float(2.0 * student_t.sf(abs(d) / math.sqrt(v), df))
    return p if math.isfinite(p) else 1.0
