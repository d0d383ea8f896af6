"""A disaggregated prefill worker whose recipe runs its MoE all-to-all without two-batch overlap pays each prompt's
collectives in its time per prompt (``scheduling.toml [prefill_collectives]``): in the equations' pool work ``W``
and in the simulation's batched prefill steps (docs/DEVICE_MODEL.md §2.2, §4)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl
import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.kvcache import prefill_collectives_exposed
from agentprof.replay.calibration import prior_theta, step_params
from agentprof.replay.costmodel import Deployment
from agentprof.replay.equations import QUEUE_SPREAD
from agentprof.replay.points import (
    LENGTH_MEAN_FRACTION,
    PARAMS,
    fixed_overhead,
    point_attn_eff,
    point_features,
    predict_times,
)
from agentprof.replay.serving.pools import Pools
from agentprof.replay.serving.stepcost import StepCost

CAT = load_catalog()
ETA = 0.077
# GB200 Dynamo-SGLang FP4, four 4-GPU prefill workers (attention data-parallel) for 15,000 clients: measured
# TTFT 28-30 s, the prefill pool saturated
SGL = {"hardware": "gb200", "framework": "dynamo-sglang", "model_prefix": "dsr1", "precision": "fp4",
       "spec_decoding": "none", "isl": 1024, "osl": 1024, "conc": 15000, "disagg": True, "prefill_num_workers": 4,
       "num_prefill_gpu": 16, "prefill_tp": 1, "prefill_ep": 1, "decode_num_workers": 1, "num_decode_gpu": 32,
       "decode_tp": 1, "decode_ep": 1}
TRT = {**SGL, "framework": "dynamo-trt", "prefill_tp": 4, "prefill_ep": 4}


def test_the_catalog_lists_the_sglang_gb200_prefill_and_nothing_else() -> None:
    on, src = prefill_collectives_exposed("dynamo-sglang", "deepseek-r1", "gb200")
    assert on and "S51" in src and "two-batch-overlap" in src
    assert not prefill_collectives_exposed("dynamo-trt", "deepseek-r1", "gb200")[0]
    assert not prefill_collectives_exposed("sglang-disagg", "deepseek-r1", "mi355x")[0]
    assert not prefill_collectives_exposed("dynamo-sglang", "deepseek-r1", "b200")[0]


def test_a_bad_entry_is_one_clear_error(tmp_path, monkeypatch) -> None:
    from agentprof.catalog import kvcache

    bad = tmp_path / "scheduling.toml"
    bad.write_text('[[prefill_collectives]]\nframework = "x"\nmodel = "y"\nexposed = { value = 2, source = "s" }\n')
    monkeypatch.setattr(kvcache, "SCHED_PATH", bad)
    kvcache._collective_entries.cache_clear()
    try:
        with pytest.raises(CatalogError, match="exposed: expected 0 or 1"):
            prefill_collectives_exposed("x", "y")
    finally:
        kvcache._collective_entries.cache_clear()


def test_the_points_carry_each_prompts_all_to_all_where_listed() -> None:
    f = point_features(pl.DataFrame([SGL, TRT]), CAT)
    pre = Deployment(CAT.models["deepseek-r1"], CAT.accelerators["gb200"], "fp4", 4, True, float(f.kv_bytes[0]))
    want = float(pre.comm_s(LENGTH_MEAN_FRACTION * SGL["isl"]))
    assert bool(f.dpa_pf[0]) and want > 0
    assert f.work.pf_serial_s[0] == pytest.approx(want, rel=1e-12)
    assert f.work.pf_serial_s[1] == 0.0  # TRT-LLM's prefill is not listed: its collectives stay hidden
    # subsets keep the field (cross-validation slices the features)
    assert f.subset(np.array([True, False])).work.pf_serial_s[0] == pytest.approx(want)


def test_a_saturated_pool_is_bound_by_compute_plus_the_exposed_collectives() -> None:
    # 30,000 clients: with GB200's FlashAttention-4 prefill the pool is past its knee by a wide margin
    sat = {**SGL, "conc": 30000}
    f = point_features(pl.DataFrame([sat]), CAT)
    th = prior_theta()[None, :]
    hidden = dataclasses.replace(f, work=dataclasses.replace(f.work, pf_serial_s=np.zeros(1)))
    t, t0 = predict_times(f, th, ETA), predict_times(hidden, th, ETA)
    w = f.work
    mfu_pf, mbu = th[0, PARAMS.index("mfu_pf")], th[0, PARAMS.index("mbu")]
    eta = float(point_attn_eff(f, ETA)[0])  # the kernel's figure where the chip has one (GB200: FlashAttention-4)
    work = max(w.pf_gemm_s[0] / mfu_pf + w.pf_attn_s[0] / eta, w.pf_kv_s[0] / mbu)
    # each prompt's share of its pass's step overhead and, where they hide each other's, of one prompt's collectives
    t_fixed = float(fixed_overhead(f.layers, th[0, 0], th[0, 1], f.g_pf, f.dpa_pf, th[0, PARAMS.index("a2a_ratio")])[0])
    share = w.n_chunks[0] / (w.pf_batch[0] * w.pf_ranks[0])
    for tt, extra in ((t, w.pf_serial_s[0] + share * t_fixed), (t0, share * (t_fixed + w.comm_pf_s[0]))):
        # past the knee TTFT is the closed loop's cycle less the decode: conc x (W + collectives) / n_prefill, W the
        # mean over the prefill time's log-normal spread (to 1 %: the smooth wait nears its asymptote from above)
        mean = math.exp(QUEUE_SPREAD ** 2 / 2)
        bound = sat["conc"] * (work + extra) * mean / sat["prefill_num_workers"] - (w.osl[0] - 1.0) * float(tt.tpot[0])
        assert float(tt.ttft[0]) == pytest.approx(bound, rel=1e-2)
    assert float(t.ttft[0]) > float(t0.ttft[0]) + 0.5 * sat["conc"] * w.pf_serial_s[0] / sat["prefill_num_workers"]
    # a slower pool leaves fewer clients decoding (Little's law): the decode batch and the step shrink
    assert float(t.decode_batch[0]) < float(t0.decode_batch[0]) and float(t.tpot[0]) < float(t0.tpot[0])


def test_the_simulated_pool_pays_every_batched_prompts_collectives_where_listed() -> None:
    model, acc = CAT.models["deepseek-r1"], CAT.accelerators["gb200"]
    pre = Deployment(model, acc, "fp4", 4, True, 1.0)
    dec = Deployment(model, acc, "fp4", 32, True, 1.0)
    th = prior_theta()
    pp = step_params(th, pre.layers, 4, accept=1.0, dpa=True).with_(attn_eff=ETA)
    dp = step_params(th, dec.layers, 32, accept=1.0, dpa=True).with_(attn_eff=ETA)

    def pools(overlap: bool) -> Pools:
        return Pools.of(StepCost(pre, pp, 0.95, 64e9, 25e9), StepCost(dec, dp, 0.95, 64e9, 25e9), 4, 1,
                        overlap_comm=overlap)

    nine = [(900.0, 0.0, 1.0)] * 9
    hid, exp = pools(True).prefill, pools(False).prefill
    assert hid.overlap_comm and not exp.overlap_comm
    comm = float(pre.comm_s(9 * 900.0))
    # hidden: one prompt's share of the step's collectives is exposed; listed: all of them
    assert exp.chunks_s(nine) - hid.chunks_s(nine) == pytest.approx(comm * (1 - 1 / 9), rel=1e-9)
