"""The seed check: what the calibrated model predicts for the seeds' Jalapeño InferenceX 8K1K claims.

For GPT-OSS 120B, DeepSeek R1 and Kimi K2.5 it predicts, at ISL/OSL 8192/1024 with the InferenceX length
distribution, the min time-between-tokens (TPOT at concurrency 1), the min end-to-end latency and the peak
throughput per GPU (swept over concurrency) of the Jalapeño estimate (``systems.toml [jalapeno]``) and of
the GPU baseline configuration the claim compares against (its fitted parameters), and sets them against
the claims and the measured baselines in ``catalog/seed_claims.toml``. ``agentprof devices seed-check``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.replay.bands import corner_system, ranged
from agentprof.replay.calibration import Fitted, load_fitted
from agentprof.replay.costmodel import StepParams
from agentprof.replay.points import PARAMS, layout_columns, point_features, predict
from agentprof.replay.systems import Resolved, resolve

CLAIMS_PATH = CATALOG_DIR / "seed_claims.toml"
CONCURRENCY_SWEEP = tuple(2 ** i for i in range(13))


def theta_of(p: StepParams, layers: float) -> np.ndarray:
    """The per-point parameter vector of :func:`points.predict` for declared/resolved step parameters."""
    vals = {"tau_s": p.t_fixed_s / layers, "kappa": 0.0, "mbu": p.mbu, "mfu": p.mfu, "t0_s": p.t0_s, "q": p.q,
            "t_req_s": p.t_req_s, "accept": p.accept, "mfu_pf": p.prefill_mfu,
            "handoff": 0.0,  # decode steps of a disaggregated hand-off: declared systems are aggregated
            "a2a_ratio": 1.0}
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


def _jalapeno(cat: HardwareCatalog, model_key: str, isl: int, osl: int, accept: float | None = None,
              chips: int | None = None, corner: str | None = None) -> tuple[Resolved, dict[str, Any]]:
    """Jalapeño's figures on ``chips`` chips (default: the fewest that hold the weights), at the catalog's
    nominal values or at the ``fast``/``slow`` corner of their ranges (:mod:`agentprof.replay.bands`)."""
    system = cat.system("jalapeno")
    if corner is not None:
        system = corner_system(system, corner)  # type: ignore[arg-type]
        cat = replace(cat, accelerators={**cat.accelerators, system.accelerator.key: system.accelerator})
    r = resolve(system, cat.models[model_key], cat, accept=accept, gpus=chips)
    base = {"hardware": r.system.accelerator.key, "framework": r.framework, "model": model_key,
            "precision": r.precision, "isl": isl, "osl": osl, **layout_columns(f"tp{r.dep.gpus}-ep1")}
    spec = "mtp" if (accept or r.params.accept) > 1 else "none"
    return r, _sweep(cat, base, theta_of(r.params, r.dep.layers), spec, r.params.attn_eff)


def _banded(cat: HardwareCatalog, model_key: str, isl: int, osl: int, accept: float | None = None,
            chips: int | None = None) -> dict[str, Any]:
    """Jalapeño's figures at nominal values with the fast and slow corners (``band``: metric -> [fast, slow])."""
    r, nom = _jalapeno(cat, model_key, isl, osl, accept, chips)
    _, fast = _jalapeno(cat, model_key, isl, osl, accept, r.dep.gpus, "fast")
    _, slow = _jalapeno(cat, model_key, isl, osl, accept, r.dep.gpus, "slow")
    nom["band"] = {k: [fast[k], slow[k]] for k in ("tbt_s", "ttft_s", "e2e_s", "peak_tput_per_gpu")}
    nom["chips"] = r.dep.gpus
    nom["resolved"] = r
    return nom


def _gpu_counts(cfg: str) -> tuple[int, int]:
    """(decode accelerators per instance, accelerators in the whole configuration) of a fitted layout key."""
    cols = layout_columns(cfg.split("/")[-1])
    per = int(cols.get("decode_tp") or cols.get("tp") or 1)
    if cols.get("disagg"):
        per = int(cols["num_decode_gpu"]) // int(cols["decode_num_workers"])
    return per, int(cols["num_gpus"])


def seed_check(cat: HardwareCatalog | None = None, fitted: Fitted | None = None,
               claims_path: str | Path | None = None) -> dict[str, Any]:
    """Predictions, claims and how far each claim lands from the model (``ratio / claim − 1``), with bands.

    Jalapeño is modelled from its declared catalog estimates only: no claim is an input (the claims file is read
    for the claimed ratios, the ISL/OSL and the measured GPU baselines they compare against). Each Jalapeño figure
    is given on the fewest chips that hold the weights, on as many chips as the GPU baseline's decode instance
    (equal chip count) and on as many as the baseline's all-in power buys (equal power), each with the band
    from the catalog ranges."""
    cat = cat or load_catalog()
    fitted = fitted if fitted is not None else load_fitted()
    data = read_toml(claims_path or CLAIMS_PATH)
    rows: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    jal = cat.accelerators["jalapeno"]
    for key, c in data["claims"].items():
        isl, osl = int(c["isl"]["value"]), int(c["osl"]["value"])
        j = _banded(cat, key, isl, osl)
        r = j.pop("resolved")
        params[key] = {**r.describe(), "hbm_bw_tb_s": jal.hbm_bw / 1e12, "hbm_gb": jal.hbm_bytes / 1e9,
                       "ranged": ranged(cat.system("jalapeno"))}
        gpu: dict[str, Any] | None = None
        gpu_label = ""
        g_dec, g_all = 8, 8
        if "gpu_config" in c:
            cfg = c["gpu_config"]
            hw, fw, mk, prec, spec, layout = cfg.split("/")
            g_dec, g_all = _gpu_counts(cfg)
            entry = fitted.entries["layout"].get(cfg)
            if entry is not None:
                base = {"hardware": hw, "framework": fw, "model": mk, "precision": prec, "isl": isl, "osl": osl,
                        **layout_columns(layout)}
                gpu = _sweep(cat, base, entry.theta, spec, fitted.attn_eff)
                gpu_label = f"fitted {cfg}"
        elif "gpu_system" in c:
            rg = resolve(cat.system(c["gpu_system"]), cat.models[key], cat, fitted)
            g_dec = g_all = rg.dep.gpus
            base = {"hardware": rg.system.accelerator.key, "framework": rg.framework, "model": key,
                    "precision": rg.precision, "isl": isl, "osl": osl, **layout_columns(f"tp{rg.dep.gpus}-ep1")}
            gpu = _sweep(cat, base, theta_of(rg.params, rg.dep.layers), attn_eff=rg.params.attn_eff)
            gpu_label = f"{c['gpu_system']}: {rg.calibration}"
        gpu_hw = cat.accelerators.get(str(c.get("gpu_config", "/").split("/")[0]) or "") or cat.system(
            c.get("gpu_system", "b200+x86")).accelerator
        gpu_kw = gpu_hw.num("allin_kw") * g_dec
        equal_power = max(int(gpu_kw // jal.num("allin_kw")), 1)
        variants = {"fewest": j}
        for name, n in (("equal_count", g_dec), ("equal_power", equal_power)):
            try:
                variants[name] = _banded(cat, key, isl, osl, chips=max(n, j["chips"]))
                variants[name].pop("resolved")
            except CatalogError:
                continue
        setup = {"gpu_baseline_accelerators": g_dec, "gpu_config_accelerators": g_all,
                 "gpu_allin_kw": round(gpu_kw, 2), "jalapeno_allin_kw_per_chip": jal.num("allin_kw"),
                 "jalapeno_chips": {k: v["chips"] for k, v in variants.items()},
                 "jalapeno_allin_kw": {k: round(v["chips"] * jal.num("allin_kw"), 2) for k, v in variants.items()}}
        display = str(c.get("display", key))

        def row(metric: str, field_: str, claim: float | None, base_meas: float | None, base_model: float | None,
                better: str, note: str = "", display: str = display, variants: dict = variants,
                setup: dict = setup, per_kw: bool = False) -> dict[str, Any]:
            def ratio(b: float | None, v: float) -> float | None:
                if b is None or not v:
                    return None
                return b / v if better == "lower" else v / b

            out: dict[str, Any] = {"model": display, "metric": metric, "claim": claim, "baseline_measured": base_meas,
                                   "baseline_model": base_model, "note": note, **setup}
            for name, v in variants.items():
                val = v[field_] / (jal.num("allin_kw") if per_kw else 1.0)
                lo, hi = (x / (jal.num("allin_kw") if per_kw else 1.0) for x in v["band"][field_])
                rm = ratio(base_meas, val)
                band_r = sorted(x for x in (ratio(base_meas, lo), ratio(base_meas, hi)) if x is not None)
                out[f"jalapeno_{name}"] = val
                out[f"jalapeno_{name}_band"] = [lo, hi]
                out[f"ratio_{name}"] = rm
                out[f"ratio_{name}_band"] = band_r or None
                out[f"claim_lands_{name}"] = rm / claim - 1 if (claim and rm) else None
            out["jalapeno_model"] = out["jalapeno_fewest"]
            out["ratio_vs_measured"] = out["ratio_fewest"]
            out["ratio_vs_model_baseline"] = ratio(base_model, out["jalapeno_fewest"])
            out["claim_lands"] = out["claim_lands_fewest"]
            return out

        if "min_tbt_ratio" in c:
            rows.append(row("min time-between-tokens (s)", "tbt_s", c["min_tbt_ratio"]["value"],
                            c["baseline_tbt_s"]["value"], gpu["tbt_s"] if gpu else None, "lower",
                            c.get("baseline_tbt_system", "")))
            rows.append(row("min end-to-end latency (s)", "e2e_s", c["e2e_ratio"]["value"], c["baseline_e2e_s"]["value"],
                            gpu["e2e_s"] if gpu else None, "lower"))
        if "tput_per_kw_ratio" in c:
            base_kw = c["baseline_tput_per_gpu"]["value"] / c["baseline_allin_kw"]["value"]
            rows.append(row("peak throughput per all-in kW (tok/s/kW)", "peak_tput_per_gpu",
                            c["tput_per_kw_ratio"]["value"], base_kw, None, "higher",
                            f"Jalapeño peak {j['peak_tput_per_gpu']:,.0f} tok/s/chip at conc {j['peak_conc']}",
                            per_kw=True))
        if "peak_tokens_per_s" in c:
            claim_tps = c["peak_tokens_per_s"]["value"]
            rr: dict[str, Any] = {"model": display, "metric": "peak tokens/s per user", "claim": claim_tps,
                                  "baseline_measured": None, "baseline_model": 1 / gpu["tbt_s"] if gpu else None,
                                  "note": "no official Kimi K2.5 fixed-sequence GPU point exists (hardware.md §1.3)",
                                  **setup}
            for name, v in variants.items():
                rr[f"jalapeno_{name}"] = 1 / v["tbt_s"]
                rr[f"jalapeno_{name}_band"] = [1 / v["band"]["tbt_s"][1], 1 / v["band"]["tbt_s"][0]]
                rr[f"claim_lands_{name}"] = (1 / v["tbt_s"]) / claim_tps - 1
            rr.update(jalapeno_model=rr["jalapeno_fewest"], ratio_vs_measured=None,
                      ratio_vs_model_baseline=(gpu["tbt_s"] * rr["jalapeno_fewest"]) if gpu else None,
                      claim_lands=rr["claim_lands_fewest"])
            rows.append(rr)
        if key == "deepseek-r1":
            mtp = next((e for k2, e in fitted.entries["group"].items() if k2.endswith("/deepseek-r1/fp4/mtp")), None)
            if mtp is not None:
                acc = mtp.param("accept")
                jm = _banded(cat, key, isl, osl, accept=acc)
                jm.pop("resolved")
                rows.append(row(f"min time-between-tokens, Jalapeño with MTP (accept {acc:.2f}) (s)", "tbt_s",
                                c["min_tbt_ratio"]["value"], c["baseline_tbt_s"]["value"],
                                gpu["tbt_s"] if gpu else None, "lower", f"acceptance fitted on {mtp.key}",
                                variants={"fewest": jm}))
        for rr2 in rows:
            if rr2["model"] == display and "gpu_baseline" not in rr2:
                rr2["gpu_baseline"] = gpu_label
    return {"rows": rows, "jalapeno": params, "claims_file": str(claims_path or CLAIMS_PATH),
            "isl_osl": "8192/1024 (means 0.9 x nominal, InferenceX length distribution)",
            "inputs": "Jalapeño: catalog estimates only (accelerators.toml, systems.toml [jalapeno]); no claim value "
                      "is an input. Bands: every ranged estimate at its optimistic / pessimistic end."}


def _fmt(v: float | None, metric: str) -> str:
    if v is None:
        return "—"
    if "(s)" in metric:
        return f"{v * 1e3:.2f} ms" if v < 0.1 else f"{v:.2f} s"
    return f"{v:,.0f}"


def _band(v: list[float] | None, metric: str) -> str:
    if not v:
        return ""
    return f" ({_fmt(min(v), metric)}–{_fmt(max(v), metric)})"


HEADERS = ("model", "metric", "claim", "GPU baseline: accelerators, all-in kW", "measured", "model",
           "Jalapeño fewest chips (band)", "equal chip count (band)", "equal power (band)",
           "ratio vs measured, fewest (band)", "claim lands (fewest / equal count / equal power)")
"""The seed-check table's columns (:func:`table_rows`); the first two name the row."""
SHORT_HEADERS = ("model", "metric", "claim", "GPU baseline", "measured", "model", "fewest chips", "equal chips",
                 "equal power", "vs measured", "claim lands")
SHORT_NOTE = ("GPU baseline: accelerators, all-in kW. Jalapeño on the fewest chips, on the baseline's chip count and "
              "at its all-in power, each with its band. vs measured: the fewest-chip figure over the measured "
              "baseline. claim lands: fewest / equal chips / equal power.")
"""The same columns' headers and their key for a terminal, where a long header widens its whole column."""


def table_rows(res: dict[str, Any]) -> tuple[list[list[str]], str]:
    """The seed-check table as text cells, one row per claim in :data:`HEADERS` order, and its footnote: each
    Jalapeño figure with its band, on the fewest chips, at equal chip count and at equal all-in power with the
    GPU baseline. The markdown (:func:`to_markdown`) and the terminal table show these same cells."""
    rows = []
    for r in res["rows"]:
        m = r["metric"]
        claim = f"{r['claim']:.1f}x" if r["claim"] and r["claim"] < 50 else f"{r['claim']:,.0f} tok/s"
        chips = r.get("jalapeno_chips", {})

        def cell(name: str, r: dict[str, Any] = r, m: str = m, chips: dict = chips) -> str:
            if f"jalapeno_{name}" not in r:
                return "—"
            return f"{_fmt(r[f'jalapeno_{name}'], m)}{_band(r.get(f'jalapeno_{name}_band'), m)} [{chips.get(name, '?')}]"

        rb = r.get("ratio_fewest_band")
        ratio = (f"{r['ratio_vs_measured']:.2f}x" + (f" ({rb[0]:.2f}–{rb[-1]:.2f}x)" if rb else "")) \
            if r.get("ratio_vs_measured") else "—"
        lands = " / ".join(f"{r[f'claim_lands_{n}']:+.0%}" if r.get(f"claim_lands_{n}") is not None else "—"
                           for n in ("fewest", "equal_count", "equal_power"))
        rows.append([r["model"], m, claim, f"{r.get('gpu_baseline_accelerators', '?')}, {r.get('gpu_allin_kw', '?')} kW",
                     _fmt(r["baseline_measured"], m), _fmt(r["baseline_model"], m), cell("fewest"),
                     cell("equal_count"), cell("equal_power"), ratio, lands])
    setups = _setups(res)
    per_chip = {v.get("jalapeno_allin_kw_per_chip") for v in setups.values()}
    each = " / ".join(f"{x:g}" for x in sorted(per_chip) if x is not None)
    kw = ", ".join(f"{k} " + " / ".join(f"{v['jalapeno_allin_kw'][n]:g}" if n in v["jalapeno_allin_kw"] else "—"
                                         for n in ("fewest", "equal_count", "equal_power"))
                   for k, v in setups.items())
    note = ("[n] = Jalapeño chips; bands: every ranged catalog estimate at its optimistic / pessimistic end; "
            f"Jalapeño all-in kW (chips × {each} kW) on the fewest chips / equal chips / equal power: {kw}")
    return rows, note


def to_markdown(res: dict[str, Any]) -> str:
    """The seed-check table as markdown (docs/DEVICE_MODEL.md), :func:`table_rows`' cells."""
    rows, note = table_rows(res)
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join([*lines, "", note])


def _setups(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in res["rows"]:
        out.setdefault(r["model"], r)
    return out
