"""Calibration on the InferenceX points: cross-validated fidelity, storage, fallbacks and input errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from agentprof.catalog import CatalogError
from agentprof.errors import TraceFormatError
from agentprof.replay.calibration import (
    PARAMS,
    _parse_fitted,
    fit,
    load_fitted,
    nearest_group,
    prior_for,
    to_toml,
)
from agentprof.replay.devicefit import fit_file
from agentprof.replay.fidelity import check, cross_validate
from agentprof.replay.points import PointKey, load_points

from .conftest import AGENTIC, CAT, POINTS, ROOT


@pytest.fixture(scope="module")
def cv(points: pl.DataFrame) -> dict:
    return cross_validate(points, CAT)


def _raw_rows() -> list[dict[str, str]]:
    with open(POINTS, newline="") as f:
        return list(csv.DictReader(f))


def test_cross_validation_meets_the_fidelity_target(cv: dict) -> None:
    # done-means 1: fit on one ISL/OSL setting, check on the other (both directions): median APE <= 15 % for
    # TPOT and end-to-end latency over every covered point, and >= 90 % of the points covered
    rows = _raw_rows()
    settings = {(r["isl"], r["osl"]) for r in rows if r["quality_flag"] == "ok"}
    assert settings == {("1024", "1024"), ("1024", "8192")}
    pooled = cv["pooled"]
    assert pooled["points"] == sum(r["quality_flag"] == "ok" for r in rows) == 1957
    assert pooled["covered"] >= 0.9 * pooled["points"]
    assert pooled["tpot"]["median_ape"] <= 0.15
    assert pooled["e2e"]["median_ape"] <= 0.15
    assert len(cv["folds"]) == 2
    for fold in cv["folds"]:
        assert fold["tpot"]["median_ape"] <= 0.15 and fold["e2e"]["median_ape"] <= 0.15
    # TTFT is reported, not hidden (it is the weakest metric: prompt-side queueing)
    assert pooled["ttft"]["median_ape"] is not None and pooled["ttft"]["p90_ape"] >= pooled["ttft"]["median_ape"]


def test_cross_validation_figures_of_the_device_model_v2(cv: dict, points: pl.DataFrame) -> None:
    # issue 13 targets on the points they were set on, the 1,059 of the run artifacts (the fit now has the API's
    # other runs too): median APE TPOT <= 6 %, E2E <= 7 %, TTFT <= 15 %; the aggregated points (no disaggregated
    # prefill pool to saturate) TPOT <= 5 %, E2E <= 6 %, TTFT <= 15 %. Over all 1,957 the disaggregated stacks'
    # first token at the other output length is the miss (docs/DEVICE_MODEL.md §4): bounds, not targets
    from agentprof.replay.points import from_run_artifacts

    art = from_run_artifacts(points.with_row_index("row"))["row"]
    t = cv["table"].filter(pl.col("covered") & pl.col("row").is_in(art.to_list()))
    assert t.height == 1059
    agg = t.filter(~pl.col("layout").str.starts_with("p"))
    for part, tpot, e2e in ((t, 0.06, 0.07), (agg, 0.05, 0.06)):
        assert part["ape_tpot"].median() <= tpot and part["ape_e2e"].median() <= e2e
        assert part["ape_ttft"].median() <= 0.15
    pooled = cv["pooled"]
    assert pooled["tpot"]["median_ape"] <= 0.08 and pooled["e2e"]["median_ape"] <= 0.09
    assert pooled["ttft"]["median_ape"] <= 0.16
    for key in ("by_hardware", "by_framework", "by_serving", "by_conc_band", "by_level"):
        assert pooled[key], key
    # the concurrency >= 128 over-prediction of TPOT (6-31 % when whole prefills were added on top of decode)
    # is down to a few percent: prefill chunks ride the decode steps
    t = cv["table"].filter(pl.col("covered") & (pl.col("conc") >= 128) & ~pl.col("layout").str.starts_with("p"))
    signed = ((t["pred_tpot"] - t["meas_tpot"]) / t["meas_tpot"]).median()
    assert abs(signed) < 0.08


def test_b300_is_covered_through_its_blackwell_siblings(cv: dict) -> None:
    # B300 has only 1k1k points: checked on 1k1k after fitting on 1k8k, it borrows its Blackwell siblings' groups
    fold = next(f for f in cv["folds"] if f["fit_on"] == "1024/8192")
    b300 = sum(r["hardware"] == "b300" and r["osl"] == "1024" for r in _raw_rows())
    assert b300 > 0 and not any(r["hardware"] == "b300" and r["osl"] == "8192" for r in _raw_rows())
    assert fold["by_hardware"]["b300"]["points"] == b300
    t = cv["table"].filter((pl.col("fit_on") == "1024/8192") & (pl.col("hardware") == "b300"))
    assert t.height == b300 and (t["level"] == "unseen").all()
    assert fold["by_level"]["unseen"]["points"] == fold["levels"]["unseen"]


def test_shipped_fit_in_sample(points: pl.DataFrame) -> None:
    s = check(points, load_fitted(), CAT).summary()
    assert s["covered"] == s["points"] == 1957
    assert s["tpot"]["median_ape"] < 0.08 and s["e2e"]["median_ape"] < 0.08
    for key in ("points", "covered", "ttft", "tpot", "e2e", "by_hardware", "by_model"):
        assert key in s
    assert set(s["by_model"]) == {"gpt-oss-120b", "deepseek-r1"}
    assert set(s["ttft"]) >= {"median_ape", "p90_ape"}


def test_fit_recovers_known_parameters() -> None:
    # synthesize points from known parameters with the model itself, then fit them back
    from agentprof.replay.points import point_features, predict

    rows = [{"hardware": "h200", "framework": "vllm", "model": "gpt-oss-120b", "precision": "fp4", "isl": isl,
             "osl": 1024, "conc": c, "tp": tp, "ep": 1, "dp_attention": False, "disagg": False}
            for isl in (1024, 4096) for c in (4, 8, 16, 32, 64) for tp in (1, 2, 4, 8)]
    df = pl.DataFrame(rows)
    truth = np.array([70e-6, 0.05, 0.7, 0.3, 0.02, 1.0, 0.01, 1.0, 0.2, 3.0, 1.0])
    f = point_features(df, CAT)
    ttft, tpot, e2e = predict(f, np.tile(truth, (len(f), 1)))
    df = df.with_columns(pl.Series("median_ttft_s", ttft), pl.Series("median_tpot_s", tpot),
                         pl.Series("median_e2el_s", e2e))
    fitted = fit(df, CAT)
    s = check(df, fitted, CAT).summary()
    assert s["tpot"]["median_ape"] < 0.01 and s["e2e"]["median_ape"] < 0.01
    g = fitted.entries["group"]["h200/vllm/gpt-oss-120b/fp4/none"]
    assert g.param("mbu") == pytest.approx(0.7, rel=0.1)
    assert g.param("tau_s") == pytest.approx(70e-6, rel=0.1)


def test_fitted_toml_roundtrip_and_provenance(tmp_path: Path) -> None:
    small = tmp_path / "pts.csv"
    rows = _raw_rows()
    keep = [r for r in rows if r["hardware"] == "h200"]
    with open(small, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep)
    fitted = fit_file(small, CAT)
    assert fitted.provenance["points_used"] == len(keep)
    import tomllib

    back = _parse_fitted(tomllib.loads(to_toml(fitted)), "x")
    for lv in ("hardware", "group", "layout"):
        assert set(back.entries[lv]) == set(fitted.entries[lv])
        for k, e in fitted.entries[lv].items():
            assert np.allclose(back.entries[lv][k].theta, e.theta, rtol=1e-5)
    assert back.provenance["data_sha256"] == fitted.provenance["data_sha256"]
    assert len(PARAMS) == len(next(iter(back.entries["layout"].values())).theta)


def test_nearest_group_requires_same_model_and_family() -> None:
    fitted = load_fitted()
    near = nearest_group(fitted, PointKey("blackwell", "b300", "trt", "gpt-oss-120b", "fp4", "none", "tp8-ep1"))
    assert near is not None and near.attrs["hardware"] in ("b200", "gb200") and near.attrs["model"] == "gpt-oss-120b"
    assert nearest_group(fitted, PointKey("hopper", "h100", "vllm", "kimi-k2.5", "fp4", "none", "tp8-ep1")) is None


def test_bad_points_files_name_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("hardware,model,precision,isl,osl\nh200,gptoss,fp4,1024,1024\n")
    with pytest.raises(TraceFormatError) as e:
        load_points(f)
    assert str(e.value).startswith(f"{f}:1:") and "conc" in str(e.value)
    f.write_text("hardware,model,precision,isl,osl,conc,tp\nh200,gptoss,fp4,1024,1024,4,8\n"
                 "h200,gptoss,fp4,1024,lots,4,8\n")
    with pytest.raises(TraceFormatError) as e:
        load_points(f)
    assert f"{f}:3:" in str(e.value) and "'osl'" in str(e.value)


def test_yes_no_columns_read_as_booleans_whatever_the_spelling(tmp_path: Path, points: pl.DataFrame) -> None:
    """A disaggregated flag written as text (a column polars reads as strings) is a boolean, not a non-empty string
    that is always true: the same aggregated point predicts the same with 'no', '0' or 'False'; a word that is
    neither is an error naming the line."""
    row = points.filter(~pl.col("disagg") & (pl.col("hardware") == "h200")).head(1)
    preds = []
    for spelling in ("False", "no", "0", "FALSE "):
        f = tmp_path / "p.csv"
        row.with_columns(pl.lit(spelling).alias("disagg"), pl.lit("n/a").alias("notes")).write_csv(f)
        df = load_points(f)
        assert df.schema["disagg"] == pl.Boolean and df["disagg"].to_list() == [False]
        preds.append(check(df, load_fitted(), CAT).table["pred_tpot"][0])
    assert preds[0] == pytest.approx(check(row, load_fitted(), CAT).table["pred_tpot"][0])
    assert max(preds) == min(preds)
    f.write_text(f.read_text().replace("FALSE ", "maybe"))
    with pytest.raises(TraceFormatError) as e:
        load_points(f)
    assert f"{f}:2:" in str(e.value) and "'disagg'" in str(e.value) and "maybe" in str(e.value)


def test_check_cli_json(tmp_path: Path) -> None:
    rows = _raw_rows()
    f = tmp_path / "pts.csv"
    with open(f, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows[:40])
        extra = dict(rows[0], hardware="tpu-v9")  # not in the catalog: reported as not covered
        w.writerow(extra)
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "check", str(f), "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["points"] == 41 and out["covered"] == 40
    for m in ("ttft", "tpot", "e2e"):
        assert out[m]["median_ape"] >= 0 and out[m]["p90_ape"] >= out[m]["median_ape"]
    assert "tpu-v9" not in out["by_hardware"] and out["uncovered"]


def test_long_prompt_attention_efficiency_is_reproducible() -> None:
    # fitted.toml [agentic] states how well the AgentX long-prompt points are predicted: recompute it
    from agentprof.replay.agentic import load_agentic, predictions, summarize

    fitted = load_fitted()
    stored = fitted.agentic
    adf = load_agentic(AGENTIC)
    healthy = adf.filter((pl.col("server_gpu_cache_hit_rate") >= 0.9) & (pl.col("conc") <= 8))
    t = predictions(adf, fitted, CAT, fitted.attn_eff, fitted.attn_eff_by_accelerator)
    assert t.height == healthy.height == stored["points"]
    s = summarize(t)
    assert s["median_ape_ttft"] == pytest.approx(stored["median_ape_ttft"], abs=0.02)
    assert s["median_ape_itl"] == pytest.approx(stored["median_ape_itl"], abs=0.02)
    # long cached prefixes: attention at the GEMMs' efficiency (eta = 1) predicts TTFT too short for lone clients
    # (concurrency 1, no queueing behind other clients' prefills), all but one MI355X run (1.05x over)
    t1 = predictions(adf, fitted, CAT, 1.0)
    lone = t1.filter(pl.col("conc") == 1)
    assert lone.height >= 4 and (lone["pred_ttft"] < lone["meas_ttft"]).sum() >= lone.height - 1
    assert summarize(t1)["median_ape_ttft"] > 1.4 * s["median_ape_ttft"]  # 1.48x since the GEMMs run at their formats' rates
    assert 0.05 < fitted.attn_eff < 1.0
    # one efficiency per accelerator with AgentX points, and the pooled value beside it (the fallback)
    assert set(fitted.attn_eff_by_accelerator) == {"b200", "mi355x"}
    assert stored["attn_eff_pooled"] == pytest.approx(fitted.attn_eff)
    assert all(0.02 < v < 1.0 for v in fitted.attn_eff_by_accelerator.values())


def _disagg_rows(concs: tuple[int, ...] = (4, 16, 64, 256, 1024)) -> pl.DataFrame:
    return pl.DataFrame([{"hardware": "gb200", "framework": "dynamo-sglang", "model": "deepseek-r1", "precision": "fp4",
                          "isl": 1024, "osl": osl, "conc": c, "disagg": True, "prefill_num_workers": 1,
                          "num_prefill_gpu": 4, "prefill_tp": 4, "decode_num_workers": dw, "num_decode_gpu": 8 * dw,
                          "decode_tp": 1, "decode_ep": 1}
                         for osl in (1024, 8192) for c in concs for dw in (1, 2)])


def test_fit_recovers_a_known_disaggregated_hand_off() -> None:
    # disaggregated points synthesized with a hand-off of 20 decode steps on top of a 10 ms request overhead:
    # the fit finds the count (it grows with the decode step across loads and output lengths, a fixed overhead
    # does not) and keeps the aggregated-only hardware at the prior, which its points cannot inform
    from agentprof.replay.calibration import PRIOR_MEAN
    from agentprof.replay.points import point_features, predict

    df = _disagg_rows()
    # (the prefill efficiency at the chip's sourced value, a disaggregated group's prior: this test is the hand-off's)
    pf = float(prior_for(CAT, "gb200")[PARAMS.index("mfu_pf")])
    truth = np.array([15e-6, 1.5, 0.7, 0.33, 0.01, 1.2, 0.003, 1.0, pf, 20.0, 1.0])
    f = point_features(df, CAT)
    ttft, tpot, e2e = predict(f, np.tile(truth, (len(f), 1)))
    df = df.with_columns(pl.Series("median_ttft_s", ttft), pl.Series("median_tpot_s", tpot),
                         pl.Series("median_e2el_s", e2e))
    agg = pl.DataFrame([{"hardware": "h200", "framework": "vllm", "model": "gpt-oss-120b", "precision": "fp4",
                         "isl": 1024, "osl": 1024, "conc": c, "tp": 1, "ep": 1, "dp_attention": False, "disagg": False,
                         "median_ttft_s": 0.05, "median_tpot_s": 0.005, "median_e2el_s": 5.0} for c in (4, 8)])
    fitted = fit(pl.concat([df, agg], how="diagonal"), CAT)
    g = fitted.entries["group"]["gb200/dynamo-sglang/deepseek-r1/fp4/none"]
    # 18.0 of 20: the priors hold tau and kappa near their means, which these points cannot separate from t0
    # (18.02 with the first fan-out form, 17.98 with the all-reduce's; the prior alone would be 3)
    assert g.param("handoff") == pytest.approx(20.0, rel=0.15)
    assert fitted.entries["hardware"]["h200"].param("handoff") == pytest.approx(PRIOR_MEAN["handoff"])
    s = check(df, fitted, CAT).summary()
    # (TPOT 2.6 %: the closed loop's prefill wait feeds the decode batch by Little's law, one more coupling the
    # priors leave slightly off; 2 % with the open queue)
    assert s["ttft"]["median_ape"] < 0.06 and s["tpot"]["median_ape"] < 0.03


def test_unseen_disaggregated_stack_borrows_the_same_engines_hand_off() -> None:
    # a disaggregated stack never fitted takes the hand-off count of the same model's disaggregated stacks on
    # the same serving engine (points-weighted geometric mean); with none, the prior; never an aggregated
    # sibling's (which has no hand-off) or another engine's
    import copy

    from agentprof.replay.calibration import PRIOR_MEAN, borrowed_handoff

    fitted = copy.deepcopy(load_fitted())
    key = PointKey("blackwell", "gb200", "dynamo-sglang", "deepseek-r1", "fp4", "none", "p1x4-d1x8-tp1ep1")
    groups = fitted.entries["group"]
    for k in list(groups):
        if k.startswith("gb200/"):
            del groups[k]
    sglang = ("dynamo-sglang", "sglang-disagg")  # both run SGLang's decode scheduler
    sib = [e for e in groups.values() if e.attrs["framework"] in sglang and e.attrs["model"] == "deepseek-r1"]
    assert {e.attrs["framework"] for e in sib} == set(sglang) and all(e.attrs["hardware"] != "gb200" for e in sib)
    w = np.array([e.points for e in sib], dtype=float)
    want = float(np.exp(np.sum(w * np.log([e.param("handoff") for e in sib])) / w.sum()))
    assert borrowed_handoff(fitted, key) == pytest.approx(want)
    trt = PointKey("blackwell", "gb200", "dynamo-trt", "gpt-oss-120b", "fp4", "none", "p1x1-d1x4-tp4ep4")
    assert borrowed_handoff(fitted, trt) == PRIOR_MEAN["handoff"]  # no disaggregated TRT-LLM GPT-OSS left
    for e in sib:
        e.attrs["model"] = "gpt-oss-120b"
    assert borrowed_handoff(fitted, key) == PRIOR_MEAN["handoff"]


def test_fitted_file_from_before_the_hand_off_loads_with_the_prior() -> None:
    from agentprof.replay.calibration import PRIOR_MEAN

    text = to_toml(load_fitted())
    old = "\n".join(line for line in text.splitlines() if not line.startswith("handoff ="))
    import tomllib

    back = _parse_fitted(tomllib.loads(old), "old.toml")
    e = next(iter(back.entries["group"].values()))
    assert e.param("handoff") == PRIOR_MEAN["handoff"]


def test_precision_by_encoding_and_padded_hardware_names_are_the_catalogs(points: pl.DataFrame) -> None:
    """A file that names the weight format by its encoding (MXFP4, NVFP4) or pads the hardware name predicts as
    the catalog's own names do; an unknown format stays uncovered with its reason."""
    row = points.filter((pl.col("hardware") == "h200") & (pl.col("model_prefix") == "gptoss")).head(1)
    fitted = load_fitted()
    want = check(row, fitted, CAT).table["pred_tpot"][0]
    for prec, hw in (("MXFP4", " H200"), ("nvfp4", "h200 ")):
        t = check(row.with_columns(pl.lit(prec).alias("precision"), pl.lit(hw).alias("hardware")), fitted, CAT).table
        assert t["covered"][0] and t["pred_tpot"][0] == want
    t = check(row.with_columns(pl.lit("fp6").alias("precision")), fitted, CAT).table
    assert not t["covered"][0] and "no 'fp6' format" in t["why"][0]


def test_gqa_kernels_have_their_own_reproducible_attention_efficiency() -> None:
    # fitted.toml [agentic] gqa_* states how well the MiniMax (GQA) AgentX points are predicted with the GQA
    # efficiency: recompute it; the MLA one (Kimi's) stays what MLA models get
    from agentprof.replay.agentic import attention_rows, fit_rows, load_agentic, predictions, summarize
    from agentprof.replay.calibration import DEFAULT_AGENTIC_OTHER

    fitted = load_fitted()
    gqa = fitted.attn_eff_by_attention["gqa"]
    assert set(gqa) == {"pooled", "mi355x"} and 0.02 < gqa["pooled"] < 1.0
    rows = fit_rows(attention_rows(load_agentic(ROOT / DEFAULT_AGENTIC_OTHER), CAT, "gqa"))
    t = predictions(rows, fitted, CAT, fitted.attn_eff_for("mi355x", "gqa"))
    assert t.height == rows.height == fitted.agentic["gqa_points"]
    assert summarize(t)["median_ape_ttft"] == pytest.approx(fitted.agentic["gqa_median_ape_ttft"], abs=0.02)
    assert fitted.attn_eff_for("mi355x", "gqa") == gqa["mi355x"]
    assert fitted.attn_eff_for("h200", "gqa") == gqa["pooled"]  # no GQA points there: the GQA pooled value
    assert fitted.attn_eff_for("mi355x", "mla") == fitted.attn_eff_by_accelerator["mi355x"]
    assert fitted.attn_eff_for("h200") == fitted.attn_eff  # MLA, no points of its own: the pooled one
    assert "GQA" in fitted.attn_eff_basis("h200", "gqa") and "GQA" not in fitted.attn_eff_basis("h200")


def test_check_prices_attention_with_the_points_own_kernel_efficiency() -> None:
    # an 8K-token GPT-OSS prompt on MI355X (no published forward figure) runs at the GQA efficiency: a larger one
    # shortens its TTFT; on H200 FlashAttention-3's sourced figure applies, so the fitted one changes nothing
    import copy

    rows = pl.DataFrame([{"hardware": hw, "framework": fw, "model": "gpt-oss-120b", "precision": "fp4", "isl": 8192,
                          "osl": 1024, "conc": 4, "tp": 1, "ep": 1, "dp_attention": False, "disagg": False,
                          "median_ttft_s": 0.5, "median_tpot_s": 0.01, "median_e2el_s": 10.0}
                         for hw, fw in (("mi355x", "atom"), ("h200", "vllm"))])
    fitted = load_fitted()
    faster = copy.deepcopy(fitted)
    faster.attn_eff_by_attention["gqa"] = {k: 2.0 * v for k, v in fitted.attn_eff_by_attention["gqa"].items()}
    slow, fast = check(rows, fitted, CAT).table, check(rows, faster, CAT).table
    assert fast["pred_ttft"][0] < 0.99 * slow["pred_ttft"][0]
    assert fast["pred_ttft"][1] == pytest.approx(slow["pred_ttft"][1], rel=1e-9)


def test_a_gqa_table_without_a_pooled_value_is_refused(tmp_path: Path) -> None:
    import tomllib

    text = to_toml(load_fitted()).replace("[global.attn_eff_by_attention.gqa]\nmi355x",
                                          "[global.attn_eff_by_attention.gqa]\nx = 1\nmi355x")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("pooled ="))
    with pytest.raises(CatalogError, match="pooled"):
        _parse_fitted(tomllib.loads(text), "fitted.toml")
    back = _parse_fitted(tomllib.loads(to_toml(load_fitted())), "x")
    assert back.attn_eff_by_attention == load_fitted().attn_eff_by_attention


def test_a_points_file_without_gqa_models_fits_no_gqa_efficiency(tmp_path: Path) -> None:
    # the Kimi points alone (MLA): no GQA table, so GQA models keep MLA's efficiency rather than an empty fit's
    from agentprof.replay.devicefit import fit_gqa

    table, info = fit_gqa(AGENTIC, load_fitted(), CAT)
    assert table == {} and info == {}


def test_prefill_efficiency_prior_follows_the_chips_measured_gemm_efficiency(points: pl.DataFrame) -> None:
    from agentprof.replay.calibration import PRIOR_MEAN, prior_theta

    i = PARAMS.index("mfu_pf")
    assert prior_theta("amd", 0.5)[i] == pytest.approx(PRIOR_MEAN["mfu_pf"] * 0.5)
    assert prior_theta("nvidia")[i] == PRIOR_MEAN["mfu_pf"]
    # 1K-token prompts on MI300X are weight-bound: the fit keeps the family's prefill efficiency at its prior,
    # Hopper's scaled by the chips' block-scale GEMM efficiencies, not Hopper's own
    fitted = fit(points.filter(pl.col("hardware") == "mi300x"), CAT)
    fam = fitted.entries["family"]["cdna3"].param("mfu_pf")
    assert fam == pytest.approx(PRIOR_MEAN["mfu_pf"] * CAT.gemm_ratio("mi300x"), rel=0.05)
    assert fam < 0.7 * PRIOR_MEAN["mfu_pf"]
    # an accelerator no fit covers takes the same prior through the lookup
    key = PointKey("cdna3", "mi300x", "vllm", "gpt-oss-120b", "fp4", "none", "tp8-ep1")
    e, how = fit(points.filter(pl.col("hardware") == "h200"), CAT).lookup(key, CAT)
    assert how == "prior" and e.param("mfu_pf") == pytest.approx(PRIOR_MEAN["mfu_pf"] * CAT.gemm_ratio("mi300x"))


def test_a_familys_prior_takes_the_median_gemm_ratio_of_its_points_chips() -> None:
    from agentprof.replay.calibration import PRIOR_MEAN

    i, amd = PARAMS.index("mfu_pf"), CAT.gemm_ratio("mi300x")
    assert prior_for(CAT, "mi300x", "mi300x", "h100")[i] == pytest.approx(PRIOR_MEAN["mfu_pf"] * amd)
    assert prior_for(CAT, "mi300x", "h100", "h100")[i] == pytest.approx(PRIOR_MEAN["mfu_pf"])
    # the vendor's means come from the first chip; an unknown chip takes the defaults
    assert prior_for(CAT, "mi300x")[PARAMS.index("mbu")] != prior_for(CAT, "h100")[PARAMS.index("mbu")]
    assert np.array_equal(prior_for(CAT, "no-such-chip"), prior_for(CAT, "h100"))


def test_a_family_without_mtp_points_takes_the_acceptance_the_others_measured() -> None:
    # MTP points on Blackwell only, synthesized at 1.4 tokens a step: the Hopper family, which has none, takes
    # the acceptance Blackwell's family measured, not the prior's 1.8 (tokens kept per step are the draft head's
    # and the text's, not the chip's), and its hardware and groups inherit it
    from agentprof.replay.calibration import PRIOR_MEAN
    from agentprof.replay.points import point_features, predict

    def rows(hw: str, spec: str) -> list[dict]:
        return [{"hardware": hw, "framework": "sglang", "model": "deepseek-r1", "precision": "fp8", "isl": 1024,
                 "osl": 1024, "conc": c, "tp": tp, "ep": 1, "dp_attention": False, "disagg": False,
                 "spec_decoding": spec} for c in (4, 16, 64) for tp in (4, 8)]

    truth = np.array([70e-6, 0.05, 0.7, 0.3, 0.02, 1.0, 0.01, 1.4, 0.2, 3.0, 1.0])
    df = pl.DataFrame(rows("b200", "mtp") + rows("b200", "none") + rows("h200", "none"))
    f = point_features(df, CAT)
    ttft, tpot, e2e = predict(f, np.tile(truth, (len(f), 1)))
    df = df.with_columns(pl.Series("median_ttft_s", ttft), pl.Series("median_tpot_s", tpot),
                         pl.Series("median_e2el_s", e2e))
    fitted = fit(df, CAT)
    measured = fitted.entries["family"]["blackwell"].param("accept")
    assert 1.4 <= measured < PRIOR_MEAN["accept"] - 0.05  # moved off the prior toward the truth (the step cost
    # shares the MTP points' TPOT with the acceptance, so the prior still holds it part of the way)
    for level, name in (("family", "hopper"), ("hardware", "h200"), ("group", "h200/sglang/deepseek-r1/fp8/none")):
        assert fitted.entries[level][name].param("accept") == pytest.approx(measured), name
    key = PointKey("hopper", "h200", "sglang", "deepseek-r1", "fp8", "mtp", "tp8-ep1")
    e, _ = fitted.lookup(key, CAT)
    assert e.param("accept") == pytest.approx(measured)
    # a fit of one configuration's chain (cross-validation) fits the MTP family it left out for this alone
    chained = fit(df, CAT, chain=key)
    assert "blackwell" not in chained.entries["family"]
    assert chained.lookup(key, CAT)[0].param("accept") == pytest.approx(measured)
    assert fit(df, CAT, share_acceptance=False).entries["family"]["hopper"].param("accept") == PRIOR_MEAN["accept"]


def test_a_disaggregated_groups_prefill_efficiency_prior_is_its_chips_sourced_value(points: pl.DataFrame) -> None:
    # the hardware's fitted efficiency comes mostly from TPOT (chunks riding an aggregated stack's decode steps); a
    # prefill pool's prior is the chip's sourced one instead: the disaggregated groups move toward it, the
    # aggregated ones keep the hardware's, to the bit
    import agentprof.replay.calibration as C

    sub = points.filter(pl.col("hardware") == "h200")
    src = float(prior_for(CAT, "h200")[C.MFU_PF])
    on = fit(sub, CAT, levels=("family", "hardware", "group")).entries["group"]
    old = C.POOL_PF_PRIOR_SOURCED
    try:
        C.POOL_PF_PRIOR_SOURCED = False
        off = fit(sub, CAT, levels=("family", "hardware", "group")).entries["group"]
    finally:
        C.POOL_PF_PRIOR_SOURCED = old
    dis = [k for k in on if k.split("/")[1].startswith("dynamo-")]
    agg = [k for k in on if k not in dis]
    assert dis and agg
    for k in agg:
        np.testing.assert_array_equal(on[k].theta, off[k].theta)
    for k in dis:
        assert abs(on[k].param("mfu_pf") - src) < abs(off[k].param("mfu_pf") - src)
