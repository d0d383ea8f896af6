"""The serving equations' disaggregated decode batch: the clients not waiting for their first token (Little's law)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.calibration import prior_theta
from agentprof.replay.equations import QUEUE_SPREAD
from agentprof.replay.points import PARAMS, fixed_overhead, point_attn_eff, point_features, predict_times

CAT = load_catalog()
# GPT-OSS on GB200: one prefill GPU for 8K-token prompts, two decode GPUs: the prefill pool binds near 300 clients
DIS = {"hardware": "gb200", "framework": "dynamo-trt", "model_prefix": "gptoss", "precision": "fp4",
       "spec_decoding": "none", "isl": 8192, "osl": 1024, "disagg": True, "prefill_num_workers": 1,
       "num_prefill_gpu": 1, "prefill_tp": 1, "decode_num_workers": 1, "num_decode_gpu": 2, "decode_tp": 2,
       "decode_ep": 2}
AGG = {"hardware": "gb200", "framework": "sglang", "model_prefix": "gptoss", "precision": "fp4",
       "spec_decoding": "none", "isl": 8192, "osl": 1024, "disagg": False, "tp": 2, "ep": 2}
CONC = (1, 16, 64, 256, 512, 1024, 1536)


def _theta(n: int) -> np.ndarray:
    """The prior's free terms for ``n`` points, speculation off."""
    th = prior_theta()
    th[PARAMS.index("accept")] = 1.0
    return np.tile(th, (n, 1))


def _times(rows: list[dict], median: bool = True):
    f = point_features(pl.DataFrame(rows), CAT)
    return f, predict_times(f, _theta(len(f)), 0.5, median=median)


def _retimed(f, median: bool = True, **work):
    """The same points' times with some of their :class:`Work` fields replaced."""
    return predict_times(replace(f, work=replace(f.work, **work)), _theta(len(f)), 0.5, median=median)


def test_disaggregated_decode_batch_is_the_clients_not_waiting_for_a_first_token() -> None:
    # a closed loop of conc clients: by Little's law a decode worker holds conc / n_decode × decode / E2E of them
    # (the rest wait in the prefill queue, the prefill or the hand-off); the fixed point is solved, not iterated
    # a few times and left (Little's law counts mean times)
    f, t = _times([{**DIS, "conc": c} for c in CONC], median=False)
    assert t.decode_batch is not None
    decode = (f.work.osl - 1.0) * t.tpot
    want = f.work.b_run * (1.0 + f.work.over) * decode / t.e2e
    np.testing.assert_allclose(t.decode_batch, np.clip(want, 1.0, None), rtol=1e-6)
    assert np.all(t.decode_batch <= f.work.b_run)
    # an aggregated point's prefills ride its decode steps: its batch is every running client
    fa, ta = _times([{**AGG, "conc": c} for c in CONC])
    np.testing.assert_array_equal(ta.decode_batch, fa.work.b_run)


def test_past_the_prefill_knee_the_decode_batch_and_tpot_stop_growing() -> None:
    # once the prefill pool binds, requests leave it at n_prefill / W a second whatever the clients: the decode
    # batch (that rate × the decode time) and TPOT stop growing, and every further client queues for prefill,
    # adding W / n_prefill to TTFT (the cycle conc·W / n_prefill); taking every client as decoding instead made
    # TPOT grow with conc (a fit then made the decode step too cheap where the prefill pool binds); mean times
    f, t = _times([{**DIS, "conc": c} for c in CONC], median=False)
    knee = f.conc >= 1024
    # (flat to 0.2 %: the closed loop's wait joins its saturated asymptote smoothly, without a corner)
    assert np.ptp(t.decode_batch[knee]) < 2e-3 * t.decode_batch[knee].max()
    assert np.ptp(t.tpot[knee]) < 2e-3 * t.tpot[knee].max()
    assert t.decode_batch[knee].max() < 0.5 * f.work.b_run[knee].min()
    assert np.all(np.diff(t.tpot[~knee]) > 0)  # below the knee the batch grows with the clients
    th = prior_theta()
    w = f.work.pf_gemm_s / th[PARAMS.index("mfu_pf")] + f.work.pf_attn_s / point_attn_eff(f, 0.5)
    # (each client adds the pool's mean time per prompt over the prefill time's log-normal spread: e^(sd²/2) · W,
    # plus its share of its pass's step overhead and one prompt's collectives)
    tf_pf = fixed_overhead(f.layers, th[0], th[1], f.g_pf, f.dpa_pf, th[PARAMS.index("a2a_ratio")])
    per_pass = f.work.n_chunks * (tf_pf + f.work.comm_pf_s) / (f.work.pf_batch * f.work.pf_ranks)
    mean_w = w * math.exp(QUEUE_SPREAD ** 2 / 2) + per_pass
    np.testing.assert_allclose(np.diff(t.e2e[knee]), np.diff(f.conc[knee] * mean_w[knee] / f.work.n_prefill[knee]),
                               rtol=1e-3)


def test_the_closed_loop_wait_has_no_knife_edge() -> None:
    # one queue visited by n closed-loop clients: no wait for one client, q·d·u/(1-u) at light load, the saturated
    # loop's d·(n-1) - think past the knee; and across the knee a service time 1.3x longer lengthens the wait by
    # at most ~3x, where an open queue's rho/(1-rho)·d (rho = n·d/think, capped at 0.97: the disaggregated pool's
    # form before) turns it into many times that
    from agentprof.replay.equations import closed_wait

    d, think = 0.2, 10.0
    assert closed_wait(np.array([1.0]), d, think, 1.0, spread=0.0)[0] == 0.0
    u = d * 4 / think
    assert closed_wait(np.array([5.0]), d, think, 1.0, spread=0.0)[0] == pytest.approx(d * u / (1 - u), rel=0.05)
    assert closed_wait(np.array([500.0]), d, think, 1.0, spread=0.0)[0] == pytest.approx(d * 499 - think, rel=5e-3)
    n = np.arange(2.0, 200.0)
    wait = closed_wait(n, d, think, 1.0)
    assert np.all(np.diff(wait) > 0)
    ratio = closed_wait(n, 1.3 * d, think, 1.0) / wait
    assert ratio.max() < 3.0
    rho = lambda dd: np.minimum(n * dd / think, 0.97)  # noqa: E731
    old = (rho(1.3 * d) / (1 - rho(1.3 * d)) * 1.3 * d) / (rho(d) / (1 - rho(d)) * d)
    assert old.max() > 4 * ratio.max()


def test_a_benchmarks_median_first_token_waits_the_median_arrivals_wait() -> None:
    # the wait's median, not its mean: none while the queue is busy at most half the time (half the arrivals find
    # it free), (R/rho)·ln 2rho above, and past the knee the saturated loop's wait, which every arrival waits
    from agentprof.replay.equations import closed_wait, median_wait

    d, think = 0.2, 10.0
    n = np.array([1.0, 5.0, 26.0, 51.0, 500.0])
    mean = closed_wait(n, d, think, 1.0, spread=0.0)
    med = median_wait(mean, n, d, think)
    rho = np.minimum(d * (n - 1) / think, 1.0)
    assert med[0] == 0.0 and med[1] == 0.0 and rho[2] == pytest.approx(0.5)  # at most half busy: no wait
    assert med[3] == pytest.approx(mean[3] * math.log(2.0), rel=1e-9)  # rho = 1 at the knee, nothing saturated
    assert med[4] == pytest.approx(d * 499 - think, rel=5e-3) and med[4] < mean[4]  # past it: the loop's wait
    assert np.all(med <= mean + 1e-12)
    # the benchmark points' first token is a median: under load it holds less queue than the mean; alone, equal
    f, t = _times([{**AGG, "conc": c} for c in CONC])
    _, mean_t = _times([{**AGG, "conc": c} for c in CONC], median=False)
    assert t.ttft[0] == pytest.approx(mean_t.ttft[0], rel=1e-12)
    assert np.all(t.ttft <= mean_t.ttft + 1e-12) and t.ttft[-1] < mean_t.ttft[-1]
    np.testing.assert_allclose(t.tpot, mean_t.tpot, rtol=1e-12)


def _batched_queue_wait(rho: float, cap: int, n: int = 60_000, seed: int = 3) -> float:
    """Mean wait beyond its own service of a prompt at one server that, whenever free, takes up to ``cap`` waiting
    prompts (Poisson arrivals, unit service each) into one pass and releases them all at its end."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1.0 / rho, n))
    t, i, wait = 0.0, 0, np.empty(n)
    while i < n:
        t = max(t, arr[i])
        j = min(max(int(np.searchsorted(arr, t, side="right")), i + 1), i + cap)
        t += j - i
        wait[i:j] = t - arr[i:j] - 1.0
        i = j
    return float(wait[n // 10:].mean())


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_a_pass_of_batched_prompts_makes_each_wait_for_the_others(rho: float) -> None:
    # engines take every waiting prompt the budget holds into one pass; each first token leaves at the pass's end.
    # The factor over one-at-a-time (cap 1, the same simulation) matches the queue simulated, capped or not
    from agentprof.replay.equations import batch_factor

    fifo = _batched_queue_wait(rho, 1)
    assert fifo == pytest.approx(rho / (2 * (1 - rho)), rel=0.1)  # M/D/1, a check of the simulation itself
    for cap in (2, 4, 10_000):
        want = _batched_queue_wait(rho, cap) / fifo
        assert float(batch_factor(np.array(rho), cap)) == pytest.approx(want, abs=0.05), cap
    assert float(batch_factor(np.array(rho), 1.0)) == 1.0 and float(batch_factor(np.array(rho), None)) == 1.0
    assert float(batch_factor(np.array(rho), 1e9)) == pytest.approx((1 + 2 * rho) / (1 + rho), rel=1e-9)


def test_a_closed_loop_of_batched_prompts_waits_longer_below_the_knee_and_the_same_past_it() -> None:
    from agentprof.replay.equations import closed_wait

    d, think = 0.2, 10.0
    n = np.array([1.0, 20.0, 40.0, 500.0])
    one = closed_wait(n, d, think, 1.0, spread=0.0)
    many = closed_wait(n, d, think, 1.0, spread=0.0, cap=32.0)
    assert many[0] == 0.0
    assert many[1] / one[1] > 1.2 and many[2] / one[2] > 1.2  # u = 0.38, 0.78
    assert many[3] == pytest.approx(one[3], rel=0.01)  # saturated: the loop's cycle either way
    np.testing.assert_array_equal(closed_wait(n, d, think, 1.0, cap=1.0), closed_wait(n, d, think, 1.0))


def test_the_analytic_median_first_token_agrees_with_the_simulated_benchmarks() -> None:
    # two methods, one metric: at 8K-token prompts the equations' median first token and the serving simulation's
    # (closed-loop clients, the medians of simulated requests) agree on SGLang DeepSeek at 32 and 64 clients
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.fidelity import check
    from agentprof.replay.serving.benchpoint import simulate_check

    rows = [{"hardware": hw, "framework": "sglang", "model_prefix": "dsr1", "model": "deepseek-r1",
             "precision": "fp8", "spec_decoding": "none", "isl": 8192, "osl": 1024, "conc": c, "tp": 8, "ep": 1,
             "dp_attention": False, "disagg": False, "num_gpus": 8}
            for hw in ("h200", "mi300x") for c in (32, 64)]
    df = pl.DataFrame(rows)
    an = check(df, load_fitted(), CAT).table["pred_ttft"].to_numpy()
    sim = simulate_check(df, load_fitted(), CAT).table["pred_ttft"].to_numpy()
    assert np.all(np.abs(sim / an - 1.0) < 0.2), sim / an


def test_a_benchmarks_near_equal_prompts_wait_half_what_exponential_service_would() -> None:
    # Pollaczek-Khinchine: the mean wait scales with (1 + cv²)/2 of the service time; the benchmark's prompts
    # (lengths in [0.8 L, L], cv² 0.004) wait about half of what the exponential form (cv² = 1) gives at light
    # load, and past the knee the saturated loop's wait, which does not depend on it
    from agentprof.replay.points import LENGTH_CV2

    f, t = _times([{**AGG, "conc": c} for c in CONC], median=False)

    def with_cv2(cv2):
        return _retimed(f, median=False, svc_cv2=cv2)

    expo, none = with_cv2(None), with_cv2(np.full(len(f), -1.0))  # (1 + cv²)/2 = 1; 0: no random wait at all
    light = (f.conc > 1) & (f.conc <= 16)
    wait = (t.queue - none.queue)[light]
    assert np.all(wait > 0)
    np.testing.assert_allclose(wait / (expo.queue - none.queue)[light], (1 + LENGTH_CV2) / 2, rtol=0.05)
    assert np.all(t.ttft <= expo.ttft + 1e-12)


def test_a_step_carrying_a_chunk_reads_the_decodes_kv_apart_from_the_weights() -> None:
    # a prompt's chunk rides decode steps (vLLM): the weights are read once for both (the read overlaps the
    # chunk's GEMMs), but the running batch's KV in the decode attention's own kernel, which adds to the chunk's
    # compute; alone (one client), with prefill run as its own pass (SGLang) or in the decode step itself,
    # nothing changes
    rides = {**AGG, "framework": "vllm", "hardware": "b200", "tp": 1, "ep": 1}
    f, t = _times([{**rides, "conc": c} for c in CONC] + [{**AGG, "conc": c} for c in CONC])
    apart = _retimed(f, bw_kv_s=None)
    np.testing.assert_allclose(t.tpot, apart.tpot, rtol=1e-12)
    w, n = f.work, len(CONC)
    kv = np.maximum(w.b_run - 1.0, 0.0) / w.b_run * w.n_chunks * w.bw_kv_s / _theta(len(f))[:, PARAMS.index("mbu")]
    assert kv[0] == 0.0 and np.all(kv[1:n] > 0)
    # an 8K prompt's chunk is compute-bound: its ride grows by exactly the decode's KV reads (and the wait of
    # the clients beyond the KV capacity, a whole cycle of a running one, by as much for each)
    np.testing.assert_allclose((t.ttft - apart.ttft)[1:n], (kv * (1.0 + w.over))[1:n], rtol=1e-9)
    assert t.ttft[0] == apart.ttft[0]
    np.testing.assert_array_equal(t.ttft[n:], apart.ttft[n:])


def test_the_decoders_wait_for_a_riding_chunks_collectives() -> None:
    # another client's prompt rides the running batch's steps chunk by chunk (vLLM, TensorRT-LLM, ATOM): those
    # steps run the chunk's all-reduces over its tokens too, so each decoding sequence waits for them, as the
    # simulation's step does (stepcost: a riding chunk's comm); one client has no rider, one GPU no collective
    rides = {**AGG, "framework": "vllm", "hardware": "b200", "ep": 1}
    f, t = _times([{**rides, "tp": tp, "conc": c} for tp in (1, 4) for c in CONC])
    silent = _retimed(f, comm_pf_s=np.zeros(len(f)))
    w, n = f.work, len(CONC)
    rate = np.maximum(w.b_run - 1.0, 0.0) / w.osl
    grown = t.tpot - silent.tpot
    np.testing.assert_allclose(grown[n + 1:], (rate * w.n_chunks * w.comm_pf_s)[n + 1:], rtol=1e-9)
    assert grown[n] == 0.0 and np.all(grown[n + 1:] > 0)
    np.testing.assert_array_equal(grown[:n], 0.0)  # one GPU: no all-reduce


def test_a_data_parallel_attention_prompt_waits_for_its_own_rank_not_the_pool() -> None:
    # DeepSeek R1 on 8 B200s: with data-parallel attention one 8K prompt's attention and non-expert GEMMs run on
    # its own rank (8x their spread share), its experts over all eight; a lone client's first token pays exactly
    # that (aggregated: its compute-bound prefill rides no one), the same deployment under tensor parallelism
    # nothing; a disaggregated prefill pool keeps the spread work as its demand (all ranks busy), so only the
    # prompt's own latency grows, and past the knee (the queue sets the cycle) the time per token is unchanged
    ds = {**AGG, "model_prefix": "dsr1", "framework": "trt", "hardware": "b200", "precision": "fp8", "tp": 8,
          "ep": 8}
    f, t = _times([{**ds, "dp_attention": dpa, "conc": 1} for dpa in (True, False)])
    spread = _retimed(f, pf_gemm_rank_s=None)
    attention_only = _retimed(f, pf_gemm_rank_s=np.array([1e-30, 0.0]))  # the rank's attention, not its GEMMs
    w = f.work
    mfu_pf = _theta(len(f))[:, PARAMS.index("mfu_pf")]
    assert w.pf_ranks[0] == 8 and w.pf_gemm_rank_s[1] == 0.0 and w.pf_gemm_rank_s[0] > 0.3 * w.pf_gemm_s[0]
    # (TensorRT-LLM's balance schedules the odd prompt beside it: that one's rank part runs on its own rank)
    rank = (7.0 - w.pf_with[0]) * w.pf_gemm_rank_s[0] / mfu_pf[0]
    np.testing.assert_allclose(t.ttft[0] - attention_only.ttft[0], rank, rtol=1e-9)
    assert attention_only.ttft[0] > spread.ttft[0]
    assert t.ttft[1] == spread.ttft[1]
    pool = {**DIS, "model_prefix": "dsr1", "framework": "dynamo-trt", "hardware": "b200", "precision": "fp8",
            "num_prefill_gpu": 8, "prefill_tp": 8, "prefill_ep": 8, "prefill_dp_attention": True,
            "num_decode_gpu": 8, "decode_tp": 8, "decode_ep": 8}
    f, t = _times([{**pool, "conc": c} for c in (1, 4096)])
    spread = _retimed(f, pf_gemm_rank_s=None)
    assert t.ttft[0] > spread.ttft[0] + 0.5 * (t.ttft[0] - spread.ttft[0]) > spread.ttft[0]
    np.testing.assert_allclose(t.tpot[1], spread.tpot[1], rtol=1e-3)
