"""Distribution summaries (mean, median, p10/p25/p75/p90) used for every per-call and per-session metric."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

QUANTILES = (("p10", 0.10), ("p25", 0.25), ("p75", 0.75), ("p90", 0.90))


def summary(values: Iterable[float | None] | np.ndarray) -> dict[str, Any]:
    """``{n, mean, median, p10, p25, p75, p90}`` over the non-null, finite values (linear-interpolated
    percentiles, numpy's default). Every figure is ``None`` when there are no values."""
    arr = np.asarray([v for v in values if v is not None] if not isinstance(values, np.ndarray) else values,
                     dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    out: dict[str, Any] = {"n": int(arr.size)}
    if arr.size == 0:
        out.update({"mean": None, "median": None, **{k: None for k, _ in QUANTILES}})
        return out
    out["mean"] = float(arr.mean())
    out["median"] = float(np.median(arr))
    qs = np.quantile(arr, [q for _, q in QUANTILES])
    out.update({k: float(v) for (k, _), v in zip(QUANTILES, qs, strict=True)})
    return out
