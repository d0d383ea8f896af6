"""How well the calibrated cost model predicts measured points: absolute percentage errors, in-sample and
cross-validated (fit on one ISL/OSL setting, check on another), broken down by hardware and model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.replay.calibration import Fitted, fit
from agentprof.replay.points import PARAMS, Features, point_features, predict

METRICS = ("ttft", "tpot", "e2e")


@dataclass
class Check:
    """Per-point predictions and errors for one points table."""

    table: pl.DataFrame  # hardware, framework, model, ..., pred_*, meas_*, ape_*, level, covered, why
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return summarize(self.table)

    def to_dict(self) -> dict[str, Any]:
        d = self.summary()
        if self.notes:
            d["notes"] = self.notes
        return d


def _stats(t: pl.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {"points": t.height}
    for m in METRICS:
        a = t[f"ape_{m}"].drop_nulls().drop_nans().to_numpy()
        out[m] = {"median_ape": float(np.median(a)) if a.size else None,
                  "p90_ape": float(np.percentile(a, 90)) if a.size else None, "n": int(a.size)}
    return out


def summarize(t: pl.DataFrame) -> dict[str, Any]:
    """``points``, ``covered`` and per metric ``median_ape`` / ``p90_ape`` over covered points, plus the same
    broken down by hardware and by model, and how many points each calibration level served."""
    cov = t.filter(pl.col("covered"))
    out: dict[str, Any] = {"points": t.height, "covered": cov.height,
                           "coverage": cov.height / t.height if t.height else 0.0}
    out.update({m: v for m, v in _stats(cov).items() if m in METRICS})
    for by in ("hardware", "model"):
        out[f"by_{by}"] = {str(k[0]): _stats(g) for k, g in sorted(cov.group_by(by), key=lambda kv: str(kv[0][0]))}
    out["levels"] = {str(k[0]): g.height for k, g in sorted(cov.group_by("level"), key=lambda kv: str(kv[0][0]))}
    uncovered = t.filter(~pl.col("covered"))
    if uncovered.height:
        out["uncovered"] = {str(k[0]): g.height for k, g in uncovered.group_by("why")}
    return out


def check(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog | None = None,
          f: Features | None = None) -> Check:
    """Predict TTFT, TPOT and E2E for every row of ``df`` with ``fitted`` and compare to the measurements.

    A point is covered when the catalog knows its hardware, model and precision and a calibrated group of the
    same model on the same accelerator family exists (its own layout or group, else the nearest sibling)."""
    cat = cat or load_catalog()
    f = f or point_features(df, cat)
    n = len(f)
    theta = np.ones((n, len(PARAMS)))
    level = [""] * n
    covered = f.covered.copy()
    why = list(f.why)
    vendor = {k: a.vendor for k, a in cat.accelerators.items()}
    for i, k in enumerate(f.keys):
        if k is None:
            continue
        e, how = fitted.lookup(k, vendor.get(k.hardware, ""))
        theta[i] = e.theta
        level[i] = how.split(" ")[0] if how.startswith("nearest") else how
        if how in ("hardware", "family", "prior"):
            covered[i] = False
            why[i] = f"no calibrated {k.model} configuration on {k.family} hardware"
    ttft, tpot, e2e = predict(f, theta, fitted.attn_eff)

    def col(name: str, default: Any = None) -> list:
        return df[name].to_list() if name in df.columns else [default] * n

    model_col = [k.model if k else (m or "") for k, m in zip(f.keys, col("model_prefix", col("model")), strict=True)]
    t = pl.DataFrame({
        "hardware": [str(x) for x in col("hardware", "")], "framework": [str(x) for x in col("framework", "")],
        "model": model_col, "precision": [str(x) for x in col("precision", "")],
        "isl": col("isl"), "osl": col("osl"), "conc": col("conc"),
        "layout": [k.layout if k else "" for k in f.keys], "level": level, "covered": covered, "why": why,
        "pred_ttft": ttft, "pred_tpot": tpot, "pred_e2e": e2e,
        "meas_ttft": f.ttft, "meas_tpot": f.tpot, "meas_e2e": f.e2e,
    }, strict=True)
    for m in METRICS:
        t = t.with_columns(
            pl.when(pl.col("covered") & (pl.col(f"meas_{m}") > 0))
            .then((pl.col(f"pred_{m}") - pl.col(f"meas_{m}")).abs() / pl.col(f"meas_{m}"))
            .otherwise(None).alias(f"ape_{m}"))
    return Check(t)


def cross_validate(df: pl.DataFrame, cat: HardwareCatalog | None = None,
                   by: tuple[str, str] = ("isl", "osl"), attn_eff: float | None = None) -> dict[str, Any]:
    """Fit on each ISL/OSL setting and check on every other one; the pooled held-out errors plus per fold.
    The global attention efficiency (fitted on the separate long-prompt points) is the shipped one."""
    cat = cat or load_catalog()
    if attn_eff is None:
        from agentprof.replay.calibration import load_fitted

        attn_eff = load_fitted().attn_eff
    settings = df.select(*by).unique().sort(*by).rows()
    folds = []
    tables = []
    for s in settings:
        train = df.filter(pl.all_horizontal([pl.col(c) == v for c, v in zip(by, s, strict=True)]))
        test = df.filter(~pl.all_horizontal([pl.col(c) == v for c, v in zip(by, s, strict=True)]))
        if not test.height:
            continue
        fitted = fit(train, cat, attn_eff)
        ch = check(test, fitted, cat)
        folds.append({"fit_on": "/".join(str(v) for v in s), "check_on": "other settings", **ch.summary()})
        tables.append(ch.table)
    pooled = summarize(pl.concat(tables)) if tables else {}
    return {"pooled": pooled, "folds": folds}
