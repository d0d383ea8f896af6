"""KV capacity of the benchmark points: the driver-reported HBM, the recipe's memory fraction per engine, and the
batch Little's law reads off every measured point; each pool's data-parallel attention as the points say it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.kvcache import memory_fraction, usable_fraction
from agentprof.errors import TraceFormatError
from agentprof.replay.costmodel import Deployment
from agentprof.replay.points import from_run_artifacts, load_points, point_features, resident_batch

from .conftest import CAT, ROOT


@pytest.fixture(scope="module")
def feats(points: pl.DataFrame):
    return point_features(points, CAT)


def test_every_measured_batch_fits_the_modelled_kv_pool(feats) -> None:
    # the sequences a point held by Little's law must fit the pool the model sizes, or it could not have run
    held = resident_batch(feats)
    ok = feats.covered & np.isfinite(held)
    assert ok.sum() > 1900
    ratio = held[ok] / feats.kv_cap[ok]
    # where the recipe's decode slots bind, Little's law can read more than the slots, by at most the clients
    # beyond them: a client waiting for a slot after its first token (H100 Dynamo-TRT attention-DP decode: median
    # 85 % of the excess; elsewhere <= 5 %) counts as resident (docs/DEVICE_MODEL.md §2.2)
    slots_bind = (np.isfinite(feats.slots) & (feats.kv_cap >= feats.slots / feats.n_decode - 0.5))[ok]
    assert ratio[~slots_bind].max() <= 1.01
    beyond = (feats.work.conc / feats.slots)[ok][slots_bind]
    assert (ratio[slots_bind] <= np.maximum(beyond, 1.0) + 0.01).all() and (ratio[slots_bind] > 1.01).sum() >= 5
    assert (ratio > 0.9).sum() >= 5  # the check has teeth: some points sit at their limit


def test_every_official_point_fits_the_modelled_kv_pool_but_where_recipe_slots_bind() -> None:
    # the InferenceX API's points (never fitted, 8K prompts among them): Little's law on each must fit the pool too,
    # but where the recipe's decode slots bind (by the clients beyond them, as above). SGLang's 4-GPU FP8 decode
    # workers at 8K hold ~47 sequences: with the shared experts copied on
    # each attention-DP rank too the model left room for 28
    api = load_points(ROOT / "data" / "inferencex" / "official_api_points.csv")
    f = point_features(api, CAT)
    held = resident_batch(f)
    ok = f.covered & np.isfinite(held)
    assert ok.sum() > 1600
    over = ok & (held > 1.01 * f.kv_cap)
    slots_bind = np.isfinite(f.slots) & (f.kv_cap >= f.slots / f.n_decode - 0.5)
    assert not (over & ~slots_bind).any()
    beyond = np.maximum(f.work.conc / np.where(slots_bind, f.slots, np.inf), 1.0)
    assert (held[over] <= (beyond * f.kv_cap)[over] * 1.01).all()  # by at most the clients beyond the slots
    assert (held[ok] / f.kv_cap[ok] > 0.9).sum() >= 5  # some sit at their limit
    sgl = ok & np.array([k is not None and k.framework == "dynamo-sglang" and k.precision == "fp8"
                         and k.layout.startswith("p1x4-d1x4") for k in f.keys]) & (api["isl"].to_numpy() == 8192)
    assert sgl.sum() >= 4 and held[sgl].max() > 40


def test_a_disaggregated_point_without_worker_counts_is_named_not_priced() -> None:
    api = load_points(ROOT / "data" / "inferencex" / "official_api_points.csv")
    f = point_features(api, CAT)
    zero = ((api["prefill_num_workers"] == 0) | (api["decode_num_workers"] == 0)).fill_null(False).to_numpy()
    assert zero.sum() > 0 and not f.covered[zero].any()
    assert all("0 prefill or decode workers" in f.why[i] for i in np.flatnonzero(zero))


def test_sglang_attention_dp_splits_the_shared_experts_of_a_tensor_parallel_moe() -> None:
    # each attention-DP rank holds the non-expert weights whole (the recipes copy dense FFNs and head too), but
    # SGLang fuses the shared experts into a tensor-parallel MoE or splits them; DeepEP ranks hold them whole
    m, acc = CAT.models["deepseek-r1"], CAT.accelerators["gb200"]
    sgl = Deployment(m, acc, "fp8", 4, True, 1.0, 1, "sglang")
    trt = Deployment(m, acc, "fp8", 4, True, 1.0, 1, "trt")
    ep = Deployment(m, acc, "fp8", 4, True, 1.0, 4, "sglang")
    shared = (m.get("layers") - m.get("dense_layers")) * m.get("shared_experts") * 3 * m.get("hidden") \
        * m.get("expert_ffn")
    assert trt.weight_bytes_per_gpu - sgl.weight_bytes_per_gpu == pytest.approx(0.75 * shared, rel=1e-9)
    assert ep.weight_bytes_per_gpu == pytest.approx(trt.weight_bytes_per_gpu)
    tp = Deployment(m, acc, "fp8", 4, False, 1.0, 1, "sglang")
    assert tp.weight_bytes_per_gpu == pytest.approx(tp.weight_bytes / 4)


def test_deepseek_fp8_on_four_b200s_holds_the_recipes_batch_at_8k_prompts() -> None:
    # the 8k1k recipe runs TP4 with --max-running-requests 32 and mem-fraction-static 0.95 (dsr1_fp8_b200.sh): the
    # driver's 192.27e9 bytes leave ~15 GB of KV per GPU, 54 sequences at the mean context; the marketing 180e9 left
    # 3.3 GB, 11 sequences
    row = pl.DataFrame({"hardware": ["b200"], "framework": ["sglang"], "model_prefix": ["dsr1"], "precision": ["fp8"],
                        "spec_decoding": ["none"], "isl": [8192], "osl": [1024], "conc": [32], "tp": [4], "ep": [1],
                        "dp_attention": [False], "disagg": [False]})
    f = point_features(row, CAT)
    assert f.mem_util[0] == pytest.approx(0.95)
    assert 40 <= f.kv_cap[0] <= 70 and f.work.over[0] == 0.0


def test_tensorrt_llm_takes_its_fraction_of_what_the_weights_leave() -> None:
    f, basis, src = memory_fraction("dynamo-trt", "gpt-oss-120b", "gb200")
    assert (f, basis) == (0.85, "free") and "free_gpu_memory_fraction" in src
    util, _ = usable_fraction("trt", "gpt-oss-120b", "b200", 192e9, 40e9)
    assert util * 192e9 == pytest.approx(0.85 * (192e9 - 40e9) + 40e9)
    assert usable_fraction("vllm", "gpt-oss-120b", "h200", 150e9, 40e9)[0] == 0.9  # a share of the whole


def test_a_memory_entry_out_of_range_is_one_clear_error(serving_catalog) -> None:
    serving_catalog("MEMORY_PATH", '[[memory]]\nframework = "vllm"\nbasis = "total"\n'
                    'fraction = { value = 1.5, source = "x" }\n')
    with pytest.raises(CatalogError, match=r"memory\[0\]\.fraction: expected a fraction in \(0, 1\], got 1.5"):
        memory_fraction("vllm", "gpt-oss-120b", "h200")
    serving_catalog("MEMORY_PATH", '[[memory]]\nframework = "vllm"\nbasis = "spare"\n'
                    'fraction = { value = 0.9, source = "x" }\n')
    with pytest.raises(CatalogError, match=r"memory\[0\]\.basis: expected one of total, free"):
        memory_fraction("vllm", "gpt-oss-120b", "h200")


def test_the_frontend_tokenizes_each_benchmark_prompt_before_its_prefill() -> None:
    # InferenceX sends prompts as text: the server tokenizes the whole prompt (scheduling.toml [tokenize]) before
    # the engine sees it, so a point's first token carries that time; at one client exactly that time
    import dataclasses

    from agentprof.catalog.kvcache import tokenize_s_per_token
    from agentprof.replay.calibration import prior_theta
    from agentprof.replay.points import LENGTH_MEAN_FRACTION, predict_times

    rows = [{"hardware": "b200", "framework": "vllm", "model_prefix": "gptoss", "precision": "fp4", "isl": isl,
             "osl": 1024, "conc": 1, "tp": 1, "ep": 1, "dp_attention": False, "disagg": False} for isl in (1024, 8192)]
    f = point_features(pl.DataFrame(rows), CAT)
    tok = tokenize_s_per_token("vllm", "gpt-oss-120b", "b200")[0]
    assert tok > 0
    np.testing.assert_allclose(f.work.front_s, tok * LENGTH_MEAN_FRACTION * np.array([1024, 8192]))
    th = np.tile(prior_theta(), (2, 1))
    without = dataclasses.replace(f, work=dataclasses.replace(f.work, front_s=None))
    np.testing.assert_allclose(predict_times(f, th, 0.5).ttft - predict_times(without, th, 0.5).ttft, f.work.front_s,
                               rtol=1e-9)


def test_a_prefill_pass_holds_the_prompts_its_budget_leaves_room_for(feats) -> None:
    # prompts one pass takes: the whole budget where prefill runs alone (SGLang) or in a prefill worker, what the
    # decode tokens leave where prompts ride decode steps (vLLM, TensorRT-LLM); at least one
    w = feats.work
    isl = 0.9 * np.array([1024.0] * len(feats))  # every calibration prompt is 1,024 tokens, lengths in [0.8 L, L]
    alone = (w.pf_alone > 0) | feats.disagg
    # ... and no more than a prefill server's scheduler runs at once (its recipe's --max-running-requests)
    cap = np.where(feats.disagg, feats.requests / w.pf_ranks, np.inf)
    np.testing.assert_allclose(w.pf_batch[alone], np.minimum(np.maximum(feats.batch / isl, 1.0), cap)[alone])
    # MI355X SGLang-disagg: 8 requests over 8 data-parallel attention ranks, one prompt each (two over the FP4
    # recipe's 4); 128 without them
    capped = feats.disagg & np.isfinite(feats.requests)
    pairs = set(zip(w.pf_batch[capped].tolist(), feats.requests[capped].tolist(), strict=True))
    assert pairs == {(1.0, 8.0), (2.0, 8.0), (16384 / (0.9 * 1024), 128.0)}
    rides = ~alone
    np.testing.assert_allclose(w.pf_batch[rides], np.maximum((feats.batch[rides] - w.b_run[rides]) / isl[rides], 1.0))
    assert alone.sum() > 100 and rides.sum() > 100 and (w.pf_batch[rides] < w.pf_batch[rides].max()).any()
    # with data-parallel attention each rank schedules its own prompts: a pass runs one batch per rank
    np.testing.assert_array_equal(w.pf_ranks, np.where(feats.dpa_pf, feats.g_pf, 1.0))
    assert (w.pf_ranks > 1).sum() > 50
    # and the benchmark's prompts, drawn in [0.8 L, L], vary little: the queue is nearly deterministic
    np.testing.assert_allclose(w.svc_cv2, (0.2 / np.sqrt(12) / 0.9) ** 2)


def _wide_ep(conc: int, **flags: object) -> dict:
    """A GB200 Dynamo-TRT DeepSeek point: four 4-GPU prefill workers, one 32-GPU decode worker, tp = ep = GPUs."""
    return {"hardware": "gb200", "framework": "dynamo-trt", "model_prefix": "dsr1", "precision": "fp4",
            "spec_decoding": "none", "isl": 8192, "osl": 1024, "conc": conc, "disagg": True, "num_gpus": 48,
            "num_prefill_gpu": 16, "prefill_num_workers": 4, "prefill_tp": 4, "prefill_ep": 4,
            "num_decode_gpu": 32, "decode_num_workers": 1, "decode_tp": 32, "decode_ep": 32, **flags}


def test_the_points_own_data_parallel_attention_flags_decide_each_pool(tmp_path) -> None:
    # InferenceX's results say per pool whether attention runs data-parallel; the TP columns cannot (a TRT-LLM
    # worker reports tp = ep = its GPUs either way), so a file's flags decide and only their absence is inferred
    rows = [_wide_ep(538), _wide_ep(32), _wide_ep(538, prefill_dp_attention="false", decode_dp_attention="False"),
            _wide_ep(32, prefill_dp_attention="", decode_dp_attention="true")]
    path = tmp_path / "points.csv"
    pl.DataFrame(rows).write_csv(path)
    f = point_features(load_points(path), CAT)
    # inferred: TensorRT-LLM's wide-EP prefill workers, and its decode workers at 64+ clients each
    assert f.dpa_pf.tolist() == [True, True, False, True]
    assert f.dpa_dec.tolist() == [True, False, False, True]
    # the flag is physics, not a label: a data-parallel decode keeps one copy of each sequence's MLA latent, so the
    # same 32 GPUs hold many times the sequences they hold with the latent copied on every rank
    assert f.kv_cap[3] > 8 * f.kv_cap[1]


def test_a_flag_that_is_not_yes_or_no_names_its_line(tmp_path) -> None:
    path = tmp_path / "points.csv"
    pl.DataFrame([_wide_ep(8, decode_dp_attention="true"), _wide_ep(8, decode_dp_attention="maybe")]).write_csv(path)
    with pytest.raises(TraceFormatError, match=r"points.csv:3: column 'decode_dp_attention': expected true/false"):
        load_points(path)


def test_the_api_points_of_the_calibrations_own_runs_are_its_points(points: pl.DataFrame) -> None:
    # official_api_points.csv was transcribed from the InferenceX API fixture: where a run is also a calibration
    # run, the same configuration must carry the same measurements (to the calibration's six digits) and the same
    # data-parallel attention flags the calibration took from it
    api = load_points(ROOT / "data" / "inferencex" / "official_api_points.csv")
    points = from_run_artifacts(points)
    key = ["run_id", "hardware", "framework", "model_prefix", "precision", "spec_decoding", "isl", "osl", "conc",
           "num_gpus", "num_prefill_gpu", "prefill_tp", "prefill_num_workers", "decode_tp", "decode_num_workers",
           "tp", "ep"]
    cast = [pl.col(c).cast(pl.Float64).fill_null(-1.0) for c in key
            if c not in ("hardware", "framework", "model_prefix", "precision", "spec_decoding")]
    j = api.with_columns(cast).join(points.with_columns(cast), on=key, how="inner", suffix="_cal")
    assert j.height >= 50 and j["disagg"].sum() >= 40
    for m in ("median_ttft_s", "median_tpot_s", "median_e2el_s"):
        assert ((j[m] / j[f"{m}_cal"] - 1).abs() < 2e-5).all(), m
    for c in ("prefill_dp_attention", "decode_dp_attention"):
        both = j.filter(pl.col(f"{c}_cal").is_not_null())
        assert both.height >= 40 and (both[c] == both[f"{c}_cal"]).all()
