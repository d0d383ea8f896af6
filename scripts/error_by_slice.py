"""The model's error on held-out families, by slice, against the nearest-point lookup measured in the same run.

Seven families the fit never sees:

1. the other output length: fit on ISL/OSL 1k1k, predict 1k8k, and back (``fidelity.cross_validate``);
2. whole stacks: each (hardware, framework, model, precision, speculation) group held out in turn, Dynamo and
   SGLang-disagg among them (``fidelity.leave_out(..., "group")``);
3. the longest prompts: the AgentX Kimi K2.5 points (75-120K-token prompts, healthy: hit rate >= 0.9, concurrency
   <= 8), each accelerator's prefill-attention efficiency fitted on the other accelerator's points only; and (3b)
   the points above the median prompt predicted from the points at or below it (every term fitted on them);
4. another stack under agent traffic: DeepSeek R1 on vLLM B200 (InferenceX multi-turn, ``replay.multiturn``): the
   healthy runs' mean TTFT and the measured decode steps' time per token, nothing fitted on them;
5. the same stack's single calls: four one-user runs' requests, each priced alone from its own cached and new
   tokens, as a replay prices a trace (each run's first request, a compile warm-up, left out);
6. another attention kernel at long prompts: each MiniMax M2.5 (GQA) stack on vLLM MI355X with the GQA attention
   efficiency of the other two (``agentic.stacks_held_out``);
7. official 8K-prompt points (``official_api_points.csv``, the InferenceX API's 8k1k DeepSeek R1 points), priced
   by the shipped fit; and the model's error at 8K over its error at 1K inside each run (the same engine), with
   the share of a disaggregated first token the fitted hand-off carries, and a bound: the error left with each
   stack's 8K prefill speed chosen on its own 8K points.

The lookup is the measured point of the same hardware, framework and model nearest in ISL, OSL, concurrency and
decode GPUs (``fidelity.nearest_lookup``) among the points the fit had (AgentX: the same accelerator's other healthy
points, nearest in concurrency and prompt length; DeepSeek: the same tensor-parallel size's nearest other run or
decode measurement; a single call: the same run's nearest other call in new tokens, then prompt length). Slices:
hardware, framework, serving, concurrency band, prompt length, and where a family has them, tensor-parallel size
and new tokens per call. Targets (issue 28, on an unseen 8K-prompt family): median APE TTFT <= 15 %, TPOT <= 6 %,
E2E <= 7 %, p90 TTFT <= 60 %, at most 5 points more than 5x off in any metric. About 1.5 min on one core.

    python scripts/error_by_slice.py [POINTS.csv]
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import polars as pl

METRICS = ("ttft", "tpot", "e2e")
SLICES = ("hardware", "framework", "serving", "conc_band", "prompt", "tp", "new_tokens", "stack", "run")


def _ape(pred: pl.Expr, meas: pl.Expr) -> pl.Expr:
    return ((pred - meas).abs() / meas)


def _stats(t: pl.DataFrame, side: str) -> dict[str, Any]:
    from agentprof.replay.fidelity import off_by

    out: dict[str, Any] = {"points": t.height, "off5": off_by(t, 5.0, side)}
    for m in METRICS:
        a = t.select(_ape(pl.col(f"{side}_{m}"), pl.col(f"meas_{m}")).alias("a"))["a"].drop_nulls().drop_nans()
        out[m] = (float(a.median()), float(a.quantile(0.9))) if a.len() else (float("nan"), float("nan"))
    return out


def _with_slices(t: pl.DataFrame) -> pl.DataFrame:
    from agentprof.replay.fidelity import CONC_BANDS

    band = pl.lit(CONC_BANDS[-1][2])
    for _lo, hi, name in reversed(CONC_BANDS[:-1]):
        band = pl.when(pl.col("conc").cast(pl.Float64) <= hi).then(pl.lit(name)).otherwise(band)
    serving = pl.when(pl.col("layout").str.starts_with("p")).then(pl.lit("disaggregated")).otherwise(
        pl.lit("aggregated"))
    prompt = pl.when(pl.col("isl") >= 16384).then(pl.lit(">= 16K")).otherwise(
        pl.col("isl").cast(pl.Int64).cast(pl.String))
    return t.with_columns(band.alias("conc_band"), serving.alias("serving"), prompt.alias("prompt"))


def _pct(v: float) -> str:
    return "—" if not np.isfinite(v) else f"{100 * v:.1f}"


def _row(name: str, t: pl.DataFrame) -> str:
    m, b = _stats(t, "pred"), _stats(t, "base")
    cells = [f"{_pct(m[k][0])} / {_pct(b[k][0])}" for k in METRICS]
    return (f"| {name} | {t.height} | " + " | ".join(cells) + f" | {_pct(m['ttft'][1])} / {_pct(b['ttft'][1])} | "
            f"{m['off5']} / {b['off5']} |")


def table(title: str, t: pl.DataFrame) -> None:
    """Model against lookup on the points both answer, overall and by slice (median APE in %, p90 TTFT in %,
    points more than 5x off in any metric)."""
    t = _with_slices(t.filter(pl.col("covered") & pl.any_horizontal(
        [pl.col(f"base_{m}").is_not_null() for m in METRICS if f"base_{m}" in t.columns])))
    print(f"\n**{title}** (model / lookup: median APE %, p90 TTFT %, points > 5x off in any metric)\n")
    print("| slice | points | TTFT | TPOT | E2E | p90 TTFT | > 5x |\n|---|---|---|---|---|---|---|")
    print(_row("all", t))
    for by in SLICES:
        if by not in t.columns:
            continue
        groups = sorted(t.group_by(by), key=lambda kv: str(kv[0][0]))
        if len(groups) < 2:
            continue
        for (k,), g in groups:
            print(_row(f"{by.replace('_', ' ')}: {k}", g))


def isl_osl(df: pl.DataFrame) -> pl.DataFrame:
    from agentprof.replay.fidelity import cross_validate, nearest_lookup

    cv = cross_validate(df)
    parts = []
    for fold, g in cv["table"].group_by("fit_on"):
        isl, osl = (int(x) for x in str(fold[0]).split("/"))
        train = df.filter((pl.col("isl") == isl) & (pl.col("osl") == osl))
        test = df[g["row"].to_list()]
        parts.append(pl.concat([g, nearest_lookup(test, train, SAME)], how="horizontal"))
    return pl.concat(parts)


def whole_stacks(df: pl.DataFrame) -> pl.DataFrame:
    from agentprof.replay.fidelity import leave_out, nearest_lookup

    t = leave_out(df, "group")["table"].drop("base_ttft", "base_tpot", "base_e2e")
    parts = []
    for (_name,), g in t.group_by("held_out"):
        rows = g["row"].to_list()
        keep = np.ones(df.height, dtype=bool)
        keep[rows] = False
        parts.append(pl.concat([g, nearest_lookup(df[rows], df.filter(pl.Series(keep)), SAME)], how="horizontal"))
    return pl.concat(parts)


SAME = ("hardware", "framework", "model_prefix")


def _kimi() -> tuple[Any, Any, pl.DataFrame, Any]:
    """(catalog, the shipped fit, the AgentX Kimi points with the servers' measured queue waits, a function of
    Kimi rows refitting vLLM-on-MI355X's decode step, which no fixed-sequence group has, on them and the other
    models' one-user points: ``enginestep.refit_with``)."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.agentic import load_agentic
    from agentprof.replay.calibration import (
        DEFAULT_AGENTIC,
        DEFAULT_AGENTIC_METRICS,
        DEFAULT_AGENTIC_OTHER,
        load_fitted,
    )
    from agentprof.replay.enginestep import refit_with

    cat, base = load_catalog(), load_fitted()
    refit = refit_with(base, cat, [load_agentic(DEFAULT_AGENTIC_OTHER)])
    return cat, base, load_agentic(DEFAULT_AGENTIC, DEFAULT_AGENTIC_METRICS), refit


def agentx() -> pl.DataFrame:
    """The healthy AgentX points, each accelerator predicted with the attention efficiency, think time and decode
    steps of the other accelerator's points (vLLM-on-MI355X's step, which only its own points and the other models'
    set, from the latter), as ``devices fit`` stores it; the lookup is the same accelerator's nearest other healthy
    point."""
    from agentprof.replay.agentic import held_out_predictions

    cat, fitted, rows, refit = _kimi()
    out = []
    for own, p in held_out_predictions(rows, fitted, cat, refit):
        eta = float(p["eta"][0])
        p = p.with_columns(meas_tpot=pl.col("meas_itl"), pred_tpot=pl.col("pred_itl"),
                           meas_e2e=pl.Series(own["mean_e2el"].cast(pl.Float64)))
        out_tok = own["mean_output_tokens_actual"].cast(pl.Float64)
        p = p.with_columns(pred_e2e=pl.col("pred_ttft") + (out_tok - 1.0).clip(0) * pl.col("pred_itl"))
        # the lookup: the same accelerator's nearest other healthy point (concurrency, then prompt length)
        c = own["conc"].cast(pl.Float64).to_numpy()
        n = own["mean_input_tokens"].cast(pl.Float64).to_numpy()
        near = [_nearest([c, n], i, np.ones(own.height, dtype=bool)) for i in range(own.height)]
        base = [(own["mean_ttft"][j], own["mean_itl"][j], own["mean_e2el"][j]) for j in near]
        out.append(p.with_columns(
            *(pl.Series(f"base_{m}", [b[k] for b in base], dtype=pl.Float64) for k, m in enumerate(METRICS)),
            framework=pl.lit("vllm"), layout=pl.lit(f"tp{own['tp'][0]}"), covered=pl.lit(True),
            isl=pl.Series(n), eta=pl.lit(eta)))
    return pl.concat(out, how="diagonal_relaxed")


def agentx_longest() -> tuple[pl.DataFrame, float]:
    """The literal proxy: the healthy AgentX points with prompts above the median predicted from those at or below
    it (each accelerator's attention efficiency, the think time and vLLM-on-MI355X's decode step from its shorter
    points, the step with the other models' points: ``agentic.held_out_longest``); the lookup is the same
    accelerator's nearest shorter point (concurrency, then prompt length). Returns the table and the cut in
    tokens."""
    from agentprof.replay.agentic import accelerator_of, fit_rows, held_out_longest

    cat, fitted, rows, refit = _kimi()
    own, p, cut = held_out_longest(rows, fitted, cat, refit)
    healthy = fit_rows(rows)
    acc = np.array([accelerator_of(h, cat) for h in healthy["hw"].to_list()])
    c, n = healthy["conc"].cast(pl.Float64).to_numpy(), healthy["mean_input_tokens"].cast(pl.Float64).to_numpy()
    short = n <= cut
    near = [_nearest([c, n], i, (acc == acc[i]) & short) for i in np.flatnonzero(~short)]
    base = [(healthy["mean_ttft"][j], healthy["mean_itl"][j], healthy["mean_e2el"][j]) for j in near]
    out_tok = own["mean_output_tokens_actual"].cast(pl.Float64)
    p = p.with_columns(meas_tpot=pl.col("meas_itl"), pred_tpot=pl.col("pred_itl"),
                       meas_e2e=pl.Series(own["mean_e2el"].cast(pl.Float64)),
                       pred_e2e=pl.col("pred_ttft") + (out_tok - 1.0).clip(0) * pl.col("pred_itl"),
                       framework=pl.lit("vllm"), layout=pl.format("tp{}", pl.col("tp")), covered=pl.lit(True),
                       isl=pl.col("input_tokens"))
    return p.with_columns(*(pl.Series(f"base_{m}", [b[k] for b in base], dtype=pl.Float64)
                            for k, m in enumerate(METRICS))), cut


def other_model() -> pl.DataFrame:
    """A second attention kernel at long prompts: the healthy AgentX MiniMax M2.5 points (GQA; vLLM on MI355X,
    three stacks), each stack priced with the GQA attention efficiency fitted on the other two
    (``agentic.stacks_held_out``) and the decode step fitted without it; the lookup is the nearest point of another stack (concurrency, then prompt
    length)."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.agentic import attention_rows, fit_rows, load_agentic, stack_keys, stacks_held_out
    from agentprof.replay.calibration import DEFAULT_AGENTIC, DEFAULT_AGENTIC_OTHER, load_fitted
    from agentprof.replay.enginestep import refit_with

    cat = load_catalog()
    other = load_agentic(DEFAULT_AGENTIC_OTHER)
    own = fit_rows(attention_rows(other, cat, "gqa"))
    kimi, base = load_agentic(DEFAULT_AGENTIC), load_fitted()
    parts = []
    for key in sorted(set(stack_keys(own, cat))):
        # the decode step of vLLM on MI355X fitted without the stack predicted (Kimi's and the other stacks' points)
        rest = other.filter(pl.Series([k != key for k in stack_keys(other, cat)]))
        parts.append(stacks_held_out(own, refit_with(base, cat, [kimi])(rest), cat, only=key))
    p = pl.concat(parts, how="diagonal_relaxed")
    stack = p["stack"].to_numpy()
    c, n = p["conc"].cast(pl.Float64).to_numpy(), p["input_tokens"].to_numpy()
    near = [_nearest([c, n], i, stack != stack[i]) for i in range(p.height)]
    return p.with_columns(
        *(pl.Series(f"base_{m}", p[col].to_numpy()[near], dtype=pl.Float64)
          for m, col in (("ttft", "meas_ttft"), ("tpot", "meas_itl"), ("e2e", "meas_e2e"))),
        meas_tpot=pl.col("meas_itl"), pred_tpot=pl.col("pred_itl"),
        pred_e2e=pl.col("pred_ttft") + (pl.col("output_tokens") - 1.0).clip(0) * pl.col("pred_itl"),
        framework=pl.lit("vllm"), layout=pl.format("tp{}", pl.col("tp")), covered=pl.lit(True), isl=pl.Series(n))


def _nearest(keys: list[np.ndarray], i: int, same: np.ndarray) -> int:
    """The index of the row nearest row ``i`` in log2 distance over ``keys`` among rows with ``same`` true (not i)."""
    d = sum(np.abs(np.log2(k / k[i])) for k in keys)
    d[i] = np.inf
    d[~same] = np.inf
    return int(np.argmin(d))


def multiturn() -> pl.DataFrame:
    """DeepSeek R1 on vLLM B200 (InferenceX multi-turn), a stack the fit never saw, with the attention efficiency of
    the Kimi AgentX points: the healthy runs' mean TTFT and each decode measurement's time per token. The lookup is
    the same tensor-parallel size's nearest other run (users, then prompt length) or decode measurement (running
    batch, then context)."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.multiturn import decode_check, load_decode, load_runs, ttft_check

    cat, fitted, runs = load_catalog(), load_fitted(), load_runs()
    t = ttft_check(runs, fitted, cat)
    pts = runs.filter(pl.col("m_prompt_tokens").is_not_null())
    tp, c = t["tp"].to_numpy(), t["conc"].cast(pl.Float64).to_numpy()
    n = t["input_tokens"].to_numpy()
    base = [t["meas_ttft"][_nearest([c, n], i, tp == tp[i])] for i in range(t.height)]
    a = t.select("hardware", "tp", "conc", "meas_ttft", "pred_ttft").with_columns(
        base_ttft=pl.Series(base, dtype=pl.Float64), isl=pl.Series(n))
    d = decode_check(load_decode(), pts, fitted, cat)
    dtp, b, x = d["tp"].to_numpy(), d["running"].cast(pl.Float64).to_numpy(), d["ctx"].to_numpy()
    dbase = [d["meas_itl"][_nearest([b, x], i, dtp == dtp[i])] for i in range(d.height)]
    e = d.select("tp", pl.col("running").alias("conc"), pl.col("meas_itl").alias("meas_tpot"),
                 pl.col("pred_itl").alias("pred_tpot")).with_columns(
        hardware=pl.lit("b200"), base_tpot=pl.Series(dbase, dtype=pl.Float64), isl=pl.Series(x))
    out = pl.concat([a, e], how="diagonal_relaxed")
    return out.with_columns(*(pl.lit(None, dtype=pl.Float64).alias(f"{s}_e2e") for s in ("meas", "pred", "base")),
                            framework=pl.lit("vllm"), layout=pl.format("tp{}", "tp"), covered=pl.lit(True))


def single_calls() -> pl.DataFrame:
    """The one-user DeepSeek R1 runs' requests priced alone (``multiturn.call_check``), first requests left out; the
    lookup is the same run's nearest other call (new tokens, then prompt length)."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.multiturn import call_check, load_requests, load_runs

    t = call_check(load_requests(), load_runs(), load_fitted(), load_catalog()).filter(~pl.col("first"))
    run = t["run_folder"].to_numpy()
    new, n = t["new"].to_numpy().clip(1.0), t["input_tokens"].cast(pl.Float64).to_numpy()
    base = [t["meas_ttft"][_nearest([new, n], i, run == run[i])] for i in range(t.height)]
    bands = pl.when(pl.col("new") < 1000).then(pl.lit("< 1K")).when(pl.col("new") < 10000).then(
        pl.lit("1-10K")).otherwise(pl.lit(">= 10K"))
    empty = [pl.lit(None, dtype=pl.Float64).alias(f"{s}_{m}") for s in ("meas", "pred", "base") for m in ("tpot", "e2e")]
    return t.select("tp", "meas_ttft", "pred_ttft").with_columns(
        *empty, base_ttft=pl.Series(base, dtype=pl.Float64), isl=pl.Series(n), new_tokens=t.select(bands).to_series(),
        hardware=pl.lit("b200"), conc=pl.lit(1), framework=pl.lit("vllm"), layout=pl.format("tp{}", "tp"),
        covered=pl.lit(True))


OFFICIAL = "data/inferencex/official_api_points.csv"
HELD_OUT_ISL = 8192
"""The official points' prompt length the fit never sees (family 7)."""


def priced(api: pl.DataFrame) -> pl.DataFrame:
    """Every official point (``api``) priced once by the shipped fit, with its run and speculation."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.fidelity import check

    return check(api, load_fitted(), load_catalog()).table.with_columns(api.select("run_id", "spec_decoding"))


def official(points: pl.DataFrame, api: pl.DataFrame, t: pl.DataFrame) -> pl.DataFrame:
    """The official points at :data:`HELD_OUT_ISL`/1024 (8K prompts: never fitted on) as :func:`priced` prices
    them (``t``), beside the nearest calibration point of the same hardware, framework and model. Slices:
    ``stack``, whether the calibration has the point's hardware/framework/model/precision/speculation group, and
    ``run``, whether it has the point's run (the same software: the rest are later or earlier engine versions)."""
    from agentprof.replay.fidelity import nearest_lookup

    at = (api["isl"] == HELD_OUT_ISL) & (api["osl"] == 1024)
    rows = api.filter(at)
    group = ("hardware", "framework", "model_prefix", "precision", "spec_decoding")
    seen = set(points.select(group).unique().iter_rows())
    runs = set(points["run_id"].to_list())
    out = pl.concat([t.filter(at), nearest_lookup(rows, points, SAME)], how="horizontal").with_columns(
        stack=pl.Series(["calibrated" if r in seen else "unseen" for r in rows.select(group).iter_rows()]),
        run=pl.Series(["a calibration run" if r in runs else "another run" for r in rows["run_id"].to_list()]))
    return out.filter(pl.col("level") != "")  # the rest cannot be priced (their reason: ``unpriced``)


def unpriced(t: pl.DataFrame) -> str:
    """The official points at :data:`HELD_OUT_ISL`/1024 the model cannot price (``t``: :func:`priced`), counted by
    reason."""
    left = t.filter((pl.col("isl") == HELD_OUT_ISL) & (pl.col("osl") == 1024) & (pl.col("level") == ""))
    return "; ".join(f"{n} left out: {w}" for w, n in left.group_by("why").len().sort("why").rows()) or "none left out"


def held_out_line(points: pl.DataFrame, t: pl.DataFrame) -> str:
    """The model on every official point with a prompt longer than the calibration's (``t``: :func:`priced`), as
    ``devices check --held-out-prompts`` and the demo state it (:func:`agentprof.replay.fidelity.summarize`)."""
    from agentprof.replay.fidelity import longer_prompts, summarize

    s = summarize(longer_prompts(t, points))
    return (f"all {s['covered']} points (the model; no lookup where the calibration lacks the hardware and engine): "
            + ", ".join(f"{m.upper()} {_pct(s[m]['median_ape'])} %" for m in METRICS)
            + f", p90 TTFT {_pct(s['ttft']['p90_ape'])} %, {s['off_5x']} > 5x")


def _8k_beside_1k(t: pl.DataFrame, keys: list[str], cols: tuple[str, ...]) -> pl.DataFrame:
    """Per ``keys`` group of 1K-output points, the median of each of ``cols`` at :data:`HELD_OUT_ISL` prompts beside
    the same at 1K prompts (suffix ``_1k``): the groups measured at both."""
    med = t.filter(pl.col("osl") == 1024).group_by([*keys, "isl"]).agg(pl.col(c).median() for c in cols)
    return med.filter(pl.col("isl") == HELD_OUT_ISL).join(med.filter(pl.col("isl") == 1024), on=keys, suffix="_1k")


def shift_within_runs(t: pl.DataFrame) -> str:
    """How the model's error moves from 1K to 8K prompts inside one run (the same software, stack and recipes): per
    run and group, the median predicted/measured TTFT and TPOT at 8k1k over the same at 1k1k (``t``: :func:`priced`);
    their median and quartiles across runs."""
    t = t.with_columns(rt=pl.col("pred_ttft") / pl.col("meas_ttft"), rp=pl.col("pred_tpot") / pl.col("meas_tpot"))
    j = _8k_beside_1k(t, ["run_id", "hardware", "framework", "model", "precision", "spec_decoding"], ("rt", "rp"))
    q = {m: [float((j[m] / j[f"{m}_1k"]).quantile(x)) for x in (0.25, 0.5, 0.75)] for m in ("rt", "rp")}
    return (f"within a run, 8k1k over 1k1k (predicted/measured, median [quartiles] over {j.height} runs and groups): "
            f"TTFT {q['rt'][1]:.2f} [{q['rt'][0]:.2f}–{q['rt'][2]:.2f}], "
            f"TPOT {q['rp'][1]:.2f} [{q['rp'][0]:.2f}–{q['rp'][2]:.2f}]")


def prefill_step(t: pl.DataFrame) -> str:
    """What the prompt's last 7K tokens cost: the 8K-minus-1K first token at <= 8 clients (``t``: :func:`priced`),
    predicted over measured, per run, stack, layout and load; median and quartiles, and the stacks with 3 or more
    such pairs at both ends."""
    k = ["run_id", "hardware", "framework", "precision", "spec_decoding", "layout", "conc"]
    t = t.filter((pl.col("level") != "") & (pl.col("conc") <= 8))
    j = _8k_beside_1k(t, k, ("pred_ttft", "meas_ttft")).filter(pl.col("meas_ttft") > pl.col("meas_ttft_1k"))
    j = j.with_columns(
        r=(pl.col("pred_ttft") - pl.col("pred_ttft_1k")) / (pl.col("meas_ttft") - pl.col("meas_ttft_1k")),
        stack=pl.concat_str("hardware", "framework", "precision", separator="/"))
    q = [float(j["r"].quantile(x)) for x in (0.25, 0.5, 0.75)]
    by = j.group_by("stack").agg(pl.len(), pl.col("r").median()).filter(pl.col("len") >= 3).sort("r")
    lo, hi = by.row(0, named=True), by.row(-1, named=True)
    return (f"8K minus 1K first token at <= 8 clients (same run, layout and load), predicted over measured: median "
            f"{q[1]:.2f} [{q[0]:.2f}–{q[2]:.2f}] over {j.height}; by stack (3 or more) from {lo['r']:.2f} "
            f"({lo['stack']}) to {hi['r']:.2f} ({hi['stack']})")


BOUND_FACTORS = tuple(2.0 ** (k / 4.0) for k in range(-6, 7))
"""Multipliers of a stack's prefill compute the bound (:func:`prefill_bound`) chooses among: 0.35-2.8x."""


def prefill_bound(api: pl.DataFrame) -> str:
    """How far knowing each stack's 8K prefill speed would take the model: every official 8K point priced with its
    prefill compute (GEMMs and attention) scaled by the one factor of :data:`BOUND_FACTORS` that gives its group's
    points the smallest median TTFT error, per stack and per run. Chosen on the held-out points themselves: a
    bound on what a better prefill speed can do, not a prediction."""
    import dataclasses

    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.fidelity import check, summarize
    from agentprof.replay.points import point_features

    cat, fit = load_catalog(), load_fitted()
    api = api.filter((pl.col("isl") == HELD_OUT_ISL) & (pl.col("osl") == 1024))
    f = point_features(api, cat)
    fields = ("pf_gemm_s", "pf_attn_s", "pf_attn_fresh_s", "pf_gemm_rank_s")
    by_factor = []
    for g in BOUND_FACTORS:
        w = dataclasses.replace(f.work, **{k: getattr(f.work, k) * g for k in fields if getattr(f.work, k) is not None})
        t = check(api, fit, cat, dataclasses.replace(f, work=w)).table.with_columns(api.select("run_id", "spec_decoding"))
        by_factor.append(t.filter((pl.col("level") != "") & pl.col("covered")))
    out = []
    for name, keys in (("stack", ["hardware", "framework", "precision", "spec_decoding"]),
                       ("run", ["hardware", "framework", "precision", "spec_decoding", "run_id"])):
        score = pl.concat([t.group_by(keys).agg(pl.col("ape_ttft").median().alias("e")).with_columns(i=pl.lit(i))
                           for i, t in enumerate(by_factor)])
        best = score.sort("e", "i", nulls_last=True).group_by(keys, maintain_order=True).first().select(*keys, "i")
        chosen = pl.concat([t.join(best.filter(pl.col("i") == i), on=keys, how="semi") for i, t in enumerate(by_factor)])
        s = summarize(chosen)
        srv = {k: v["ttft"]["median_ape"] for k, v in s["by_serving"].items()}
        out.append(f"per {name}: " + " / ".join(_pct(s[m]["median_ape"]) for m in METRICS)
                   + f" %, p90 TTFT {_pct(s['ttft']['p90_ape'])} %, {s['off_5x']} > 5x (TTFT aggregated "
                   f"{_pct(srv['aggregated'])} %, disaggregated {_pct(srv['disaggregated'])} %)")
    return ("each stack's 8K prefill speed chosen on its own 8K points (0.35-2.8x, a bound), TTFT / TPOT / E2E: "
            + "; ".join(out))


def handoff_share(api: pl.DataFrame, t: pl.DataFrame) -> str:
    """What a disaggregated first token rests on: the fitted hand-off's median share of the predicted TTFT (the
    official points priced again with every unit's hand-off at zero steps, the scheduler's polling kept), at 1K and
    8K prompts; and the model's TTFT on the official 1K points, which the fit had (``t``: :func:`priced`)."""
    import dataclasses

    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import PARAMS, load_fitted
    from agentprof.replay.fidelity import check

    fit = load_fitted()
    h = PARAMS.index("handoff")

    def without(e: Any) -> Any:
        theta = e.theta.copy()
        theta[h] = 1e-9
        return dataclasses.replace(e, theta=theta)

    bare = dataclasses.replace(fit, entries={lv: {k: without(e) for k, e in es.items()}
                                             for lv, es in fit.entries.items()})
    t0 = check(api, bare, load_catalog()).table
    s = _with_slices(t.with_columns(share=1.0 - t0["pred_ttft"] / t["pred_ttft"],
                                    ape=_ape(pl.col("pred_ttft"), pl.col("meas_ttft")))).filter(pl.col("level") != "")
    dis = s.filter((pl.col("serving") == "disaggregated") & (pl.col("osl") == 1024))
    share = {isl: float(dis.filter(pl.col("isl") == isl)["share"].median()) for isl in (1024, HELD_OUT_ISL)}
    ape = {k: float(s.filter((pl.col("isl") == 1024) & (pl.col("serving") == k))["ape"].median())
           for k in ("aggregated", "disaggregated")}
    return (f"disaggregated first tokens rest on the fitted hand-off: median {share[1024]:.0%} of the predicted TTFT "
            f"at 1K prompts, {share[HELD_OUT_ISL]:.0%} at 8K; the fit's own DeepSeek 1K points (official): TTFT "
            f"{ape['aggregated']:.1%} aggregated, {ape['disaggregated']:.1%} disaggregated")


def main(argv: list[str]) -> int:
    from agentprof.replay.points import load_points

    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    df = load_points(argv[0] if argv else "data/inferencex/calibration_points.csv")
    ax = agentx()
    etas = ", ".join(f"{h} {e:.3f}" for h, e in ax.select("hardware", "eta").unique().sort("hardware").rows())
    table("1. Longer outputs: fit on one ISL/OSL setting, predict the other", isl_osl(df))
    table("2. Whole stacks: each hardware/framework/model/precision/speculation group held out", whole_stacks(df))
    table(f"3. Longest prompts: AgentX 75-120K tokens, attention efficiency from the other accelerator ({etas})", ax)
    lx, cut = agentx_longest()
    etas = ", ".join(f"{h} {e:.3f}" for h, e in lx.select("hardware", "eta").unique().sort("hardware").rows())
    table(f"3b. Longest prompts from the shorter: AgentX points above the median prompt ({cut:,.0f} tokens), "
          f"attention efficiency from each accelerator's shorter points ({etas})", lx)
    table("4. Another stack held out: DeepSeek R1 on vLLM B200, Claude Code traffic (InferenceX multi-turn): "
          "healthy runs' TTFT, decode steps' time per token", multiturn())
    table("5. The same stack's single calls, each priced alone (four one-user runs, first requests left out)",
          single_calls())
    table("6. Another attention kernel at long prompts: MiniMax M2.5 (GQA) on vLLM MI355X, AgentX, each stack "
          "with the GQA efficiency of the other two", other_model())
    api = load_points(OFFICIAL)
    t = priced(api)
    off = official(df, api, t)
    table("7. Official 8K-prompt points (InferenceX API, 8k1k, DeepSeek R1), the shipped fit", off)
    print("\n" + held_out_line(df, t) + f" ({unpriced(t)})")
    print(shift_within_runs(t))
    print(prefill_step(t))
    print(handoff_share(api, t))
    print(prefill_bound(api))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
