"""The cost model's physics: byte counts against independent derivations, monotonicity, sharding, limits."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.costmodel import (
    Deployment,
    StepParams,
    call_times,
    decode_step_s,
    kv_load_s,
    prefill_s,
)
from agentprof.replay.points import PARAMS, point_features, predict
from agentprof.replay.seedcheck import theta_of
from agentprof.replay.systems import resolve

CAT = load_catalog()
P = StepParams(t_fixed_s=2e-3, mbu=0.75, mfu=0.35, t0_s=0.01, t_req_s=0.005, q=1.0, m_steps=1.5)


def dep(model: str = "gpt-oss-120b", acc: str = "h200", prec: str = "fp4", gpus: int = 8, **kw) -> Deployment:
    return Deployment(CAT.models[model], CAT.accelerators[acc], prec, gpus, **kw)


@pytest.mark.parametrize("model, prec", [("gpt-oss-120b", "fp4"), ("deepseek-r1", "fp8"), ("kimi-k2.5", "int4"),
                                         ("mistral-nemo-12b", "bf16")])
def test_weight_bytes_match_the_catalog_derivations(model: str, prec: str) -> None:
    # hardware.md §3 derives total and per-token active bytes independently of the layer-by-layer count here
    d = dep(model, prec=prec)
    m = CAT.models[model]
    assert d.weight_bytes == pytest.approx(m.get("weight_bytes"), rel=0.02)
    assert float(d.active_bytes(1)) == pytest.approx(m.get("active_bytes_per_token"), rel=0.06)


def test_distinct_experts_follow_uniform_routing() -> None:
    # hardware.md §3: GPT-OSS at B=4 touches 15.3 of 128 experts; DeepSeek-R1 at B=4 touches 30.5 of 256
    for model, prec, touched in (("gpt-oss-120b", "fp4", 15.3), ("deepseek-r1", "fp8", 30.5)):
        d = dep(model, prec=prec)
        moe = float(d.active_bytes(4) - d.nonexpert_read_bytes) / (d.moe_layers * d.expert_bytes)
        assert moe == pytest.approx(touched, abs=0.05)
    d = dep("deepseek-r1", prec="fp8")
    full = d.nonexpert_read_bytes + d.moe_layers * d.experts * d.expert_bytes
    assert float(d.active_bytes(100000)) == pytest.approx(full, rel=1e-6)


def test_kv_sharding_by_attention_kind() -> None:
    gqa, mla = dep("gpt-oss-120b", gpus=8), dep("deepseek-r1", prec="fp8", gpus=8)
    assert gqa.kv_divisor == 8 and mla.kv_divisor == 1  # MLA latent replicated on every TP rank
    assert dep("deepseek-r1", prec="fp8", gpus=8, dp_attention=True).kv_divisor == 8
    assert dep("gpt-oss-120b", acc="gb200", gpus=16).kv_divisor == 8  # only 8 KV heads to shard
    # KV bytes per token: MLA 61 x (512 + 64) x 2; GPT-OSS 18 full layers x 2 x 8 x 64 x 2 (hardware.md §3)
    assert mla.kv_token_bytes == 61 * 576 * 2
    assert gqa.kv_token_bytes == 18 * 2 * 8 * 64 * 2
    assert float(gqa.kv_seq_bytes(100)) == 36 * 100 * 2048  # below the 128-token window every layer counts


def test_more_gpus_stream_fewer_bytes_each() -> None:
    b = [float(dep("deepseek-r1", "b200", "fp4", g).decode_bytes_per_gpu(16, 4000)) for g in (1, 2, 4, 8)]
    assert b == sorted(b, reverse=True)


@pytest.mark.parametrize("model, prec", [("gpt-oss-120b", "fp4"), ("deepseek-r1", "fp4"), ("kimi-k2.5", "int4"),
                                         ("gemma-3-12b", "bf16")])
def test_more_bandwidth_never_slows_decode(model: str, prec: str) -> None:
    base = CAT.accelerators["b200"]
    bws = [2e12, 4e12, 8e12, 16e12, 32e12]
    for batch in (1, 8, 64, 512):
        for ctx in (500, 8000, 120000):
            times = []
            for bw in bws:
                fields = dict(base.fields)
                fields["hbm_bw"] = dataclasses.replace(fields["hbm_bw"], value=bw)
                acc = dataclasses.replace(base, fields=fields)
                times.append(float(decode_step_s(Deployment(CAT.models[model], acc, prec, 8), P, batch, ctx)))
            assert all(a >= b for a, b in zip(times, times[1:], strict=False)), (batch, ctx, times)
            assert times[0] > times[-1]


@pytest.mark.parametrize("model, prec", [("gpt-oss-120b", "fp4"), ("deepseek-r1", "fp8"), ("gemma-3-12b", "bf16")])
def test_longer_cached_prefix_never_slows_prefill(model: str, prec: str) -> None:
    d = dep(model, prec=prec)
    for prompt in (1000, 30000, 150000):
        cached = np.linspace(0, prompt - 1, 200)
        t = prefill_s(d, P, prompt - cached, cached)
        assert np.all(np.diff(t) <= 1e-12), prompt
        total = call_times(d, P, np.full(200, prompt), cached, np.full(200, 300)).total_s
        assert np.all(np.diff(total) <= 1e-12)


def test_attention_to_the_cached_prefix_costs_flops() -> None:
    # the same new tokens cost more after a longer prefix: attention grows with the cached context
    d = dep("deepseek-r1", prec="fp8")
    f = d.prefill_flops(np.array([2000.0, 2000.0]), np.array([0.0, 100000.0]))
    assert f[1] > 2 * f[0]


def test_decode_kv_reads_grow_with_context() -> None:
    d = dep("kimi-k2.5", "b200", "int4")
    t = decode_step_s(d, P, 8, np.array([1e3, 1e4, 1e5]))
    assert np.all(np.diff(t) > 0)


def test_loading_a_cpu_prefix_is_slower_over_pcie_than_c2c() -> None:
    d = dep("kimi-k2.5", "b200", "int4")
    pcie = kv_load_s(d, 100000, CAT.links["pcie5-x16"].bw.value)
    c2c = kv_load_s(d, 100000, CAT.links["nvlink-c2c-grace"].bw.value)
    assert float(pcie) == pytest.approx(100000 * 61 * 576 * 2 / 64e9)
    assert c2c < pcie


def test_speculative_acceptance_divides_decode_time() -> None:
    d = dep("deepseek-r1", "gb200", "fp4")
    one = call_times(d, P, np.array([1000.0]), np.array([0.0]), np.array([1000.0]))
    two = call_times(d, P.with_(accept=2.0), np.array([1000.0]), np.array([0.0]), np.array([1000.0]))
    assert float(two.decode_s[0]) == pytest.approx(float(one.decode_s[0]) / 2)


def test_kv_capacity_caps_the_running_batch() -> None:
    d = dep("kimi-k2.5", "h200", "int4")
    cap = float(d.max_batch(160000))
    free = 141e9 * 0.9 - d.weight_bytes_per_gpu
    assert cap == np.floor(free / (160000 * 61 * 1152))
    under = call_times(d, P, np.array([150000.0]), np.array([140000.0]), np.array([10000.0]), batch=int(cap))
    over = call_times(d, P, np.array([150000.0]), np.array([140000.0]), np.array([10000.0]), batch=int(cap) * 3)
    assert float(under.queue_s[0]) == 0 and float(over.queue_s[0]) > float(under.total_s[0])


def test_replay_equations_match_the_calibrated_point_model() -> None:
    # call_times (replay) and predict (calibration) implement the same aggregated-serving equations
    theta = theta_of(P, 36)
    for conc in (1, 4, 32):
        row = {"hardware": "h200", "framework": "vllm", "model": "gpt-oss-120b", "precision": "fp4", "isl": 1024,
               "osl": 1024, "conc": conc, "tp": 8, "ep": 1, "dp_attention": False, "disagg": False}
        f = point_features(pl.DataFrame([row]), CAT)
        ttft, tpot, e2e = predict(f, theta[None, :])
        d = dep("gpt-oss-120b", "h200", "fp4", 8)
        t = call_times(d, P, np.array([921.6]), np.array([0.0]), np.array([921.6]), batch=conc)
        assert float(t.ttft_s[0]) == pytest.approx(float(ttft[0]), rel=1e-9)
        assert float(t.total_s[0]) == pytest.approx(float(e2e[0]), rel=1e-9)
    assert len(theta) == len(PARAMS)


def test_jalapeno_overhead_and_bandwidth_give_the_claimed_min_tbt() -> None:
    # seed claim: 2.7x lower min time-between-tokens than the best GPU (1.86 ms GB200, 2.30 ms B200 TRT) on
    # GPT-OSS 8k1k, i.e. 0.69-0.85 ms (hardware.md §2.4); measured at concurrency 1, mean 8k1k context
    r = resolve(CAT.system("jalapeno"), CAT.models["gpt-oss-120b"], CAT)
    assert r.dep.gpus == 1
    tbt = float(decode_step_s(r.dep, r.params, 1, 0.9 * 8192 + 0.9 * 1024 / 2))
    assert 1.86e-3 / 2.7 <= tbt <= 2.30e-3 / 2.7
    # the bandwidth term alone explains only part of the gain: the fixed overhead must fall too
    bw_only = tbt - r.params.t_fixed_s
    assert bw_only < 0.5 * tbt + 1e-4
