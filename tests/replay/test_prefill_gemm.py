"""A recipe whose non-expert prefill GEMMs run a slower library than the reference block-scale kernel takes that
library's extra time for them (``scheduling.toml [[prefill_gemm]]``): in the cost model's prefill and in every
benchmark point's deployment (``point_deployment``, which the serving equations and the simulation both build theirs
with), and nowhere else (docs/DEVICE_MODEL.md §2.2)."""

from __future__ import annotations

import polars as pl
import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.kvcache import prefill_gemm_ratio
from agentprof.replay.calibration import prior_theta, step_params
from agentprof.replay.costmodel import Deployment, prefill_s
from agentprof.replay.points import LENGTH_MEAN_FRACTION, PARAMS, point_deployment, point_features

CAT = load_catalog()
M, B200 = CAT.models["deepseek-r1"], CAT.accelerators["b200"]
# B200 SGLang DeepSeek R1 FP8 on 8 GPUs at 8K-token prompts, as the InferenceX 8k1k points run it
ROW = {"hardware": "b200", "framework": "sglang", "model_prefix": "dsr1", "precision": "fp8", "spec_decoding": "none",
       "isl": 8192, "osl": 1024, "conc": 4, "tp": 8, "ep": 1, "num_gpus": 8}


def test_the_catalog_lists_the_flashinfer_recipes_only() -> None:
    r, src = prefill_gemm_ratio("sglang", "deepseek-r1", "b200", "fp8")
    assert r > 1 and "S79" in src and "SGLANG_ENABLE_FLASHINFER_GEMM" in src
    assert prefill_gemm_ratio("sglang", "deepseek-r1", "b300", "fp8")[0] == r
    # a stack that launches its own workers has its own entry: Dynamo-SGLang's B200 FP8 prefill workers turn
    # DeepGEMM off (S81) and take SGLang's automatic choice, the same FlashInfer kernel
    got, why = prefill_gemm_ratio("dynamo-sglang", "deepseek-r1", "b200", "fp8")
    assert got == r and "S81" in why and "SGLANG_ENABLE_JIT_DEEPGEMM=false" in why
    # another weight format, another engine or a stack whose recipes keep DeepGEMM: not listed
    for fw, hw, prec in (("sglang", "b200", "fp4"), ("trt", "b200", "fp8"), ("dynamo-sglang", "gb200", "fp8"),
                         ("dynamo-sglang", "b200", "fp4"), ("sglang", "h200", "fp8")):
        got, why = prefill_gemm_ratio(fw, "deepseek-r1", hw, prec)
        assert got == 1.0 and why.startswith("default")


def test_the_ratio_follows_from_the_measured_kernel_times() -> None:
    # S79: FlashInfer 826 / 1,633 us, DeepGEMM 146 / 260 us for M = 1,024 / 2,048, N = 24,576, K = 7,168 on B200
    flops = [2.0 * m * 24576 * 7168 for m in (1024, 2048)]
    peak = B200.peak_flops("fp8")
    e = sum(f / (t * 1e-6) / peak for f, t in zip(flops, (826, 1633), strict=True)) / 2
    e_ref = sum(f / (t * 1e-6) / peak for f, t in zip(flops, (146, 260), strict=True)) / 2
    m = float(prior_theta()[PARAMS.index("mfu_pf")])  # the prior's prefill efficiency the ratio is set against
    assert prefill_gemm_ratio("sglang", "deepseek-r1", "b200", "fp8")[0] == pytest.approx(
        1.0 + (1.0 / e - 1.0 / e_ref) * m, rel=0.01)


def test_a_bad_entry_is_one_clear_error(serving_catalog) -> None:
    serving_catalog("SCHED_PATH", '[[prefill_gemm]]\nframework = "x"\nmodel = "y"\n'
                                  'time_ratio = { value = 0, source = "s" }\n')
    with pytest.raises(CatalogError, match=r"prefill_gemm\[0\]\.time_ratio: expected a ratio > 0"):
        prefill_gemm_ratio("x", "y", "b200", "fp8")


def test_only_the_non_expert_prefill_gemms_take_longer() -> None:
    r = prefill_gemm_ratio("sglang", "deepseek-r1", "b200", "fp8")[0]
    ref = Deployment(M, B200, "fp8", 8, engine="sglang")
    slow = Deployment(M, B200, "fp8", 8, engine="sglang", nonexpert_gemm_ratio=r)
    per_expert = 3.0 * M.get("hidden") * M.get("expert_ffn")
    routed = (M.get("layers") - M.get("dense_layers")) * M.get("experts_per_token") * per_expert
    other = M.get("params_active") - routed - 2.0 * M.get("vocab") * M.get("hidden")
    peak = B200.peak_flops("fp8")
    assert slow.prefill_gemm_peak_s_per_token - ref.prefill_gemm_peak_s_per_token == pytest.approx(
        2.0 * other * (r - 1.0) / peak, rel=1e-12)
    assert slow.gemm_peak_s_per_token == ref.gemm_peak_s_per_token  # decode: measured shapes are prefill's
    p = step_params(prior_theta(), M.get("layers"), 8)
    assert float(prefill_s(slow, p, 8192)) > float(prefill_s(ref, p, 8192))
    # under data-parallel attention the rank's own share takes the same ratio
    dpa = Deployment(M, B200, "fp8", 8, True, engine="sglang", nonexpert_gemm_ratio=r)
    dpa_ref = Deployment(M, B200, "fp8", 8, True, engine="sglang")
    assert dpa.prefill_rank_gemm_peak_s_per_token == pytest.approx(r * dpa_ref.prefill_rank_gemm_peak_s_per_token)


def test_the_points_price_the_recipes_prefill_with_it() -> None:
    r = prefill_gemm_ratio("sglang", "deepseek-r1", "b200", "fp8")[0]
    f = point_features(pl.DataFrame([ROW, {**ROW, "precision": "fp4"}, {**ROW, "framework": "trt"}]), CAT)
    ref = Deployment(M, B200, "fp8", 8, engine="sglang")
    want = Deployment(M, B200, "fp8", 8, engine="sglang", nonexpert_gemm_ratio=r).prefill_gemm_peak_s_per_token
    assert f.work.pf_gemm_s[0] == pytest.approx(want * LENGTH_MEAN_FRACTION * ROW["isl"] / 8, rel=1e-9)
    assert want > ref.prefill_gemm_peak_s_per_token
    trt = Deployment(M, B200, "fp8", 8, engine="trt").prefill_gemm_peak_s_per_token
    assert f.work.pf_gemm_s[2] / f.work.pf_gemm_s[0] == pytest.approx(trt / want, rel=1e-9)
    fp4 = Deployment(M, B200, "fp4", 8, engine="sglang").prefill_gemm_peak_s_per_token
    assert f.work.pf_gemm_s[1] / f.work.pf_gemm_s[0] == pytest.approx(fp4 / want, rel=1e-9)


def test_a_points_deployment_is_built_once_with_its_recipes_ratio() -> None:
    cache: dict = {}
    a = point_deployment(cache, M, B200, "fp8", 8, False, 1.0, 1, "sglang")
    assert a.nonexpert_gemm_ratio == prefill_gemm_ratio("sglang", "deepseek-r1", "b200", "fp8")[0] > 1
    assert point_deployment(cache, M, B200, "fp8", 8, False, 1.0, 1, "sglang") is a
    b = point_deployment(cache, M, B200, "fp8", 8, False, 1.0, 1, "sglang-disagg")  # the same engine, unlisted
    assert b is not a and b.nonexpert_gemm_ratio == 1.0 and b.engine == a.engine == "sglang"


def test_a_replay_on_such_a_recipe_prices_and_names_it() -> None:
    import dataclasses

    from agentprof.replay.systems import resolve

    sgl = dataclasses.replace(CAT.systems["b200+x86"], frameworks=("sglang",), precisions=("fp8",))
    r = resolve(sgl, M, CAT)
    assert r.dep.nonexpert_gemm_ratio == prefill_gemm_ratio("sglang", "deepseek-r1", "b200", "fp8")[0] > 1
    assert "non-expert prefill GEMMs x2.70" in r.calibration
    trt = resolve(dataclasses.replace(sgl, frameworks=("trt",)), M, CAT)
    assert trt.dep.nonexpert_gemm_ratio == 1.0 and "prefill GEMMs" not in trt.calibration
