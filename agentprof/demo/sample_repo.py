"""The small repository the demo agent works on: a statistics module with a bug its tests catch.

Kept as data (file path -> text) and written to a temporary folder for each run, so the demo never edits
files inside the installed package.
"""

from __future__ import annotations

from pathlib import Path

FILES: dict[str, str] = {
    "README.md": """# calc

Small descriptive-statistics helpers used by the reporting jobs.

Run the tests with `python -m unittest discover -s tests -v`.
""",
    "calc/__init__.py": '''"""Descriptive statistics helpers."""

from calc.stats import mean, median, percentile, summarize

__all__ = ["mean", "median", "percentile", "summarize"]
''',
    "calc/stats.py": '''"""Mean, median, percentiles and a summary record for lists of numbers."""

from __future__ import annotations

import json
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mean of an empty sequence")
    return sum(values) / len(values)


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of an empty sequence")
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid]  # BUG (planted for the demo): even-length input needs the mean of the two middles


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not 0 <= q <= 100:
        raise ValueError("q must be within [0, 100]")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> str:
    """A JSON summary record, as the reporting jobs store it."""
    return json.dumps({
        "n": len(values),
        "mean": mean(values),
        "median": median(values),
        "p90": percentile(values, 90),
    }, sort_keys=True)
''',
    "calc/io.py": '''"""Reading number series from the reporting jobs' JSON files."""

from __future__ import annotations

import json
from pathlib import Path


def load_series(path: str | Path) -> list[float]:
    data = json.loads(Path(path).read_text())
    return [float(v) for v in data["values"]]
''',
    "tests/__init__.py": "",
    "tests/test_stats.py": '''import json
import unittest

from calc import mean, median, percentile, summarize


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_median_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_percentile(self):
        self.assertAlmostEqual(percentile([1, 2, 3, 4, 5], 90), 4.6)

    def test_summary_is_json(self):
        record = json.loads(summarize([1, 2, 3, 4]))
        self.assertEqual(record["median"], 2.5)


if __name__ == "__main__":
    unittest.main()
''',
    "data/latency.json": '{"values": [12.5, 11.0, 13.2, 40.1, 12.9, 11.7, 12.2, 13.9]}\n',
}


def materialize(dest: str | Path) -> Path:
    """Write the repository under ``dest`` and return its root."""
    root = Path(dest)
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root
