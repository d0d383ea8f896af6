"""How well the calibrated cost model predicts measured points: absolute percentage errors, in-sample and
cross-validated (fit on one ISL/OSL setting, check on another), broken down by hardware and model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.errors import AgentprofError
from agentprof.replay.calibration import PRIOR_MEAN, Fitted, borrowed_handoff, fit, is_disaggregated
from agentprof.replay.points import PARAMS, Features, load_points, point_features, predict
from agentprof.resources import shipped

METRICS = ("ttft", "tpot", "e2e")
LEVEL_OF = {"layout": "fitted", "group": "group", "nearest": "unseen"}
"""Calibration level of a prediction: its exact layout was fitted, only its group (hardware, framework,
model, precision, speculation) was, or neither (borrowed from the nearest calibrated sibling)."""


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


CONC_BANDS = ((1, 16, "1-16"), (17, 64, "32-64"), (65, 512, "128-512"), (513, 10 ** 9, ">=1024"))


def _with_slices(t: pl.DataFrame) -> pl.DataFrame:
    """Add the slicing columns: ``serving`` (aggregated / disaggregated) and ``conc_band``."""
    band = pl.lit(CONC_BANDS[-1][2])
    for _lo, hi, name in reversed(CONC_BANDS[:-1]):
        band = pl.when(pl.col("conc").cast(pl.Float64) <= hi).then(pl.lit(name)).otherwise(band)
    return t.with_columns(
        pl.when(pl.col("layout").str.starts_with("p")).then(pl.lit("disaggregated")).otherwise(pl.lit("aggregated"))
        .alias("serving"), band.alias("conc_band"))


def off_by(t: pl.DataFrame, factor: float, side: str = "pred") -> int:
    """Points whose prediction (columns ``{side}_ttft`` …: ``pred``, or another predictor's, e.g. a lookup's)
    misses the measurement by more than ``factor`` either way in any metric."""
    bad = np.zeros(t.height, dtype=bool)
    for m in METRICS:
        p, q = t[f"{side}_{m}"].to_numpy().astype(float), t[f"meas_{m}"].to_numpy().astype(float)
        ok = np.isfinite(p) & np.isfinite(q) & (p > 0) & (q > 0)
        r = np.where(ok, p / np.where(ok, q, 1.0), 1.0)
        bad |= ok & ((r > factor) | (r < 1.0 / factor))
    return int(bad.sum())


def longer_prompts(points: pl.DataFrame, fitted_on: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``points`` whose prompt is longer than every prompt in ``fitted_on`` (a fit's data): the
    long-prompt family that fit never saw, the held-out check of how its first token extrapolates."""
    return points.filter(pl.col("isl") > fitted_on["isl"].max())


HELD_OUT_POINTS = "data/inferencex/official_api_points.csv"
"""The InferenceX API's official points, never fitted on; those with prompts longer than the fit's are its held-out
long-prompt family (docs/DEVICE_MODEL.md §4, family 7)."""


def fit_points(fitted: Fitted) -> pl.DataFrame:
    """The points ``fitted`` was made on: its provenance's data file (a repository path resolves to the shipped
    copy where the checkout is not here)."""
    name = fitted.provenance.get("data_file")
    path = shipped(name) if name else None
    if path is None or not path.is_file():
        raise AgentprofError(f"the fit's data file {name or '(not recorded in its [provenance])'} is not here: "
                             "the prompts it was fitted on are unknown")
    return load_points(path)


def max_ratio(t: pl.DataFrame) -> float | None:
    """The largest factor by which a prediction misses its measurement, either way (max of pred/meas, meas/pred)."""
    worst = None
    for m in METRICS:
        g = t.filter(pl.col(f"ape_{m}").is_not_null() & (pl.col(f"pred_{m}") > 0))
        if g.height:
            r = (g[f"pred_{m}"] / g[f"meas_{m}"]).to_numpy()
            v = float(np.max(np.maximum(r, 1.0 / r)))
            worst = v if worst is None else max(worst, v)
    return worst


def summarize(t: pl.DataFrame) -> dict[str, Any]:
    """``points``, ``covered`` and per metric ``median_ape`` / ``p90_ape`` over covered points, plus the same
    broken down by hardware, framework, model, serving (aggregated / disaggregated), concurrency band and
    calibration level, how many points each level served and the worst miss factor."""
    cov = _with_slices(t.filter(pl.col("covered")))
    out: dict[str, Any] = {"points": t.height, "covered": cov.height,
                           "coverage": cov.height / t.height if t.height else 0.0}
    out.update({m: v for m, v in _stats(cov).items() if m in METRICS})
    out["max_miss_factor"] = max_ratio(cov)
    out["off_5x"] = off_by(cov, 5.0)
    for by in ("hardware", "framework", "model", "serving", "conc_band", "level"):
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
    for i, k in enumerate(f.keys):
        if k is None:
            continue
        e, how = fitted.lookup(k, cat)
        theta[i] = e.theta
        if f.disagg[i] and not is_disaggregated(e.attrs.get("framework", "")):
            # a disaggregated point borrowing an aggregated sibling keeps its prefill efficiency (the same kernels:
            # with each weight's GEMMs at its own format's rate the fitted efficiencies of aggregated and
            # disaggregated groups agree, 0.14-0.18, docs/DEVICE_MODEL.md §3) but not its queueing factor, which
            # describes prefill chunks queueing among decode steps, not a prefill pool's queue: the prior
            theta[i, PARAMS.index("q")] = PRIOR_MEAN["q"]
            # nor its hand-off, which an aggregated engine never makes: the fitted disaggregated stacks' count
            theta[i, PARAMS.index("handoff")] = borrowed_handoff(fitted, k)
        level[i] = LEVEL_OF.get(how.split(" ")[0], "unseen")
        if how in ("hardware", "family", "prior"):
            covered[i] = False
            why[i] = f"no calibrated {k.model} configuration on {k.family} hardware"
    # a prompt's attention runs at its kernels' efficiency (the accelerator's and attention kind's fitted one where
    # no published forward figure applies: point_attn_eff)
    etas = np.array([fitted.attn_eff_for(k.hardware, cat.models[k.model].attention) if k is not None
                     else fitted.attn_eff for k in f.keys])
    ttft, tpot, e2e = predict(f, theta, etas)

    def col(name: str, default: Any = None) -> list:
        return df[name].to_list() if name in df.columns else [default] * n

    model_col = [k.model if k else (m or "") for k, m in zip(f.keys, col("model_prefix", col("model")), strict=True)]
    t = pl.DataFrame({
        "row": list(range(n)),
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
        sel = df.select(pl.all_horizontal([pl.col(c) == v for c, v in zip(by, s, strict=True)])).to_series()
        train, test = df.filter(sel), df.filter(~sel)
        if not test.height:
            continue
        fitted = fit(train, cat, attn_eff)
        ch = check(test, fitted, cat)
        ch.table = ch.table.with_columns(pl.lit("/".join(str(v) for v in s)).alias("fit_on"),
                                         pl.Series("row", np.flatnonzero(~sel.to_numpy())))
        folds.append({"fit_on": "/".join(str(v) for v in s), "check_on": "other settings", **ch.summary()})
        tables.append(ch.table)
    table = pl.concat(tables) if tables else pl.DataFrame()
    pooled = summarize(table) if tables else {}
    return {"pooled": pooled, "folds": folds, "table": table}


def _baseline(test: pl.DataFrame, train: pl.DataFrame) -> pl.DataFrame:
    """The lookup baseline: for each test point, the measured point of ``train`` with the same hardware, model,
    ISL and OSL whose decode GPU count, then concurrency, is nearest (log scale); its TTFT, TPOT and E2E."""
    def gpus(df: pl.DataFrame) -> pl.Series:
        return pl.coalesce(pl.col("num_decode_gpu").cast(pl.Float64) / pl.col("decode_num_workers").cast(pl.Float64),
                           pl.col("tp").cast(pl.Float64), pl.lit(1.0)) if "num_decode_gpu" in df.columns else \
            pl.coalesce(pl.col("tp").cast(pl.Float64), pl.lit(1.0))

    key = ["hardware", "model_prefix" if "model_prefix" in test.columns else "model", "isl", "osl"]
    tr = train.with_columns(gpus(train).alias("_g")).select(*key, "_g", pl.col("conc").cast(pl.Float64).alias("_c"),
                                                            "median_ttft_s", "median_tpot_s", "median_e2el_s")
    out = []
    for r in test.with_columns(gpus(test).alias("_g")).iter_rows(named=True):
        cand = tr.filter(pl.all_horizontal([pl.col(c) == r[c] for c in key]))
        if not cand.height:
            out.append((None, None, None))
            continue
        d = cand.with_columns(((pl.col("_g") / r["_g"]).log(2).abs()).alias("_dg"),
                              ((pl.col("_c") / float(r["conc"])).log(2).abs()).alias("_dc")).sort("_dg", "_dc")
        b = d.row(0, named=True)
        out.append((b["median_ttft_s"], b["median_tpot_s"], b["median_e2el_s"]))
    return pl.DataFrame({"base_ttft": [o[0] for o in out], "base_tpot": [o[1] for o in out],
                         "base_e2e": [o[2] for o in out]}, schema={f"base_{m}": pl.Float64 for m in METRICS})


LOOKUP_AXES = ("isl", "osl", "conc")
"""The columns the nearest-point lookup measures distance on (log2 ratios, summed), with the decode GPUs."""


def nearest_lookup(test: pl.DataFrame, train: pl.DataFrame, same: tuple[str, ...] = ("hardware", "framework")
                   ) -> pl.DataFrame:
    """The nearest-point lookup baseline across prompt and output lengths: for each test point, the measured TTFT,
    TPOT and E2E of the ``train`` point with the same ``same`` columns (hardware and framework by default) whose
    ISL, OSL, concurrency and decode GPUs are nearest (sum of |log2 ratio|); null where no such point exists. It is
    what looking up the closest measured configuration answers for a setting never measured."""
    def gpus(df: pl.DataFrame) -> pl.Expr:
        if "num_decode_gpu" in df.columns:
            return pl.coalesce(pl.col("num_decode_gpu").cast(pl.Float64) / pl.col("decode_num_workers").cast(pl.Float64),
                               pl.col("tp").cast(pl.Float64), pl.lit(1.0))
        return pl.coalesce(pl.col("tp").cast(pl.Float64), pl.lit(1.0))

    axes = [*LOOKUP_AXES, "_g"]
    tr = train.with_columns(gpus(train).alias("_g")).select(
        *same, *(pl.col(a).cast(pl.Float64) for a in axes), "median_ttft_s", "median_tpot_s", "median_e2el_s")
    out: list[tuple[float | None, ...]] = []
    for r in test.with_columns(gpus(test).alias("_g")).iter_rows(named=True):
        cand = tr.filter(pl.all_horizontal([pl.col(c) == r[c] for c in same]))
        if not cand.height:
            out.append((None, None, None))
            continue
        dist = sum((pl.col(a) / float(r[a])).log(2).abs() for a in axes)
        b = cand.with_columns(dist.alias("_d")).sort("_d").row(0, named=True)
        out.append((b["median_ttft_s"], b["median_tpot_s"], b["median_e2el_s"]))
    return pl.DataFrame({f"base_{m}": [o[i] for o in out] for i, m in enumerate(METRICS)},
                        schema={f"base_{m}": pl.Float64 for m in METRICS})


GROUP_LEVELS = ("family", "hardware", "group")
"""The calibration levels a configuration of an unfitted group can be predicted from (no layout of it exists)."""


def _with_family(whole: Fitted, own: Fitted, family: str) -> Fitted:
    """``whole``'s entries with those of ``family`` replaced by ``own``'s, in the order a fit writes them (sorted
    by name: the nearest-group lookup keeps the first of equal matches)."""
    entries = {lv: dict(sorted({**{k: e for k, e in es.items() if e.attrs.get("family") != family},
                                **own.entries[lv]}.items())) for lv, es in whole.entries.items()}
    return Fitted(entries, {}, whole.attn_eff)


def leave_out(df: pl.DataFrame, unit: str = "layout", cat: HardwareCatalog | None = None,
              attn_eff: float | None = None) -> dict[str, Any]:
    """Leave-one-``unit``-out cross-validation (``layout``: each parallel layout of a group with other layouts;
    ``group``: each (hardware, framework, model, precision, speculation) group): fit without it, predict it,
    and set the errors against the lookup baseline (:func:`_baseline`) measured on the same points. Returns the
    summary of the held-out predictions (``model``), the baseline's (``baseline``) and the per-point table."""
    cat = cat or load_catalog()
    if attn_eff is None:
        from agentprof.replay.calibration import load_fitted

        attn_eff = load_fitted().attn_eff
    f_all = point_features(df, cat)
    units: dict[str, list[int]] = {}
    for i, k in enumerate(f_all.keys):
        if k is not None:
            units.setdefault(k.config if unit == "layout" else k.group, []).append(i)
    layouts_of: dict[str, set[str]] = {}
    for k in f_all.keys:
        if k is not None:
            layouts_of.setdefault(k.group, set()).add(k.layout)
    tables = []
    skipped = 0
    # a held-out group is predicted from group entries (its nearest sibling in its family, the hand-offs of
    # disaggregated groups anywhere) and its own family's hardware and family fits, never from a layout: each
    # fold refits only its family (families are fitted apart), up to groups; the other families come from one fit
    whole = fit(df, cat, attn_eff, f=f_all, levels=GROUP_LEVELS) if unit == "group" else None
    for name, ids in sorted(units.items()):
        key = f_all.keys[ids[0]]
        assert key is not None
        if unit == "layout" and len(layouts_of[key.group]) < 2:
            skipped += 1  # its group has no other layout: predicting it is the unseen-group case
            continue
        mask = np.zeros(df.height, dtype=bool)
        mask[ids] = True
        train_idx = np.flatnonzero(~mask)
        train = df[train_idx.tolist()]
        if unit == "layout":
            fitted = fit(train, cat, attn_eff, chain=key, f=f_all.subset(train_idx))
        else:
            assert whole is not None
            fam = np.array([i for i in train_idx if (k := f_all.keys[i]) is not None and k.family == key.family],
                           dtype=int)
            own = fit(df[fam.tolist()], cat, attn_eff, f=f_all.subset(fam), levels=GROUP_LEVELS)
            fitted = _with_family(whole, own, key.family)
        test = df[ids]
        ch = check(test, fitted, cat, f_all.subset(np.array(ids)))
        tables.append(pl.concat([ch.table.with_columns(pl.lit(name).alias("held_out"), pl.Series("row", ids)),
                                 _baseline(test, train)], how="horizontal"))
    t = pl.concat(tables) if tables else pl.DataFrame()
    res: dict[str, Any] = {"unit": unit, "held_out_units": len(tables), "skipped_single_layout_groups": skipped}
    if not t.height:
        return res
    res["model"] = summarize(t)
    base = t.with_columns([
        pl.when(pl.col("covered") & (pl.col(f"meas_{m}") > 0) & pl.col(f"base_{m}").is_not_null())
        .then((pl.col(f"base_{m}") - pl.col(f"meas_{m}")).abs() / pl.col(f"meas_{m}")).otherwise(None)
        .alias(f"ape_{m}") for m in METRICS] + [pl.col(f"base_{m}").alias(f"pred_{m}") for m in METRICS])
    both = base.filter(pl.col("ape_tpot").is_not_null())
    res["baseline"] = {**_stats(both), "method": "nearest measured point of the same hardware and model, same "
                       "ISL/OSL, outside the held-out unit: nearest decode GPU count, then concurrency"}
    res["model_on_baseline_points"] = _stats(t.join(both.select("held_out", "row"), on=["held_out", "row"],
                                                    how="semi"))
    res["table"] = t
    return res


def level_errors(df: pl.DataFrame, cat: HardwareCatalog | None = None, attn_eff: float | None = None
                 ) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """The error measured for each calibration level: ``fitted`` from the ISL/OSL cross-validation (points whose
    layout was fitted on the other setting), ``group`` from leave-one-layout-out, ``unseen`` from
    leave-one-group-out. Returns the per-level medians/p90s and the full reports."""
    cv = cross_validate(df, cat, attn_eff=attn_eff)
    lolo = leave_out(df, "layout", cat, attn_eff)
    logo = leave_out(df, "group", cat, attn_eff)

    def flat(st: dict[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {"points": float(st.get("points", 0))}
        for m in METRICS:
            if st.get(m, {}).get("median_ape") is not None:
                out[f"median_ape_{m}"] = st[m]["median_ape"]
                out[f"p90_ape_{m}"] = st[m]["p90_ape"]
        return out

    levels = {"fitted": flat(cv["pooled"].get("by_level", {}).get("fitted", {})),
              "group": flat(lolo.get("model", {})), "unseen": flat(logo.get("model", {}))}
    return levels, {"isl_osl": cv, "leave_one_layout_out": lolo, "leave_one_group_out": logo}
