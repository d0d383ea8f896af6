"""The seed check: what the calibrated model predicts for the seeds' Jalapeño InferenceX 8K1K claims.

For GPT-OSS 120B, DeepSeek R1 and Kimi K2.5 it predicts, at ISL/OSL 8192/1024 with the InferenceX length
distribution, the min time-between-tokens (TPOT at concurrency 1), the min end-to-end latency and the peak
throughput per GPU (swept over concurrency) of the Jalapeño estimate (``systems.toml [jalapeno]``) and of
the GPU baseline configuration the claim compares against (its fitted parameters), and sets them against
the claims and the measured baselines in ``catalog/seed_claims.toml``. ``agentprof devices seed-check``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from agentprof.catalog import CATALOG_DIR, read_toml
from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.replay.calibration import Fitted, load_fitted
from agentprof.replay.costmodel import StepParams
from agentprof.replay.points import PARAMS, layout_columns, point_features, predict
from agentprof.replay.systems import Resolved, resolve

CLAIMS_PATH = CATALOG_DIR / "seed_claims.toml"
CONCURRENCY_SWEEP = tuple(2 ** i for i in range(13))


def theta_of(p: StepParams, layers: float) -> np.ndarray:
    """The per-point parameter vector of :func:`points.predict` for declared/resolved step parameters."""
    vals = {"tau_s": p.t_fixed_s / layers, "kappa": 0.0, "mbu": p.mbu, "mfu": p.mfu, "t0_s": p.t0_s, "q": p.q,
            "t_req_s": p.t_req_s, "accept": p.accept, "mfu_pf": p.prefill_mfu}
    return np.array([vals[k] for k in PARAMS])


def _rows(base: dict[str, Any], concs: tuple[int, ...]) -> pl.DataFrame:
    return pl.DataFrame([{**base, "conc": c} for c in concs])


def _sweep(cat: HardwareCatalog, base: dict[str, Any], theta: np.ndarray, spec: str = "none",
           attn_eff: float = 1.0) -> dict[str, Any]:
    """TBT and E2E at concurrency 1 and peak throughput per GPU over the concurrency sweep."""
    df = _rows({**base, "spec_decoding": spec}, CONCURRENCY_SWEEP)
    f = point_features(df, cat)
    if not f.covered.all():
        raise ValueError(f.why[int(np.flatnonzero(~f.covered)[0])])
    ttft, tpot, e2e = predict(f, np.tile(theta, (len(f), 1)), attn_eff)
    gpus = float(base.get("num_gpus") or base.get("tp") or 1)
    isl_m, osl_m = 0.9 * base["isl"], 0.9 * base["osl"]
    tput = f.conc * (isl_m + osl_m) / e2e / gpus
    best = int(np.argmax(tput))
    return {"tbt_s": float(tpot[0]), "ttft_s": float(ttft[0]), "e2e_s": float(e2e[0]),
            "peak_tput_per_gpu": float(tput[best]), "peak_conc": int(f.conc[best]), "gpus": gpus}


def _jalapeno(cat: HardwareCatalog, model_key: str, isl: int, osl: int, accept: float | None = None
              ) -> tuple[Resolved, dict[str, Any]]:
    r = resolve(cat.system("jalapeno"), cat.models[model_key], cat, accept=accept)
    base = {"hardware": r.system.accelerator.key, "framework": r.framework, "model": model_key,
            "precision": r.precision, "isl": isl, "osl": osl, **layout_columns(f"tp{r.dep.gpus}-ep1")}
    spec = "mtp" if (accept or r.params.accept) > 1 else "none"
    return r, _sweep(cat, base, theta_of(r.params, r.dep.layers), spec, r.params.attn_eff)


def seed_check(cat: HardwareCatalog | None = None, fitted: Fitted | None = None) -> dict[str, Any]:
    """Predictions, claims and how far each claim lands from the model (``ratio_model / claim − 1``)."""
    cat = cat or load_catalog()
    fitted = fitted if fitted is not None else load_fitted()
    data = read_toml(CLAIMS_PATH)
    rows: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    jal = cat.accelerators["jalapeno"]
    for key, c in data["claims"].items():
        isl, osl = int(c["isl"]["value"]), int(c["osl"]["value"])
        r, j = _jalapeno(cat, key, isl, osl)
        params[key] = {**r.describe(), "hbm_bw_tb_s": jal.hbm_bw / 1e12, "hbm_gb": jal.hbm_bytes / 1e9}
        gpu: dict[str, Any] | None = None
        gpu_label = ""
        if "gpu_config" in c:
            cfg = c["gpu_config"]
            hw, fw, mk, prec, spec, layout = cfg.split("/")
            entry = fitted.entries["layout"].get(cfg)
            if entry is not None:
                base = {"hardware": hw, "framework": fw, "model": mk, "precision": prec, "isl": isl, "osl": osl,
                        **layout_columns(layout)}
                gpu = _sweep(cat, base, entry.theta, spec, fitted.attn_eff)
                gpu_label = f"fitted {cfg}"
        elif "gpu_system" in c:
            rg = resolve(cat.system(c["gpu_system"]), cat.models[key], cat, fitted)
            base = {"hardware": rg.system.accelerator.key, "framework": rg.framework, "model": key,
                    "precision": rg.precision, "isl": isl, "osl": osl, **layout_columns(f"tp{rg.dep.gpus}-ep1")}
            gpu = _sweep(cat, base, theta_of(rg.params, rg.dep.layers), attn_eff=rg.params.attn_eff)
            gpu_label = f"{c['gpu_system']}: {rg.calibration}"

        display = str(c.get("display", key))

        def row(metric: str, claim: float | None, base_meas: float | None, base_model: float | None,
                jal_val: float, better: str, note: str = "", display: str = display) -> dict[str, Any]:
            ratio_meas = None
            ratio_model = None
            if base_meas is not None:
                ratio_meas = base_meas / jal_val if better == "lower" else jal_val / base_meas
            if base_model is not None:
                ratio_model = base_model / jal_val if better == "lower" else jal_val / base_model
            lands = ratio_meas / claim - 1 if (claim and ratio_meas) else None
            return {"model": display, "metric": metric, "claim": claim,
                    "baseline_measured": base_meas, "baseline_model": base_model, "jalapeno_model": jal_val,
                    "ratio_vs_measured": ratio_meas, "ratio_vs_model_baseline": ratio_model,
                    "claim_lands": lands, "note": note}

        if "min_tbt_ratio" in c:
            rows.append(row("min time-between-tokens (s)", c["min_tbt_ratio"]["value"], c["baseline_tbt_s"]["value"],
                            gpu["tbt_s"] if gpu else None, j["tbt_s"], "lower", c.get("baseline_tbt_system", "")))
            rows.append(row("min end-to-end latency (s)", c["e2e_ratio"]["value"], c["baseline_e2e_s"]["value"],
                            gpu["e2e_s"] if gpu else None, j["e2e_s"], "lower"))
        if "tput_per_kw_ratio" in c:
            base_kw = c["baseline_tput_per_gpu"]["value"] / c["baseline_allin_kw"]["value"]
            jal_kw = j["peak_tput_per_gpu"] / jal.num("allin_kw")
            rows.append(row("peak throughput per all-in kW (tok/s/kW)", c["tput_per_kw_ratio"]["value"], base_kw,
                            None, jal_kw, "higher",
                            f"Jalapeño peak {j['peak_tput_per_gpu']:,.0f} tok/s/chip at conc {j['peak_conc']}"))
        if "peak_tokens_per_s" in c:
            claim_tps = c["peak_tokens_per_s"]["value"]
            rows.append({"model": c.get("display", key), "metric": "peak tokens/s per user", "claim": claim_tps,
                         "baseline_measured": None, "baseline_model": 1 / gpu["tbt_s"] if gpu else None,
                         "jalapeno_model": 1 / j["tbt_s"], "ratio_vs_measured": None,
                         "ratio_vs_model_baseline": (gpu["tbt_s"] / j["tbt_s"]) if gpu else None,
                         "claim_lands": (1 / j["tbt_s"]) / claim_tps - 1,
                         "note": "no official Kimi K2.5 fixed-sequence GPU point exists (hardware.md §1.3)"})
        if key == "deepseek-r1":
            mtp = next((e for k2, e in fitted.entries["group"].items() if k2.endswith("/deepseek-r1/fp4/mtp")), None)
            if mtp is not None:
                acc = mtp.param("accept")
                _, jm = _jalapeno(cat, key, isl, osl, accept=acc)
                rows.append(row(f"min time-between-tokens, Jalapeño with MTP (accept {acc:.2f}) (s)",
                                c["min_tbt_ratio"]["value"], c["baseline_tbt_s"]["value"],
                                gpu["tbt_s"] if gpu else None, jm["tbt_s"], "lower",
                                f"acceptance fitted on {mtp.key}"))
        for rr in rows:
            if rr["model"] == c.get("display", key) and "gpu_baseline" not in rr:
                rr["gpu_baseline"] = gpu_label
    return {"rows": rows, "jalapeno": params,
            "isl_osl": "8192/1024 (means 0.9 x nominal, InferenceX length distribution)"}


def _fmt(v: float | None, metric: str) -> str:
    if v is None:
        return "—"
    if "(s)" in metric:
        return f"{v * 1e3:.2f} ms" if v < 0.1 else f"{v:.2f} s"
    return f"{v:,.0f}"


def to_markdown(res: dict[str, Any]) -> str:
    """The seed-check table as markdown (docs/DEVICE_MODEL.md)."""
    lines = ["| model | metric | claim | GPU baseline, measured | GPU baseline, model | Jalapeño, model | "
             "model ratio vs measured baseline | claim lands |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        m = r["metric"]
        claim = f"{r['claim']:.1f}x" if r["claim"] and r["claim"] < 50 else f"{r['claim']:,.0f} tok/s"
        ratio = f"{r['ratio_vs_measured']:.2f}x" if r["ratio_vs_measured"] else (
            f"{r['ratio_vs_model_baseline']:.2f}x vs model baseline" if r["ratio_vs_model_baseline"] else "—")
        lands = f"{r['claim_lands']:+.0%}" if r["claim_lands"] is not None else "—"
        lines.append(f"| {r['model']} | {m} | {claim} | {_fmt(r['baseline_measured'], m)} | "
                     f"{_fmt(r['baseline_model'], m)} | {_fmt(r['jalapeno_model'], m)} | {ratio} | {lands} |")
    return "\n".join(lines)
