"""``agentprof devices fit`` as one step: the free terms on the fixed-sequence points (:mod:`.calibration`), the
decode step of engines those points lack on an accelerator (:mod:`.enginestep`), then the prefill-attention
efficiency on the AgentX long-prompt points (:mod:`.agentic`), pooled and per accelerator, for MLA (Kimi K2.5) and
GQA (MiniMax M2.5) kernels, with the provenance that ``fitted.toml`` stores. The modules import downwards only;
this one joins them."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from agentprof import __version__
from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.replay.agentic import (
    attention_rows,
    fit_attn_eff,
    fit_attn_eff_per_accelerator,
    held_out_summary,
    load_agentic,
    predictions,
    stacks_held_out,
    summarize,
)
from agentprof.replay.calibration import (
    DEFAULT_AGENTIC,
    DEFAULT_AGENTIC_METRICS,
    DEFAULT_AGENTIC_OTHER,
    DEFAULT_POINTS,
    METHOD,
    Fitted,
    file_sha256,
    fit,
)
from agentprof.replay.enginestep import fit_engine_steps, refit_with
from agentprof.replay.points import load_points
from agentprof.resources import shipped


def fit_gqa(path: str | Path, fitted: Fitted, cat: HardwareCatalog) -> tuple[dict[str, float], dict[str, Any]]:
    """The GQA kernels' prefill-attention efficiency on the AgentX points of GQA models (MiniMax M2.5 on vLLM
    MI355X runs ROCm's AITER flash attention, where Kimi K2.5's MLA runs AITER's MLA kernels, the servers' logs
    [S47]): pooled and per accelerator, each stack also predicted from the others' (``gqa_held_out_*``). Returns
    ``({"pooled": η, <accelerator>: η}, provenance)``; empty where the file holds no GQA point the catalog places."""
    rows = attention_rows(load_agentic(path), cat, "gqa")
    pooled, info = fit_attn_eff(rows, fitted, cat)
    if not info.get("points"):
        return {}, {}
    by_acc, acc_info = fit_attn_eff_per_accelerator(rows, fitted, cat)
    out = {"gqa_data_file": str(path), "gqa_data_sha256": file_sha256(path), "gqa_attn_eff_pooled": pooled,
           **{f"gqa_{k}": v for k, v in info.items() if k not in ("attn_eff", "healthy_hit_rate_min",
                                                                     "max_concurrency")},
           **{f"gqa_{k}": v for k, v in acc_info.items()}}
    held = stacks_held_out(rows, fitted, cat)
    if held.height:
        s = summarize(held)
        out.update({"gqa_held_out_points": s["points"], "gqa_held_out_median_ape_ttft": s["median_ape_ttft"],
                    "gqa_held_out_median_ape_itl": s["median_ape_itl"]})
    return {"pooled": pooled, **by_acc}, out


def fit_file(points: str | Path = DEFAULT_POINTS, cat: HardwareCatalog | None = None,
             agentic_points: str | Path | None = DEFAULT_AGENTIC,
             other_points: str | Path | None = DEFAULT_AGENTIC_OTHER,
             agentic_metrics: str | Path | None = DEFAULT_AGENTIC_METRICS) -> Fitted:
    """Fit on a points CSV and attach the provenance (file, hash, date, method, points used).

    With ``agentic_points`` (the AgentX long-prompt points, when the file exists) the global prefill-attention
    efficiency is fitted on them and the points are refitted with it, twice (it barely moves 1K-prompt fits);
    then each accelerator's own efficiency on its own points (``attn_eff_by_accelerator``; the pooled one stays the
    fallback), with the per-block host time its recipe lists (``scheduling.toml [block_host]``) separated, as in the
    pooled one: that time is the recipe's (vLLM's ``--block-size=1``), not the accelerator's. With
    ``other_points`` (the other models' AgentX points) the GQA kernels get their own (:func:`fit_gqa`). With
    ``agentic_metrics`` (vLLM's own metrics of those runs) a point's measured queue wait is left out of the first
    token its attention efficiency is fitted on (:func:`~agentprof.replay.agentic.with_server_queue`)."""
    points = shipped(points)  # the defaults are repository paths; an installed wheel carries copies
    agentic_points = shipped(agentic_points) if agentic_points is not None else None
    cat = cat or load_catalog()
    df = load_points(points)
    fitted = fit(df, cat)
    agentic: dict[str, Any] = {}
    if agentic_points is not None and Path(agentic_points).is_file():
        metrics = shipped(agentic_metrics) if agentic_metrics is not None else None
        adf = load_agentic(agentic_points, metrics if metrics is not None and Path(metrics).is_file() else None)
        other = shipped(other_points) if other_points is not None else None
        frames = [adf] + ([load_agentic(other)] if other is not None and Path(other).is_file() else [])
        # the decode step of engines the fixed-sequence points lack on an accelerator (vLLM on MI355X), from the
        # single-user points; the TTFT fits below see each point's users in the server through its E2E
        steps, step_info = fit_engine_steps(frames, fitted, cat)
        fitted.engine_steps = steps
        for _ in range(2):
            # the pooled fallback (accelerators without AgentX points, and the fixed-sequence fits) with the recipes'
            # per-block host time separated as the per-accelerator fits below separate it: folded in, MI355X's
            # --block-size=1 host time made every other accelerator's attention slower (0.077 against 0.121)
            eta, agentic = fit_attn_eff(adf, fitted, cat)
            fitted = fit(df, cat, eta)
            steps, step_info = fit_engine_steps(frames, fitted, cat)
            fitted.engine_steps = steps
        # each accelerator's own eta on its own points, with the terms the pooled eta fitted (a 1K-token prompt's
        # attention is ~3 % of its prefill, so the fixed-sequence fit keeps the pooled value)
        by_acc, acc_info = fit_attn_eff_per_accelerator(adf, fitted, cat)
        # the stored errors describe the shipped fit: the points were refitted with eta after its search
        agentic.update(summarize(predictions(adf, fitted, cat, eta, by_acc)))
        # each accelerator from the others' efficiency and decode steps
        agentic.update(held_out_summary(adf, fitted, cat, refit_with(fitted, cat, frames[1:])))
        queue_file = ({"queue_data_file": str(metrics), "queue_data_sha256": file_sha256(metrics),
                       "queue_points": int(adf["meas_queue"].is_not_null().sum())} if "meas_queue" in adf.columns else {})
        agentic = {"data_file": str(agentic_points), "data_sha256": file_sha256(agentic_points), **queue_file, **agentic,
                   "attn_eff_pooled": eta, **acc_info, **step_info}
        del agentic["attn_eff"]
        fitted.attn_eff_by_accelerator = by_acc
        if other is not None and Path(other).is_file():  # the GQA kernels, on the other models' points
            gqa, gqa_info = fit_gqa(other, fitted, cat)
            if gqa:
                fitted.attn_eff_by_attention = {"gqa": gqa}
                agentic.update(gqa_info)
    used = sum(e.points for e in fitted.entries["layout"].values())
    fitted.provenance = {
        "data_file": str(points), "data_sha256": file_sha256(points),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "method": METHOD, "agentprof_version": __version__, "points_in_file": df.height, "points_used": used,
    }
    fitted.agentic = agentic
    return fitted
