"""The cost model's physics: byte counts against independent derivations, monotonicity, sharding, limits."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.kvcache import ahead_steps, prefill_alone, tokenize_s_per_token
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


def _pair_flops(model: str, new: float, cached: float) -> float:
    """Causal attention FLOPs of ``new`` tokens after ``cached`` ones, from the catalog's MLA dimensions."""
    m = CAT.models[model]
    dims = m.get("q_heads") * (m.get("qk_nope_dim") + m.get("rope_dim") + m.get("v_head_dim"))
    return 2.0 * dims * m.get("layers") * new * (cached + new / 2.0)


def test_mla_prefill_re_expands_its_cached_prefix() -> None:
    # MLA prefill attends in per-head form: every prefill up-projects each cached token's latent into K and V again,
    # work that grows with the prefix whatever the new tokens; GQA reads its cached K and V as they are
    d, g = dep("deepseek-r1", prec="fp8"), dep("gpt-oss-120b")
    m = CAT.models["deepseek-r1"]
    per_token = 2.0 * m.get("kv_lora_rank") * m.get("q_heads") * (m.get("qk_nope_dim") + m.get("v_head_dim"))
    for new in (16.0, 2000.0):
        extra = float(d.prefill_attn_flops(new, 100_000.0)) - _pair_flops("deepseek-r1", new, 100_000.0)
        assert extra == pytest.approx(per_token * m.get("layers") * 100_000.0, rel=1e-12)
    assert float(d.context_expand_flops(0.0, 100_000.0)) == 0.0  # nothing prefilled, nothing expanded
    assert float(g.context_expand_flops(2000.0, 100_000.0)) == 0.0
    # a short turn after a long prefix: re-expanding the prefix outweighs the turn's own attention to it
    assert float(d.context_expand_flops(16.0, 100_000.0)) > 10 * _pair_flops("deepseek-r1", 16.0, 100_000.0)


def test_a_chunked_prefill_costs_what_its_chunks_cost() -> None:
    # under a per-step budget each chunk attends to (and, for MLA, re-expands) the prefix and the chunks before it:
    # pricing the prefill whole with its budget equals pricing its chunks one after another
    for model, acc, prec in (("kimi-k2.5", "b200", "fp4"), ("gpt-oss-120b", "h200", "fp4")):
        d = dep(model, acc, prec, 8)
        whole = float(d.prefill_peak_s(20_000.0, 50_000.0, 0.2, 0.7, chunk=8192.0))
        parts, ctx = 0.0, 50_000.0
        for size in (8192.0, 8192.0, 3616.0):
            parts += float(d.prefill_peak_s(size, ctx, 0.2, 0.7))
            ctx += size
        assert whole == pytest.approx(parts, rel=1e-12)
        # chunks attend to earlier chunks at the prefix's efficiency (and MLA re-expands them): never cheaper
        assert whole > float(d.prefill_peak_s(20_000.0, 50_000.0, 0.2, 0.7))


def test_a_fresh_prompt_runs_at_its_kernels_published_efficiency_in_replays_too() -> None:
    # the fixed-sequence points price a fresh prompt's attention at the chip's published kernel figure; a replay
    # prices a fresh one-chunk call the same way, and only attention to a cached prefix at the fitted efficiency
    r = resolve(CAT.system("b200+x86"), CAT.models["kimi-k2.5"], CAT)
    assert r.params.fresh_eff == CAT.accelerators["b200"].attn_fwd_eff != r.params.attn_eff
    slow = r.params.with_(attn_eff=r.params.attn_eff / 10)
    one = np.array([6000.0])
    assert prefill_s(r.dep, slow, one, 0.0) == pytest.approx(prefill_s(r.dep, r.params, one, 0.0), rel=1e-12)
    assert prefill_s(r.dep, slow, one, 50_000.0) > 2 * prefill_s(r.dep, r.params, one, 50_000.0)
    fresh = [call_times(r.dep, p, one, np.zeros(1), np.array([200.0])).ttft_s for p in (r.params, slow)]
    assert fresh[0] == pytest.approx(fresh[1], rel=1e-12)
    cached = [call_times(r.dep, p, one + 50_000, np.array([50_000.0]), np.array([200.0])).ttft_s
              for p in (r.params, slow)]
    assert cached[1] > cached[0]


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


def test_kv_capacity_is_soft_a_batch_drains() -> None:
    # capacity counts KV at the mean context (sequences finish and free their KV); clients beyond it wait for
    # the running batch to drain, a wait that grows smoothly with how far the batch overflows
    d = dep("kimi-k2.5", "h200", "int4")
    inp, out = 150000.0, 10000.0
    cap = float(d.max_batch(inp + out / 2))
    free = d.accel.hbm_bytes * 0.9 - d.weight_bytes_per_gpu  # the driver-reported HBM (150.75e9 on H200)
    assert cap == np.floor(free / ((inp + out / 2) * 61 * 1152))
    args = (np.array([inp]), np.array([140000.0]), np.array([out]))
    under = call_times(d, P, *args, batch=int(cap))
    q1 = call_times(d, P, *args, batch=int(cap) * 2)
    q2 = call_times(d, P, *args, batch=int(cap) * 3)
    assert float(q1.queue_s[0]) > float(under.queue_s[0])
    assert float(q2.queue_s[0]) > float(q1.queue_s[0]) > 0.5 * float(under.total_s[0])
    # the decode batch itself stays at the capacity: the step time does not grow past it
    assert float(q2.decode_s[0]) == pytest.approx(float(q1.decode_s[0]))


def test_kv_bytes_as_deployed_and_mla_per_attention_rank() -> None:
    from agentprof.catalog.kvcache import kv_bytes

    assert kv_bytes("trt", "gpt-oss-120b", "b200")[0] == 1  # FP8 KV in the TRT-LLM recipe
    assert kv_bytes("dynamo-trt", "gpt-oss-120b", "gb200")[0] == 1
    assert kv_bytes("vllm", "gpt-oss-120b", "h200")[0] == 2
    assert kv_bytes("sglang", "deepseek-r1", "b200")[0] == 1
    assert "fp8" in kv_bytes("atom", "deepseek-r1", "mi355x")[1]
    # an MLA latent is replicated on every TP rank, but split by sequence over data-parallel attention ranks
    tp = dep("deepseek-r1", "gb200", "fp4", 16, kv_dtype_bytes=1.0)
    dpa = dep("deepseek-r1", "gb200", "fp4", 16, dp_attention=True, kv_dtype_bytes=1.0)
    assert float(dpa.max_batch(1400)) >= 10 * float(tp.max_batch(1400))  # less: DPA replicates the dense weights
    # the measured Dynamo-TRT run served 2,150 sequences on one 16-GPU decode worker: it fits as deployed
    assert float(dpa.max_batch(0.9 * 1024 + 0.9 * 1024 / 2, 0.95)) >= 2150
    bf16 = dep("deepseek-r1", "gb200", "fp4", 16)
    assert float(bf16.max_batch(1400)) < 2150


def test_weight_gemms_run_at_their_own_formats_rate() -> None:
    # DeepSeek R1 FP4 quantizes the routed experts only: attention, shared experts and dense layers stay FP8 and
    # run at the FP8 rate; the input embedding is a gather, a prefill computes the output head once per prompt
    m = CAT.models["deepseek-r1"]
    b200 = CAT.accelerators["b200"]
    fp4, fp8 = b200.peak_flops("fp4"), b200.peak_flops("fp8")
    routed = (m.get("layers") - m.get("dense_layers")) * m.get("experts_per_token") * 3 * m.get("hidden") \
        * m.get("expert_ffn")
    embed = m.get("vocab") * m.get("hidden")
    other = m.get("params_active") - routed
    d4 = dep("deepseek-r1", "b200", "fp4", 8)
    assert d4.gemm_peak_s_per_token == pytest.approx(2 * (routed / fp4 + (other - embed) / fp8))
    assert d4.prefill_gemm_peak_s_per_token == pytest.approx(2 * (routed / fp4 + (other - 2 * embed) / fp8))
    # slower than "everything at FP4" (the first model) by the share of non-expert work
    assert d4.prefill_gemm_peak_s_per_token > 1.3 * 2 * (m.get("params_active") - 2 * embed) / fp4
    d8 = dep("deepseek-r1", "b200", "fp8", 8)
    assert d8.prefill_gemm_peak_s_per_token == pytest.approx(2 * (m.get("params_active") - 2 * embed) / fp8)
    # GPT-OSS keeps attention in BF16: on Blackwell only its MXFP4 experts run at the FP4 rate; Hopper has no
    # FP4 units, everything runs at BF16
    g = CAT.models["gpt-oss-120b"]
    h100 = dep("gpt-oss-120b", "h100", "fp4", 1)
    g_embed = g.get("vocab") * g.get("hidden")
    assert h100.prefill_gemm_peak_s_per_token == pytest.approx(
        2 * (g.get("params_active") - 2 * g_embed) / CAT.accelerators["h100"].peak_flops("bf16"))
    b = dep("gpt-oss-120b", "b200", "fp4", 1)
    assert b.prefill_gemm_peak_s_per_token > 2 * (g.get("params_active") - 2 * g_embed) / fp4
    # prefill FLOPs-time and the calibration's point features use the same per-token GEMM time
    assert float(d4.prefill_peak_s(1000.0, 0.0)) > d4.prefill_gemm_peak_s_per_token * 1000.0 / 8


def test_collectives_beyond_the_scaleup_domain_cross_the_nic() -> None:
    # MI355X: 8 GPUs per Infinity Fabric domain; an EP16 decode worker spans two nodes, so 8 of each GPU's 15
    # all-to-all peers sit behind the 400 Gb/s NIC (S2-spec) and that link binds
    t = np.array([128.0, 2048.0])
    one = dep("deepseek-r1", "mi355x", "fp8", 8, dp_attention=True)
    two = dep("deepseek-r1", "mi355x", "fp8", 16, dp_attention=True)
    up, out = CAT.accelerators["mi355x"].fields["scaleup_bw"].value, CAT.accelerators["mi355x"].fields["scaleout_bw"].value
    assert out == pytest.approx(50e9)
    np.testing.assert_allclose(one.comm_s(t), one.comm_bytes_per_gpu(t) / up)
    b = two.comm_bytes_per_gpu(t)
    np.testing.assert_allclose(two.comm_s(t), np.maximum(b * 7 / 15 / up, b * 8 / 15 / out))
    assert np.all(two.comm_s(t) > 5 * b / up)
    # a tensor-parallel ring over two nodes passes every byte through the NIC
    tp16 = dep("deepseek-r1", "mi355x", "fp8", 16)
    np.testing.assert_allclose(tp16.comm_s(t), tp16.comm_bytes_per_gpu(t) / out)
    # GB200 NVL72: 72 GPUs share the NVLink domain, no NIC on the path
    nvl = dep("deepseek-r1", "gb200", "fp4", 32, dp_attention=True)
    np.testing.assert_allclose(nvl.comm_s(t), nvl.comm_bytes_per_gpu(t) / CAT.accelerators["gb200"].fields["scaleup_bw"].value)


def test_trt_streams_the_first_token_without_waiting_for_the_stream_interval() -> None:
    # TRT-LLM builds a response at the first decoding iteration whatever stream_interval is (S46), SGLang sends
    # when the output count modulo the interval is 1 (S71) and never reads --num-continuous-decode-steps (S72);
    # SGLang's scheduler polling interval (--scheduler-recv-interval) does hold new requests
    from agentprof.catalog.kvcache import wait_steps

    assert wait_steps("trt", "gpt-oss-120b", "b200", 64)[0] == 0
    assert wait_steps("dynamo-trt", "gpt-oss-120b", "gb200", 1024)[0] == 0
    assert wait_steps("sglang", "deepseek-r1", "b200", 64)[0] == 15
    assert wait_steps("sglang", "deepseek-r1", "h200", 64)[0] == 0  # --stream-interval 10
    assert wait_steps("sglang", "deepseek-r1", "mi355x", 64)[0] == 0  # --num-continuous-decode-steps 4
    # a recipe's branch: DeepSeek FP8 on 4 B200s polls every 10 steps at any concurrency, on 8 every 30 from 16
    assert wait_steps("sglang", "deepseek-r1", "b200", 64, "fp8", 4)[0] == 5
    assert wait_steps("sglang", "deepseek-r1", "b200", 64, "fp8", 8)[0] == 15
    assert wait_steps("sglang-disagg", "deepseek-r1", "mi355x", 64)[0] == 0
    # B300's recipes reuse B200's as they are, polling interval included
    for conc, prec, tp, want in ((8, "fp8", 8, 5), (64, "fp8", 8, 15), (64, "fp4", 8, 15), (64, "fp8", 4, 5)):
        got, src = wait_steps("sglang", "deepseek-r1", "b300", conc, prec, tp)
        assert got == want and "b300" in src


def test_overlap_schedulers_run_one_step_ahead_and_only_while_others_decode() -> None:
    from agentprof.replay.equations import times

    assert ahead_steps("sglang", "deepseek-r1")[0] == 1 and ahead_steps("dynamo-trt", "gpt-oss-120b")[0] == 1
    assert ahead_steps("vllm", "gpt-oss-120b")[0] == 1  # the recipes' async-scheduling: true
    assert ahead_steps("vllm", "kimi-k2.5")[0] == 0 and ahead_steps("atom", "deepseek-r1")[0] == 0
    row = {"hardware": "h200", "framework": "sglang", "model": "deepseek-r1", "precision": "fp8", "isl": 1024,
           "osl": 1024, "tp": 8, "ep": 1, "dp_attention": False, "disagg": False}
    w = point_features(pl.DataFrame([{**row, "conc": c} for c in (1, 4, 64)]), CAT).work
    np.testing.assert_allclose(w.wait_steps, 0.0)  # the recipe sets no polling interval
    np.testing.assert_allclose(w.ahead, 1.0)
    th = theta_of(P, 61)
    tf = np.full(3, P.t_fixed_s)

    def ttft(work: object) -> np.ndarray:
        return times(work, tf, tf, *(np.full(3, th[PARAMS.index(k)]) for k in ("mbu", "mfu", "t0_s", "q", "t_req_s")),
                     np.ones(3), 0.2).ttft

    t_ahead, t_none = ttft(w), ttft(dataclasses.replace(w, ahead=None))
    # alone, nothing runs ahead of the request; with others decoding it waits for the launched step too
    assert t_ahead[0] == pytest.approx(t_none[0], rel=1e-12)
    assert t_ahead[1] > t_none[1] and t_ahead[2] > t_none[2]
    p = P.with_(ahead_steps=1.0)
    d = dep("deepseek-r1", "h200", "fp8", 8)
    one = call_times(d, p, np.array([1000.0]), np.array([0.0]), np.array([100.0]), batch=1)
    alone = call_times(d, P, np.array([1000.0]), np.array([0.0]), np.array([100.0]), batch=1)
    assert float(one.ttft_s[0]) == pytest.approx(float(alone.ttft_s[0]), rel=1e-12)
    busy = call_times(d, p, np.array([1000.0]), np.array([0.0]), np.array([100.0]), batch=8)
    plain = call_times(d, P, np.array([1000.0]), np.array([0.0]), np.array([100.0]), batch=8)
    assert float(busy.ttft_s[0]) > float(plain.ttft_s[0])


def test_an_engine_that_runs_prefill_alone_holds_the_batch_for_each_whole_pass() -> None:
    from agentprof.replay.equations import times

    # SGLang runs a waiting prompt's pass first and alone [S74]; vLLM, TensorRT-LLM and ATOM mix chunks into steps
    assert prefill_alone("sglang", "deepseek-r1")[0] and "S74" in prefill_alone("sglang", "deepseek-r1")[1]
    assert not any(prefill_alone(fw, "gpt-oss-120b")[0] for fw in ("vllm", "trt", "atom"))
    row = {"hardware": "h200", "framework": "sglang", "model": "deepseek-r1", "precision": "fp8", "isl": 1024,
           "osl": 1024, "tp": 8, "ep": 1, "dp_attention": False}
    w = point_features(pl.DataFrame([{**row, "disagg": False, "conc": c} for c in (1, 16, 64)]), CAT).work
    np.testing.assert_allclose(w.pf_alone, 1.0)
    dis = {"hardware": "mi355x", "framework": "sglang-disagg", "model": "deepseek-r1", "precision": "fp8",
           "isl": 1024, "osl": 1024, "conc": 64, "disagg": True, "prefill_num_workers": 1, "num_prefill_gpu": 8,
           "prefill_tp": 8, "decode_num_workers": 2, "num_decode_gpu": 16, "decode_tp": 8, "decode_ep": 8}
    assert point_features(pl.DataFrame([dis]), CAT).work.pf_alone[0] == 0.0  # its decode workers never prefill
    th = theta_of(P, 61)
    tf = np.full(3, P.t_fixed_s)
    par = [np.full(3, th[PARAMS.index(k)]) for k in ("mbu", "mfu", "t0_s", "q", "t_req_s")]
    alone = times(w, tf, tf, *par, np.ones(3), 0.2)
    mixed = times(dataclasses.replace(w, pf_alone=None), tf, tf, *par, np.ones(3), 0.2)
    # one client: nothing rides, nothing is held
    assert alone.tpot[0] == pytest.approx(mixed.tpot[0], rel=1e-12)
    assert alone.ttft[0] == pytest.approx(mixed.ttft[0], rel=1e-12)
    # others' prompts: each holds the batch for a whole pass (its steps' overhead and its weights, not only its
    # compute and collectives, which a riding chunk adds too), so the step grows by (b - 1) / osl of that difference
    mbu, mfu, t_req = par[0][0], par[1][0], par[4][0]
    pf_cmp = w.pf_gemm_s / mfu + w.pf_attn_s / 0.2
    pf_pass = w.n_chunks * (tf + w.comm_pf_s) + t_req + np.maximum(pf_cmp, w.pf_mem_s / mbu)
    riding = t_req + w.n_chunks * w.comm_pf_s + pf_cmp
    rate = (w.b_run - 1.0) / w.osl
    np.testing.assert_allclose(alone.tpot - mixed.tpot, rate * (pf_pass - riding), rtol=1e-9)
    assert (alone.tpot[1:] > mixed.tpot[1:]).all()
    # the new prompt's own pass reads the weights itself: a 1K-token DeepSeek prompt is bound by them on H200, so
    # its first token comes later than when it rides steps that read them for the batch anyway
    assert (w.pf_mem_s / mbu > pf_cmp).all() and (alone.ttft[1:] > mixed.ttft[1:]).all()
    # a replayed call on the same engine prices it the same way
    d = dep("deepseek-r1", "h200", "fp8", 8)
    one = [call_times(d, P.with_(prefill_alone=a), np.array([1000.0]), np.array([0.0]), np.array([100.0]), batch=16)
           for a in (True, False)]
    assert float(one[0].decode_s[0]) > float(one[1].decode_s[0])


def test_disaggregated_pools_transfer_kv_and_saturate_the_prefill_pool() -> None:
    from agentprof.replay.points import point_features, predict

    base = {"hardware": "gb200", "framework": "dynamo-trt", "model": "gpt-oss-120b", "precision": "fp4",
            "isl": 1024, "osl": 1024, "disagg": True, "prefill_num_workers": 1, "num_prefill_gpu": 1,
            "prefill_tp": 1, "decode_num_workers": 4, "num_decode_gpu": 16, "decode_tp": 4, "decode_ep": 1}
    f = point_features(pl.DataFrame([{**base, "conc": c} for c in (4, 64, 4096, 16384)]), CAT)
    d = dep("gpt-oss-120b", "gb200", "fp4", 4, kv_dtype_bytes=1.0)
    assert f.work.xfer_s[0] == pytest.approx(float(d.kv_seq_bytes(921.6)) / d.kv_divisor / 900e9)
    theta = np.tile(theta_of(P, 36), (4, 1))
    ttft, tpot, e2e = predict(f, theta)
    # decode workers carry no prefill: TPOT grows only with the decode batch
    assert tpot[0] < tpot[1] < tpot[3]
    # one prefill GPU for thousands of clients saturates: TTFT grows with the clients (closed loop)
    assert ttft[3] > 2 * ttft[2] > 2 * ttft[0]
    # ... and holds at least the pool's work: a saturated pool serves n_prefill / W prompts a second, so a
    # client's cycle (TTFT + decode) is at least conc·W / n_prefill (W: one prompt's batched prefill work)
    w = f.work.pf_gemm_s / P.mfu + f.work.pf_attn_s / 1.0  # attention at its own efficiency (predict's default 1)
    bound = f.work.conc * w / f.work.n_prefill - (f.work.osl - 1.0) * tpot
    assert np.all(ttft >= bound - 1e-9)
    assert bound[3] > 1.0 and ttft[3] < 1.5 * bound[3]


def test_disaggregated_hand_off_is_decode_steps_of_the_deployment() -> None:
    # the hand-off waits for the decode engine's own iterations: each step of it adds one decode step (the
    # deployment's, MTP acceptance undone) to a disaggregated TTFT, as queueing, and nothing to an aggregated
    # point; with the decode batch held, nothing to TPOT. By Little's law the clients waiting longer for their
    # first token leave the decode batch, so the step gets a little cheaper, never dearer
    from agentprof.replay.points import PARAMS, point_features, predict_times

    rows = [{"hardware": "gb200", "framework": "dynamo-trt", "model": "deepseek-r1", "precision": "fp4", "isl": 1024,
             "osl": 1024, "conc": c, "disagg": True, "prefill_num_workers": 1, "num_prefill_gpu": 4, "prefill_tp": 4,
             "decode_num_workers": 4, "num_decode_gpu": 32, "decode_tp": 8, "decode_ep": 8, "spec_decoding": spec}
            for c in (4, 64, 128) for spec in ("none", "mtp")]  # within the recipe's decode slots (128 with MTP)
    rows += [{"hardware": "b200", "framework": "sglang", "model": "deepseek-r1", "precision": "fp4", "isl": 1024,
              "osl": 1024, "conc": 64, "tp": 8, "ep": 8, "disagg": False, "spec_decoding": "none"}]
    little = point_features(pl.DataFrame(rows), CAT)
    f = dataclasses.replace(little, work=dataclasses.replace(little.work, bw_seq_s=None, cmp_seq_s=None,
                                                             comm_seq_s=None))  # the batch held at b_run
    theta = np.tile(theta_of(P, 61), (len(f), 1))
    theta[:, PARAMS.index("accept")] = 1.7
    t0, l0 = predict_times(f, theta), predict_times(little, theta)
    theta[:, PARAMS.index("handoff")] = 20.0
    t1, l1 = predict_times(f, theta), predict_times(little, theta)
    assert np.all(l1.tpot <= l0.tpot * (1 + 1e-12)) and np.any(l1.tpot[f.disagg] < l0.tpot[f.disagg])
    assert np.all(l1.ttft[f.disagg] > l0.ttft[f.disagg])
    step = np.where(f.mtp, t1.tpot * 1.7, t1.tpot)
    dis = f.disagg
    np.testing.assert_allclose(t1.tpot, t0.tpot)
    # (to 0.1 %: the longer hand-off also lengthens the closed loop's cycle, which shortens its prefill-pool wait)
    np.testing.assert_allclose((t1.ttft - t0.ttft)[dis], 20.0 * step[dis], rtol=1e-3)
    np.testing.assert_allclose((t1.parts["queueing"] - t0.parts["queueing"])[dis], 20.0 * step[dis], rtol=1e-3)
    assert t1.ttft[~dis] == pytest.approx(t0.ttft[~dis])
    np.testing.assert_allclose(sum(t1.parts.values()), t1.e2e, rtol=1e-12)


def _slots_rows(concs: tuple[int, ...]) -> pl.DataFrame:
    # GB200 Dynamo-TRT DeepSeek R1 without MTP, 4 decode workers of 8 GPUs: 4 x 128 slots in its recipe (S55)
    return pl.DataFrame([{"hardware": "gb200", "framework": "dynamo-trt", "model": "deepseek-r1", "precision": "fp4",
                          "isl": 1024, "osl": 1024, "conc": c, "disagg": True, "prefill_num_workers": 1,
                          "num_prefill_gpu": 4, "prefill_tp": 4, "decode_num_workers": 4, "num_decode_gpu": 32,
                          "decode_tp": 8, "decode_ep": 8, "spec_decoding": "none"} for c in concs])


def test_clients_beyond_the_recipes_decode_slots_wait_for_one() -> None:
    from agentprof.replay.points import predict_times

    concs = (256, 512, 564, 768, 1024)
    f = point_features(_slots_rows(concs), CAT)
    # the running batch stops at the slots (128 per worker), the rest queue: over = clients / slots - 1
    np.testing.assert_allclose(f.work.b_run, [64, 128, 128, 128, 128])
    np.testing.assert_allclose(f.work.over, [0, 0, 564 / 512 - 1, 0.5, 1.0])
    theta = np.tile(theta_of(P, 61), (len(f), 1))
    t = predict_times(f, theta, median=False)  # Little's law counts means
    assert np.all(np.diff(t.ttft) > 0)
    # Little's law in the closed loop: the slots turn over once per hold (the hand-off to the last token), so n
    # clients on s slots cycle once per (n/s)·hold; the prefill path before the hand-off holds no slot, so the
    # wait is that cycle less the path and the hold
    f0 = point_features(_slots_rows(concs), CAT)
    f0.work.over[:] = 0.0
    t0 = predict_times(f0, theta, median=False)
    hand = f.work.wait_steps * t0.tpot  # the scheduler's wait: the hand-off count is 0 in theta_of
    hold = hand + (f.work.osl - 1.0) * t0.tpot
    path = t0.ttft - hand
    # (to 1 %: the clients waiting for a slot are out of the prefill pool's loop, so the running ones queue there a
    # little less than when every client cycles through it)
    np.testing.assert_allclose(t.ttft, t0.ttft + np.maximum(f.work.over * hold - path, 0.0), rtol=1e-2)
    busy = f.work.over > 0
    assert busy.sum() == 3 and (f.work.over * hold - path)[busy].min() > 0
    # so requests complete at the slots' turnover rate, 512 slots once per hold
    rate = f.work.conc / (t.ttft + (f.work.osl - 1.0) * t.tpot)
    np.testing.assert_allclose(rate[busy], 512 / hold[busy], rtol=2e-2)
    np.testing.assert_allclose(t.tpot, t0.tpot, rtol=1e-2)  # (the decode batch by Little's law sees that wait)
    np.testing.assert_allclose(sum(t.parts.values()), t.e2e, rtol=1e-12)


def test_full_decode_slots_and_a_saturated_prefill_pool_bind_as_the_slower() -> None:
    # two bottlenecks of one closed loop: the request rate is the smaller of what the decode slots and what the
    # prefill pool serve, so the first token waits for the slower one, not for one and then the other
    from agentprof.replay.points import predict_times

    theta = np.tile(theta_of(P, 61), (3, 1))
    f = point_features(_slots_rows((564, 564, 564)), CAT)
    over = f.work.over.copy()
    f.work.n_prefill[:] = [1e6, 1e-3, 1e-3]  # 0: pool never saturated; 1, 2: one that is
    f.work.over[:] = [over[0], 0.0, over[2]]  # 0, 2: slots full; 1: none
    t = predict_times(f, theta)
    slot_bound, pool_bound, both = t.ttft
    assert pool_bound > slot_bound > 0.0
    assert both == pytest.approx(max(slot_bound, pool_bound), rel=1e-3)  # the pool's loop holds the admitted clients
    np.testing.assert_allclose(sum(t.parts.values()), t.e2e, rtol=1e-12)


def test_waiting_for_sums_to_the_call_time() -> None:
    d = dep("kimi-k2.5", "b200", "int4", 8)
    inp = np.array([1000.0, 80000.0, 150000.0, 200000.0])
    cached = np.array([0.0, 76000.0, 140000.0, 0.0])
    out = np.array([10.0, 300.0, 1.0, 2000.0])
    for batch in (1, 8, 64):
        t = call_times(d, P, inp, cached, out, batch=batch, load_s=np.array([0.0, 0.3, 0.0, 0.0]))
        total = sum(t.waiting_for.values())
        assert np.allclose(total, t.total_s, rtol=1e-12)
        assert set(t.waiting_for) == {"compute", "bandwidth", "overhead", "kv_load", "queueing"}
        assert t.waiting_for["kv_load"][1] == pytest.approx(0.3)
        assert all((v >= 0).all() for v in t.waiting_for.values())
    # a long uncached prompt waits for compute, a short one at batch 1 mostly for the fixed overheads
    t = call_times(d, P, inp, cached, out)
    assert t.waiting_for["compute"][3] > t.waiting_for["overhead"][3] / 10
    assert t.waiting_for["overhead"][0] > t.waiting_for["compute"][0]


def test_ttft_grows_with_the_prompt_and_no_constant_hides_prefill() -> None:
    d = dep("deepseek-r1", "h200", "fp8", 8)
    new = np.array([1000.0, 8000.0, 32000.0, 128000.0])
    t = call_times(d, P, new, 0 * new, 0 * new + 100)
    pre = prefill_s(d, P, new)
    # TTFT minus the request overhead is the prefill itself at batch 1, and it grows super-linearly (attention)
    assert np.allclose(t.ttft_s - P.t0_s, pre, rtol=1e-9)
    assert pre[3] / pre[2] > 128000 / 32000


@pytest.mark.parametrize("model, prec, isl, concs", [("gpt-oss-120b", "fp4", 1024, (1, 4, 32)),
                                                      ("deepseek-r1", "fp8", 8192, (1, 8, 64))])
def test_replay_equations_match_the_calibrated_point_model(model: str, prec: str, isl: int,
                                                           concs: tuple[int, ...]) -> None:
    # call_times (replay) and predict (calibration) implement the same aggregated-serving equations (a replayed
    # call's expected times: the point model's means, before it reports a benchmark's medians). The workloads
    # differ in one thing: a benchmark's prompts are drawn near one length (its queue nearly deterministic), a
    # replayed agent's vary (exponential service), so the point model is taken at the replay's. DeepSeek R1 (MLA)
    # at 8K prompts: both take the decode attention kernel's figure and query tiles (TP8: 16 heads pay for 64)
    from dataclasses import replace

    from agentprof.catalog.kvcache import kv_bytes
    from agentprof.replay.points import predict_times

    layers = CAT.models[model].get("layers")
    theta = theta_of(P, layers)
    for conc in concs:
        row = {"hardware": "h200", "framework": "vllm", "model": model, "precision": prec, "isl": isl,
               "osl": 1024, "conc": conc, "tp": 8, "ep": 1, "dp_attention": False, "disagg": False}
        f = point_features(pl.DataFrame([row]), CAT)
        f = replace(f, work=replace(f.work, svc_cv2=None))
        mean = predict_times(f, theta[None, :], median=False)
        d = dep(model, "h200", prec, 8, kv_dtype_bytes=kv_bytes("vllm", model, "h200", prec)[0], engine="vllm")
        assert np.nan_to_num(f.dec_attn_eff[0]) == (d.decode_attn_eff or 0.0) and f.work.attn_pad[0] == \
            d.decode_attn_pad()
        # a fresh prompt's attention at the Hopper kernel's sourced forward efficiency, and the frontend's
        # tokenizing of the prompt (scheduling.toml [tokenize]), as the point model takes them
        p = P.with_(attn_eff=CAT.accelerators["h200"].attn_fwd_eff, dec_attn_eff=d.decode_attn_eff or 0.0,
                    t_tok_s=tokenize_s_per_token("vllm", model, "h200")[0],
                    ahead_steps=ahead_steps("vllm", model)[0])
        assert p.t_tok_s > 0 and f.work.front_s[0] == pytest.approx(p.t_tok_s * 0.9 * isl)
        t = call_times(d, p, np.array([0.9 * isl]), np.array([0.0]), np.array([921.6]), batch=conc,
                       mem_util=float(f.mem_util[0]))
        assert float(t.ttft_s[0]) == pytest.approx(float(mean.ttft[0]), rel=1e-9)
        assert float(t.total_s[0]) == pytest.approx(float(mean.e2e[0]), rel=1e-9)
    assert len(theta) == len(PARAMS)
    if model == "deepseek-r1":
        assert d.decode_attn_pad() == 4.0 and p.dec_attn_eff == CAT.accelerators["h200"].mla_decode_eff


def test_point_attention_takes_the_kernels_sourced_efficiency_where_listed() -> None:
    # fresh 8K prompts: a chip whose attention kernel has a published forward efficiency ignores the fitted global
    # value; one without (MI355X) takes it, and a slower attention there means a slower first token
    theta = theta_of(P, 61)
    rows = [{"hardware": hw, "framework": "sglang", "model": "deepseek-r1", "precision": "fp8", "isl": 8192,
             "osl": 1024, "conc": 4, "tp": 8, "ep": 1, "dp_attention": False, "disagg": False}
            for hw in ("h200", "mi355x")]
    f = point_features(pl.DataFrame(rows), CAT)
    assert f.attn_eff[0] == CAT.accelerators["h200"].attn_fwd_eff and np.isnan(f.attn_eff[1])
    fast, _, _ = predict(f, np.tile(theta, (2, 1)), 0.5)
    slow, _, _ = predict(f, np.tile(theta, (2, 1)), 0.05)
    assert fast[0] == pytest.approx(slow[0], rel=1e-12)
    assert slow[1] > fast[1]


def test_jalapeno_overhead_is_per_layer_with_a_fan_out_term() -> None:
    # declared per layer (t_layer_s) and growing with the chips a step's collectives span (fanout_kappa);
    # nothing in systems.toml [jalapeno.params] names a seed claim as its source
    import math

    sys_ = CAT.system("jalapeno")
    pr = sys_.params
    assert "t_fixed_s" not in pr and "t_layer_s" in pr and "fanout_kappa" in pr
    assert all("claim" not in b.source.lower() or "not derived" in b.source.lower() for b in pr.values())
    one = resolve(sys_, CAT.models["gpt-oss-120b"], CAT)
    four = resolve(sys_, CAT.models["gpt-oss-120b"], CAT, gpus=4)
    r1 = resolve(sys_, CAT.models["deepseek-r1"], CAT)
    assert one.dep.gpus == 1 and r1.dep.gpus == 4
    assert one.params.t_fixed_s == pytest.approx(36 * pr["t_layer_s"].value)
    assert four.params.t_fixed_s == pytest.approx(36 * pr["t_layer_s"].value * (1 + pr["fanout_kappa"].value * 2))
    assert r1.params.t_fixed_s == pytest.approx(61 * pr["t_layer_s"].value * (1 + pr["fanout_kappa"].value * math.log2(4)))


def test_long_context_attention_runs_at_its_own_efficiency_not_the_gemms() -> None:
    # attention over a long prefix runs at attn_eff of the BF16 peak whatever the prefill GEMMs' efficiency fitted on
    # 1K-token prompts: a refit that lowers mfu_pf slows the chunk's GEMMs only (it used to scale both)
    from agentprof.replay.costmodel import prefill_chunk_s, prefill_parts

    d = dep("kimi-k2.5", "b200", "fp4", 4, kv_dtype_bytes=1.0)
    gemm = d.prefill_gemm_peak_s_per_token * 8192 / 4
    attn = float(d.prefill_peak_s(8192, 80_000)) - gemm
    assert attn > 5 * gemm  # a chunk at 80K context is attention-bound
    for mfu_pf in (0.15, 0.12):
        p = P.with_(mfu_pf=mfu_pf, attn_eff=0.1)
        assert float(prefill_parts(d, p, 8192, 80_000)["compute"]) == pytest.approx(gemm / mfu_pf + attn / 0.1)
        riding = float(prefill_chunk_s(d, p, 8192, 80_000, 0.0, True)) - float(d.comm_s(8192))
        assert riding == pytest.approx(gemm / mfu_pf + attn / 0.1)


def test_an_mtp_step_verifies_the_recipes_draft_depth() -> None:
    # GB200 Dynamo-TRT DeepSeek R1 with MTP3 (tep8 x 4 workers, S55): a decode step's FLOPs and collectives carry
    # 1 + 3 tokens per sequence, its bytes (weights, each sequence's KV) are read once; an unlisted MTP deployment
    # (the same layout on 8K outputs) counts one token
    from agentprof.replay.costmodel import decode_step_parts

    rows = _slots_rows((16, 16)).with_columns(pl.Series("spec_decoding", ["mtp", "mtp"]),
                                              pl.Series("osl", [1024, 8192]))
    f = point_features(rows, CAT)
    np.testing.assert_array_equal(f.draft, [3.0, 0.0])
    dep = Deployment(CAT.models["deepseek-r1"], CAT.accelerators["gb200"], "fp4", 8, False, float(f.kv_bytes[0]),
                     8)  # EP8 decode workers, as point_features builds them
    b = float(f.work.b_run[0])
    ctx = 0.9 * 1024 + 0.9 * 1024 / 2.0
    assert f.work.cmp_s[0] == pytest.approx(float(dep.decode_peak_s(4.0 * b, ctx)), rel=1e-9)
    assert f.work.comm_s[0] == pytest.approx(float(dep.comm_s(4.0 * b)), rel=1e-9)
    assert f.work.bw_s[0] == pytest.approx(float(dep.decode_bytes_per_gpu(b, ctx)) / dep.accel.hbm_bw, rel=1e-9)
    # the simulation's step (StepParams.draft_tokens) prices the same terms
    one = decode_step_parts(dep, P, b, ctx)
    mtp = decode_step_parts(dep, P.with_(draft_tokens=3.0), b, ctx)
    assert float(mtp["compute"]) == pytest.approx(float(dep.decode_peak_s(4.0 * b, ctx)) / P.mfu, rel=1e-9)
    assert float(mtp["compute"]) == pytest.approx(4.0 * float(one["compute"]), rel=1e-9)
    assert float(mtp["overhead"]) - float(one["overhead"]) == pytest.approx(
        float(dep.comm_s(4.0 * b) - dep.comm_s(b)), rel=1e-9)
    assert float(mtp["bandwidth"]) == float(one["bandwidth"])
    # and the fitted acceptance still divides the step into tokens: more verification work, slower TPOT
    from agentprof.replay.points import predict_times

    theta = np.tile(theta_of(P.with_(accept=2.0), 61), (2, 1))
    t = predict_times(f, theta)
    f1 = point_features(rows, CAT)
    f1.work.cmp_s[0], f1.work.comm_s[0] = float(dep.decode_peak_s(b, ctx)), float(dep.comm_s(b))
    assert t.tpot[0] > predict_times(f1, theta).tpot[0]


def test_fan_out_follows_the_collectives_kind() -> None:
    # tensor parallel: two one-shot all-reduces per layer, a synchronisation that appears with the first peer and
    # grows slowly; data-parallel attention: all-to-alls that wait for the slowest of g ranks, log2 g
    from agentprof.replay.calibration import step_params
    from agentprof.replay.points import TP_FANOUT_GROWTH, fanout, fixed_overhead

    g = np.array([1.0, 2.0, 4.0, 8.0, 32.0])
    tp, dpa = fanout(g), fanout(g, True)
    assert tp[0] == dpa[0] == 0.0
    np.testing.assert_allclose(tp[1:], 1.0 + TP_FANOUT_GROWTH * np.log2(g[1:]))
    np.testing.assert_allclose(dpa, np.log2(g))
    assert tp[1] - tp[0] > 2.0 * (tp[3] - tp[1])  # the first peer costs more than going from 2 to 8 GPUs
    assert dpa[4] > tp[4]
    # the replay's step parameters and the calibration's points use the same overhead
    theta = np.array([20e-6, 1.0, 0.7, 0.33, 0.01, 1.0, 0.003, 1.0, 0.15, 3.0, 1.0])
    for gpus, d in ((1, False), (4, False), (8, True)):
        want = float(fixed_overhead(61, 20e-6, 1.0, gpus, d))
        assert step_params(theta, 61, gpus, dpa=d).t_fixed_s == pytest.approx(want, rel=1e-12)
    assert step_params(theta, 61, 8).t_fixed_s < step_params(theta, 61, 8, dpa=True).t_fixed_s


def test_expert_parallel_step_waits_for_the_busiest_rank() -> None:
    # EP: each rank holds E/ep whole experts; a small batch touches them unevenly and the step waits for the rank
    # that touched the most. Tensor-parallel experts (every GPU a slice of each) have no such wait.
    tp = dep("deepseek-r1", "b200", "fp8", 8, kv_dtype_bytes=1.0)
    ep = dep("deepseek-r1", "b200", "fp8", 8, kv_dtype_bytes=1.0, expert_parallel=8)
    b = np.array([1.0, 4.0, 32.0, 512.0])
    mean = ep.experts / 8 * (1.0 - (1.0 - ep.topk / ep.experts) ** b)
    busiest = ep.busiest_rank_experts(b)
    assert np.all(busiest >= mean) and np.all(busiest <= ep.experts / 8 + 1e-9)
    assert busiest[1] > 1.4 * mean[1]  # B = 4: ~3.8 experts per rank on average, the busiest ~6
    assert busiest[3] == pytest.approx(ep.experts / 8, rel=1e-3)  # a large batch touches every expert
    ctx = 1000.0
    extra = ep.decode_bytes_per_gpu(b, ctx) - tp.decode_bytes_per_gpu(b, ctx)
    np.testing.assert_allclose(extra, ep.moe_layers * ep.expert_bytes * (busiest - mean), rtol=1e-9)
    assert extra[1] > 0 and extra[3] / tp.decode_bytes_per_gpu(b[3], ctx) < 1e-3


def test_decode_all_reduces_move_one_shot_bytes_below_the_engines_threshold() -> None:
    # a one-shot all-reduce reads every peer's whole message, (g - 1)·M per rank, against the ring's 2·(g - 1)/g·M;
    # above the one-shot size the two-shot kernel moves the ring's bytes plus the excess at the threshold, so the
    # volume grows with the message and has no step where the engine switches kernels
    hidden, layers = CAT.models["gpt-oss-120b"].get("hidden"), CAT.models["gpt-oss-120b"].get("layers")
    tokens = np.arange(1.0, 2049.0)
    msg = tokens * hidden * 2.0
    two = dep(gpus=2).comm_bytes_per_gpu(tokens) / (2 * layers)
    assert np.allclose(two, msg)  # 2 GPUs: one-shot and ring move the same
    for g, limit in ((4, 512 * 1024), (8, 256 * 1024)):
        per = dep(gpus=g).comm_bytes_per_gpu(tokens) / (2 * layers)
        small, big = msg < limit, msg > limit
        assert np.allclose(per[small], (g - 1) * msg[small])
        assert np.allclose(per[big], 2 * (g - 1) / g * msg[big] + (g - 1) * (1 - 2 / g) * limit)
        assert np.all(np.diff(per) > 0)
        assert per[small][-1] > 2 * (g - 1) / g * msg[small][-1] * (g / 2 - 0.01)  # g/2 times the ring's bytes
    # TRT-LLM's AUTO table sends 512 tokens of a 2,048-4,095 hidden size one-shot on 4 and 8 GPUs, vLLM's 256 KiB fewer
    trt = dep(gpus=8, engine="trt").comm_bytes_per_gpu(tokens) / (2 * layers)
    assert np.allclose(trt[:512], 7 * msg[:512])
    assert np.allclose(trt[512:], 2 * 7 / 8 * msg[512:] + 7 * 0.75 * 512 * hidden * 2)
    assert np.all(trt >= dep(gpus=8).comm_bytes_per_gpu(tokens) / (2 * layers))
    # AMD's engines run AITER's all-reduce: one-shot below 80 KiB on 8 GPUs (160 KiB on 4)
    amd = dep(acc="mi355x", gpus=8).comm_bytes_per_gpu(tokens) / (2 * layers)
    lim = 80 * 1024 / (hidden * 2)
    assert np.allclose(amd[tokens < lim], 7 * msg[tokens < lim])
    assert np.allclose(amd[tokens > lim], 2 * 7 / 8 * msg[tokens > lim] + 7 * 0.75 * 80 * 1024)
    # beyond 8 GPUs the engines use NCCL: the ring's bytes
    wide = Deployment(CAT.models["gpt-oss-120b"], CAT.accelerators["gb200"], "fp4", 16).comm_bytes_per_gpu(tokens)
    assert np.allclose(wide / (2 * layers), 2 * 15 / 16 * msg)


def test_mla_decode_attention_runs_over_its_kernels_tiles_at_the_published_efficiency() -> None:
    # FlashMLA computes each sequence's heads x tokens in 64-row tiles at 660 TFLOPS on H800 [S-FlashMLA]: a GPU
    # holding 16 of DeepSeek's 128 heads (TP8) pays for 64 rows, one holding all of them (attention-DP) for 128
    tp8, tp4 = dep("deepseek-r1", "h200", "fp8", 8), dep("deepseek-r1", "h200", "fp8", 4)
    dpa = dep("deepseek-r1", "h200", "fp8", 8, dp_attention=True)
    assert (tp8.decode_attn_pad(), tp4.decode_attn_pad(), dpa.decode_attn_pad()) == (4.0, 2.0, 1.0)
    assert tp8.decode_attn_pad(1.0 + 3.0) == 1.0  # 16 heads x 4 verified tokens fill a tile
    assert dep().decode_attn_pad() == 1.0 and dep().decode_attn_eff is None  # GQA: the GEMMs' mfu, as before
    eff = CAT.accelerators["h200"].mla_decode_eff
    assert tp8.decode_attn_eff == eff == pytest.approx(660 / 989, abs=1e-3)
    b, ctx = 16.0, 60_000.0
    att = float(tp8.decode_attn_peak_s(b, ctx))
    plain = float(decode_step_s(tp8, P, b, ctx))
    kernel = float(decode_step_s(tp8, P.with_(dec_attn_eff=eff), b, ctx))
    assert kernel - plain == pytest.approx(att * (4.0 / eff - 1.0 / P.mfu), rel=1e-9)
    assert kernel > plain  # TP8's padded tiles cost more than the GEMMs' rate; attention-DP's cost less
    assert float(decode_step_s(dpa, P.with_(dec_attn_eff=eff), b, ctx)) < float(decode_step_s(dpa, P, b, ctx))


def test_a_data_parallel_attention_rank_runs_its_own_prompts_non_expert_gemms() -> None:
    # DeepSeek R1 FP8 on 8 B200s: the routed experts are spread by expert parallelism whatever the attention; under
    # data-parallel attention the other active weights (attention projections, dense layers, shared experts, less
    # the input embedding's gather and the head a prefill runs once) are a rank's own, but SGLang's shared experts
    # when it runs no all-to-all (TP-split, docs/SOURCES.md [S-sgl-dpa])
    m, acc = CAT.models["deepseek-r1"], CAT.accelerators["b200"]
    tp = Deployment(m, acc, "fp8", 8, False, 1, 8, "trt")
    trt = Deployment(m, acc, "fp8", 8, True, 1, 8, "trt")
    sgl = Deployment(m, acc, "fp8", 8, True, 1, 1, "sglang")
    assert tp.prefill_rank_gemm_peak_s_per_token == 0.0
    per_expert = 3.0 * m.get("hidden") * m.get("expert_ffn")
    routed = (m.get("layers") - m.get("dense_layers")) * m.get("experts_per_token") * per_expert
    other = m.get("params_active") - routed - 2.0 * m.get("vocab") * m.get("hidden")
    peak = acc.peak_flops("fp8")
    assert trt.prefill_rank_gemm_peak_s_per_token == pytest.approx(2.0 * other / peak, rel=1e-12)
    assert trt.prefill_gemm_peak_s_per_token == pytest.approx(2.0 * (routed + other) / peak, rel=1e-12)
    shared = (m.get("layers") - m.get("dense_layers")) * m.get("shared_experts") * per_expert
    assert sgl.prefill_rank_gemm_peak_s_per_token == pytest.approx(2.0 * (other - shared) / peak, rel=1e-12)


def test_a_dp_attention_prefill_alone_costs_its_chunks_rank_parts() -> None:
    # under data-parallel attention a prompt's attention and non-expert GEMMs run on its own rank, chunk by chunk:
    # the whole prefill's compute is the sum of its chunks' (each chunk's attention to the ones before it at the
    # earlier tokens' efficiency, its own at the fresh kernel's), the rank part included
    from agentprof.replay.costmodel import CHUNK_TOKENS, prefill_parts, prefill_rank_s

    d = dep("deepseek-r1", "mi355x", "fp8", 8, dp_attention=True)
    p = dataclasses.replace(P, mfu_pf=0.2, attn_eff=0.1, attn_fresh_eff=0.7)
    total = 3.5 * CHUNK_TOKENS
    starts = np.arange(0.0, total, CHUNK_TOKENS)
    sizes = np.minimum(CHUNK_TOKENS, total - starts)
    peak = d.prefill_peak_s(sizes, starts, p.attn_rel, p.fresh_rel)
    chunks = float(np.sum(peak / p.prefill_mfu + (d.gpus - 1) * prefill_rank_s(d, p, sizes, starts, peak)))
    parts = prefill_parts(d, p, total)
    assert parts["compute"] + parts["bandwidth"] == pytest.approx(chunks, rel=1e-9)
    # the rank part is the chunks', not one piece's (whose attention would all run at the fresh kernel's rate)
    whole = float(d.prefill_peak_s(total, 0.0, p.attn_rel, p.fresh_rel))
    assert chunks != pytest.approx(whole / p.prefill_mfu + (d.gpus - 1) * float(prefill_rank_s(d, p, total)))
