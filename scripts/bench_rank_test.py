#!/usr/bin/env python3
"""The exact Mann–Whitney p-value with tied values (``agentprof.analysis.diff.tied_rank_sum_p``, a count over
the rank sums) against scipy's permutation test, the code it replaced, in the same run, on the samples
``agentprof diff`` meets: run figures measured to the millisecond, so values tie.

- 4 vs 4 and 6 vs 6 runs: scipy enumerates every split (``PermutationMethod`` with as many resamples);
- 8 vs 8 and 16 vs 16 runs: more splits than diff enumerated, so scipy drew 20,000 random ones (seeded).

Prints, per case, the median time of each side over ``--repeats`` and the two p-values (equal where scipy
enumerates; within the random draw's error elsewhere).

    .venv/bin/python scripts/bench_rank_test.py
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
from scipy.stats import PermutationMethod, mannwhitneyu

from agentprof.analysis.diff import tied_rank_sum_p


def _timed(fn, repeats: int) -> tuple[float, float]:
    times, value = [], 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(3)
    print(f"{'runs a side':>12} {'scipy':>10} {'counted':>10} {'ratio':>8}  p scipy / counted")
    for n in (4, 6, 8, 16):
        x = np.round(rng.normal(1.00, 0.05, n), 2)  # seconds to 10 ms: ties
        y = np.round(rng.normal(1.05, 0.05, n), 2)
        splits = math.comb(2 * n, n)
        method = PermutationMethod(n_resamples=splits) if splits <= 5000 else \
            PermutationMethod(n_resamples=20_000, rng=np.random.default_rng(0))
        old_s, old_p = _timed(lambda x=x, y=y, m=method: mannwhitneyu(x, y, method=m).pvalue, args.repeats)
        new_s, new_p = _timed(lambda x=x, y=y: tied_rank_sum_p(x, y), args.repeats)
        print(f"{n:>12} {old_s * 1e3:>8.1f}ms {new_s * 1e3:>8.2f}ms {old_s / new_s:>7.0f}×  {old_p:.4g} / {new_p:.4g}")


if __name__ == "__main__":
    main()
