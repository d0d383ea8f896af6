"""agentprof.analysis.call_stats: the per-call test is scipy's t-test on the logs with one run a side, and with
several runs a side the run-to-run spread widens it (runs are blocks, not free extra samples)."""

from __future__ import annotations

import numpy as np
import pytest

from agentprof.analysis.call_stats import FLOOR, logs, side_mean, t_test

from ..lazy_import import LazyModule

stats = LazyModule("scipy.stats")  # imported by the first test that uses it


def test_one_run_a_side_is_scipys_t_test_on_the_logs_and_several_are_welchs():
    rng = np.random.default_rng(3)
    b, n = rng.lognormal(np.log(0.03), 0.1, 5), rng.lognormal(np.log(0.04), 0.2, 4)
    p = t_test(side_mean(logs(b), np.zeros(5)), side_mean(logs(n), np.zeros(4)))
    assert p == pytest.approx(stats.ttest_ind(np.log(b), np.log(n)).pvalue, rel=1e-9)
    # one call in each of several runs: the runs are the samples, compared with Welch's test
    p = t_test(side_mean(logs(b), np.arange(5)), side_mean(logs(n), np.arange(4)))
    assert p == pytest.approx(stats.ttest_ind(np.log(b), np.log(n), equal_var=False).pvalue, rel=1e-9)


def test_a_consistent_5x_change_in_three_calls_is_clear_and_no_change_is_not():
    base = np.array([0.0301, 0.0302, 0.0300])
    assert t_test(side_mean(logs(base), np.zeros(3)), side_mean(logs(base * 5), np.zeros(3))) < 1e-6
    busy = np.array([0.0335, 0.0381, 0.0346])  # measured on a busy machine, against 150 ms a call
    assert t_test(side_mean(logs(busy), np.zeros(3)), side_mean(logs(np.array([0.1504, 0.1544, 0.1533])),
                                                                np.zeros(3))) < 1e-4
    same = np.array([0.0300, 0.0303, 0.0301])
    assert t_test(side_mean(logs(base), np.zeros(3)), side_mean(logs(same), np.zeros(3))) > 0.05


def test_runs_that_differ_as_a_whole_widen_the_side_and_calls_alone_would_not():
    # two runs of four calls each: every call of the second run 20 % slower than the first's
    y = np.log(np.r_[np.full(4, 0.030), np.full(4, 0.036)] * (1 + np.tile([0, 0.001, -0.001, 0.0005], 2)))
    runs = np.repeat([0, 1], 4)
    blocked, pooled = side_mean(y, runs), side_mean(y, np.zeros(8))
    assert blocked.var > pooled.var * 3 and blocked.df < pooled.df
    assert blocked.df >= 1 and blocked.runs == 2
    # runs that agree: the blocked side is as precise as pooled calls
    y2 = np.log(np.full(8, 0.03) * (1 + np.tile([0, 0.001, -0.001, 0.0005], 2)))
    agree = side_mean(y2, runs)
    assert agree.var == pytest.approx(side_mean(y2, np.zeros(8)).var * 7 / 6, rel=0.01)  # within-run spread
    assert agree.df == pytest.approx(7)  # as many as the calls give (8 - 1)


def test_what_cannot_be_estimated_and_the_floor():
    assert side_mean(np.log([0.03]), np.zeros(1)) is None  # one call
    one_each = side_mean(np.log([0.03, 0.031, 0.029]), np.arange(3))  # one call per run: runs are the samples
    assert one_each.df == 2 and one_each.runs == 3
    assert logs(np.array([0.0, np.nan, 1.0])).tolist() == [np.log(FLOOR), 0.0]
    const = side_mean(np.log([0.03, 0.03]), np.zeros(2))
    assert t_test(const, const) == 1.0
