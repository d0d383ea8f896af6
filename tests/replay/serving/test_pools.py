"""Disaggregated serving in the simulation: prefill and decode pools, the KV hand-off over the layout's link."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.kvcache import tokenize_s_per_token
from agentprof.replay.calibration import prior_theta, step_params
from agentprof.replay.costmodel import Deployment
from agentprof.replay.points import (
    PARAMS,
    point_attn_eff,
    point_features,
    predict,
    predict_times,
)
from agentprof.replay.serving.benchpoint import _pools_of_row, simulate_pools_point
from agentprof.replay.serving.pools import transfer_bytes_per_gpu, transfer_link

CAT = load_catalog()
ROW = {"hardware": "gb200", "framework": "dynamo-trt", "model_prefix": "dsr1", "precision": "fp4",
       "spec_decoding": "none", "isl": 1000, "osl": 1000, "conc": 1, "disagg": True, "prefill_num_workers": 1,
       "num_prefill_gpu": 4, "prefill_tp": 4, "prefill_ep": 4, "decode_num_workers": 1, "num_decode_gpu": 8,
       "decode_tp": 8, "decode_ep": 8}
ETA = 0.5
"""The fitted global attention efficiency the equations take where the chip has no kernel figure; the pools below
run at the point's own (:func:`point_attn_eff`), as the equations do."""


def theta(q: float = 0.0) -> np.ndarray:
    t = prior_theta()
    t[PARAMS.index("q")] = q
    t[PARAMS.index("accept")] = 1.0
    return t


def pools_of(row: dict, cat=CAT, th: np.ndarray | None = None):
    """The row's prefill and decode deployments with the free terms ``th``, as devices check builds them."""
    th = theta() if th is None else th
    f = point_features(pl.DataFrame([row]), cat)
    model = cat.models["deepseek-r1"]
    gp, gd = int(f.g_pf[0]), int(f.g_dec[0])
    # each pool as the simulation builds it: its attention as the point's layout says (a TensorRT-LLM wide-EP
    # prefill worker: data-parallel), the decode worker's experts split over its EP ranks as whole experts
    pre, _, dec, _ = _pools_of_row(row, f.keys[0], cat, float(f.kv_bytes[0]), {})
    eta = float(point_attn_eff(f, ETA)[0])
    tok = tokenize_s_per_token(row["framework"], model.key, row["hardware"])[0]  # the frontend, as the equations
    pp = step_params(th, pre.layers, gp, accept=1.0, dpa=pre.dp_attention).with_(attn_eff=eta, t_tok_s=tok)
    # the first token leaves the decode worker after the recipe's interval and the fitted hand-off (decode steps)
    dp = step_params(th, dec.layers, gd, accept=1.0, dpa=dec.dp_attention).with_(
        attn_eff=eta, t_tok_s=tok, wait_steps=float(f.work.wait_steps[0]) + float(th[PARAMS.index("handoff")]))
    return f, pre, pp, dec, dp


def run(row: dict, conc: int, cat=CAT, per_client: int = 3, spread: float = 0.0, detail: dict | None = None,
        **kw):
    _, pre, pp, dec, dp = pools_of(row, cat)
    # the analytic equations take the mean lengths (0.9 of nominal): the simulation gets them exactly
    return simulate_pools_point(pre, pp, dec, dp, int(row["prefill_num_workers"]), int(row["decode_num_workers"]),
                                conc, 0.9 * row["isl"], 0.9 * row["osl"], 8192, per_client=per_client,
                                spread=spread, detail=detail, **kw)


def test_one_client_matches_the_analytic_disaggregated_prediction() -> None:
    # one client alone: no prefill queue (q = 0 in the equations), no batch; TTFT = t0 + prefill (a step per
    # chunk, t_req) + KV transfer + the scheduler interval at the decode batch, then t_dec per token
    f, *_ = pools_of(ROW)
    want = predict(f, theta()[None, :], ETA)
    got = run(ROW, 1)
    assert got[0] == pytest.approx(float(want[0][0]), rel=1e-3)
    assert got[1] == pytest.approx(float(want[1][0]), rel=5e-3)  # step time interpolated over context
    assert got[2] == pytest.approx(float(want[2][0]), rel=5e-3)


def _with_link(field: str, scale: float, hw: str):
    acc = CAT.accelerators[hw]
    b = acc.fields[field]
    fields = {**acc.fields, field: dataclasses.replace(b, value=b.value * scale)}
    return dataclasses.replace(CAT, accelerators={**CAT.accelerators, hw: dataclasses.replace(acc, fields=fields)})


@pytest.mark.parametrize(("hw", "row", "link"), [
    ("gb200", ROW, "scale-up"),  # 4 + 8 GPUs inside the NVL72 domain: NVLink
    ("mi355x", {**ROW, "hardware": "mi355x", "framework": "sglang-disagg", "precision": "fp8",
                "num_prefill_gpu": 8, "prefill_tp": 8, "prefill_ep": 8}, "scale-out"),  # two 8-GPU nodes: NIC
])
def test_ttft_includes_the_kv_transfer_over_the_catalog_link(hw: str, row: dict, link: str) -> None:
    _, pre, _, dec, _ = pools_of(row)
    name, bw = transfer_link(pre, dec)
    assert name == link
    field = "scaleup_bw" if link == "scale-up" else "scaleout_bw"
    slow = _with_link(field, 0.25, hw)
    _, pre_s, _, dec_s, _ = pools_of(row, slow)
    assert transfer_link(pre_s, dec_s)[1] == pytest.approx(bw * 0.25)
    d0: dict = {}
    d1: dict = {}
    base = run(row, 1, detail=d0)
    slower = run(row, 1, slow, detail=d1)
    xfer = transfer_bytes_per_gpu(dec, 0.9 * row["isl"]) / bw
    assert xfer > 0
    # a quarter of the bandwidth: the transfer takes four times as long and TTFT grows by it; over the NIC
    # nothing else moves, over NVLink the instances' collectives slow down too
    if link == "scale-out":
        assert slower[0] - base[0] == pytest.approx(3.0 * xfer, rel=1e-6)
    else:
        assert slower[0] - base[0] > 3.0 * xfer
    assert np.allclose(d0["engine"].handoff_s, xfer) and np.allclose(d1["engine"].handoff_s, 4.0 * xfer)
    if link == "scale-out":
        assert slower[1] == pytest.approx(base[1], rel=1e-9)  # decode does not care


GPT = {**ROW, "model_prefix": "gptoss", "num_prefill_gpu": 1, "prefill_tp": 1, "prefill_ep": 1,
       "num_decode_gpu": 2, "decode_tp": 2, "decode_ep": 2}


def _gpt_pools(conc: int, isl: float = 1024, osl: float = 1024, detail: dict | None = None, **kw):
    f = point_features(pl.DataFrame([GPT]), CAT)
    acc, model = CAT.accelerators["gb200"], CAT.models["gpt-oss-120b"]
    pre = Deployment(model, acc, "fp4", 1, False, float(f.kv_bytes[0]))
    dec = Deployment(model, acc, "fp4", 2, False, float(f.kv_bytes[0]))
    th = theta()
    eta = float(point_attn_eff(f, ETA)[0])
    tok = tokenize_s_per_token(GPT["framework"], model.key, "gb200")[0]
    pp = step_params(th, pre.layers, 1, accept=1.0).with_(attn_eff=eta, t_tok_s=tok)
    dp = step_params(th, dec.layers, 2, accept=1.0).with_(
        attn_eff=eta, t_tok_s=tok, wait_steps=float(f.work.wait_steps[0]) + float(th[PARAMS.index("handoff")]))
    det: dict = {} if detail is None else detail
    out = simulate_pools_point(pre, pp, dec, dp, 1, 1, conc, isl, osl, 8192, per_client=4, detail=det, **kw)
    return out, det


def test_queue_and_ttft_p99_do_not_decrease_with_concurrency() -> None:
    p99, wait, tpot = [], [], []
    for conc in (1, 16, 64, 256):
        (_, tp, _), det = _gpt_pools(conc)
        eng = det["engine"]
        p99.append(float(np.percentile(eng.first_t - eng.issue_t, 99)))
        q = eng.queue_by_role["prefill"]
        wait.append(q["wait_s"] / max(q["entries"], 1))
        tpot.append(tp)
    assert all(b >= a for a, b in zip(p99, p99[1:], strict=False)), p99
    assert all(b >= a - 1e-12 for a, b in zip(wait, wait[1:], strict=False)), wait
    assert wait[-1] > 0 and p99[-1] > p99[0]
    assert tpot[-1] > tpot[0]  # the decode pool's batch grows


def test_littles_law_on_the_prefill_queue() -> None:
    (_, _, _), det = _gpt_pools(256)
    eng = det["engine"]
    q = eng.queue_by_role["prefill"]
    n = eng.req_call.size
    assert q["entries"] == n  # every request queued once at a prefill worker (none preempted)
    makespan = float(np.nanmax(eng.done_t))
    length = q["area"] / makespan  # time-averaged prefill queue length
    rate = q["entries"] / makespan
    assert q["wait_s"] > 0
    assert length == pytest.approx(rate * q["wait_s"] / q["entries"], rel=1e-6)
    assert eng.queue_by_role["decode"]["entries"] == n


def test_slices_stand_for_the_whole_closed_loop() -> None:
    # 256 clients simulated one by one against 2 slices of 128 (each simulated request stands for two): the
    # medians agree (the slices are exact for synchronized pairs; the benchmark's clients are not)
    whole, _ = _gpt_pools(256, most=256)
    sliced, det = _gpt_pools(256, most=128)
    assert det["copies"] == 2.0 and det["clients"] == 128
    for a, b in zip(whole, sliced, strict=True):
        assert b == pytest.approx(a, rel=0.1)


def test_agent_sessions_run_on_pools(plan, resolved) -> None:
    # the shipped Claude Code sessions (as Kimi K2.5) on GB200 pools: one 4-GPU prefill worker holding the
    # prefix cache, one 4-GPU decode worker, the KV handed over NVLink
    from agentprof.replay.serving import ServingConfig, simulate

    r = resolved("gb200+grace")
    run = simulate(plan, r, ServingConfig(concurrency=4, disagg="p1x4-d1x4"))
    d = run.serving
    pools = d["pools"]
    assert (pools["prefill_workers"], pools["prefill_gpus"], pools["decode_gpus"]) == (1, 4, 4)
    assert pools["kv_link"] == "scale-up" and pools["accelerators"] == 8
    eng = run.engine
    assert eng.roles == ["prefill", "decode"]
    ttft = eng.first_t - eng.issue_t
    # every first token waits for the request overhead, the prefill and the hand-off
    assert (ttft >= r.params.t0_s + eng.handoff_s - 1e-9).all() and (eng.handoff_s > 0).all()
    assert d["hit_share"]["hbm"] > 0.5  # sessions find their own prefixes on the prefill worker
    q = eng.queue_by_role["prefill"]
    assert q["entries"] == eng.req_call.size + eng.preemptions  # every call queued once at the prefill pool
    assert q["area"] == pytest.approx(q["wait_s"], rel=1e-6, abs=1e-9)  # Little's law: area = sum of waits
    agg = simulate(plan, r, ServingConfig(concurrency=4)).serving
    assert d["calls"] == agg["calls"] and d["sessions"] == agg["sessions"]


@pytest.mark.parametrize("bad", ["p0x4-d1x4", "p1x4", "prefill=4"])
def test_bad_pools_layout_is_one_clear_error(bad: str) -> None:
    from agentprof.errors import AgentprofError
    from agentprof.replay.serving import ServingConfig

    with pytest.raises(AgentprofError, match="cannot read pools"):
        ServingConfig(disagg=bad).check()


def test_replay_cli_pools_flag(capsys) -> None:
    import json

    from agentprof.cli import main

    from .conftest import KVCT

    try:
        main(["replay", str(KVCT), "-s", "gb200+grace", "--concurrency", "2", "--pools", "p1x4-d1x4", "--json"])
    except SystemExit as e:
        assert not e.code
    s = json.loads(capsys.readouterr().out)["systems"][0]["serving"]
    assert s["pools"]["layout"] == "p1x4-d1x4" and s["replicas"] == 2
    assert s["pools"]["handoff_s"]["p50"] > 0 and s["ttft_s"]["p50"] > s["pools"]["handoff_s"]["p50"]


def test_devices_check_simulates_disaggregated_points(points, tmp_path, capsys) -> None:
    from ..conftest import devices_check_json

    sub = points.filter(pl.col("disagg").fill_null(False) & pl.col("conc").is_in([64, 128])).head(4)
    d = devices_check_json(sub, tmp_path, capsys, "--simulate")
    assert d["simulated_only"]["points"] == 4 and d["disaggregated"]["points"] == 4
    assert d["conc_ge_64_disaggregated"]["points"] == 4
    assert "4 disaggregated on their prefill and decode pools" in " ".join(d["notes"])
    assert d["e2e"]["median_ape"] < 0.3


def test_batched_prompts_price_as_their_own_prefills_sharing_the_weights() -> None:
    # one prompt priced by the batch path is costmodel.prefill_chunk_s; nine batched prompts cost their summed
    # FLOPs (not one 8K-token prompt's causal attention) and read the weights once
    from agentprof.replay.costmodel import StepParams, prefill_chunk_s
    from agentprof.replay.serving.stepcost import StepCost

    dep = Deployment(CAT.models["deepseek-r1"], CAT.accelerators["gb200"], "fp4", 4, True, 1.0)
    p = StepParams(t_fixed_s=4e-3, mbu=0.75, mfu=0.33, t_req_s=0.0, mfu_pf=0.14, attn_eff=0.3)
    c = StepCost(dep, p, 0.95, 64e9, 25e9)
    one = c._batch_s([(900.0, 0.0, 1.0)], riding=False)
    assert one == pytest.approx(float(prefill_chunk_s(dep, p, 900.0, 0.0, 1.0, False)), rel=1e-9)
    nine = c.chunks_s([(900.0, 0.0, 1.0)] * 9)
    long = float(prefill_chunk_s(dep, p, 8100.0, 0.0, 9.0, False))
    assert one < nine < 9 * one and nine < long


def test_past_the_prefill_knee_the_simulation_decodes_the_equations_batch() -> None:
    # 8K-token prompts on one prefill GPU for 1,024 clients: the prefill pool binds and most clients queue for it.
    # The equations take the decode batch as the clients not waiting for a first token (Little's law), the batch
    # the simulation keeps decoding: TPOT, TTFT and E2E agree. Every client taken as decoding (the batch held at
    # conc / n_decode) prices the step at twice the simulation's
    f = point_features(pl.DataFrame([{**GPT, "isl": 8192, "osl": 1024, "conc": 1024}]), CAT)
    th = theta()[None, :]
    want = predict_times(f, th, ETA)
    held = dataclasses.replace(f, work=dataclasses.replace(f.work, bw_seq_s=None, cmp_seq_s=None, comm_seq_s=None))
    det: dict = {}
    ttft, tpot, e2e = _gpt_pools(1024, isl=0.9 * 8192, osl=0.9 * 1024, spread=0.0, detail=det)[0]
    assert np.median(det["engine"].first_t - det["engine"].issue_t) > 0.5 * ttft > 5.0  # a prefill queue
    assert tpot == pytest.approx(float(want.tpot[0]), rel=0.08)
    assert e2e == pytest.approx(float(want.e2e[0]), rel=0.08)
    assert ttft == pytest.approx(float(want.ttft[0]), rel=0.15)
    assert float(want.decode_batch[0]) < 0.5 * 1024
    assert float(predict_times(held, th, ETA).tpot[0]) > 1.5 * tpot


def test_decode_workers_run_at_most_their_slots_and_the_rest_wait_for_their_first_token() -> None:
    # 64 clients on one decode worker of 16 slots: the running batch never exceeds them, the others queue at
    # the decode worker (not in its KV pool), so TTFT grows and TPOT falls against the KV-bound run
    (ttft0, tpot0, e2e0), free = _gpt_pools(64)
    (ttft1, tpot1, _), capped = _gpt_pools(64, decode_slots=16)
    dec = capped["engine"].roles.index("decode")
    assert capped["pools"].max_running == 16
    assert capped["engine"].peak_running[dec] == 16
    assert free["engine"].peak_running[dec] > 16  # the KV pool alone would have run more
    q = capped["engine"].queue_by_role["decode"]
    assert q["wait_s"] / q["entries"] > 10 * free["engine"].queue_by_role["decode"]["wait_s"] / q["entries"]
    assert ttft1 > 2.0 * ttft0 and tpot1 < tpot0
    # slots at or above the clients change nothing
    same, det = _gpt_pools(64, decode_slots=64)
    assert same == pytest.approx((ttft0, tpot0, e2e0), rel=1e-9)
    assert det["engine"].peak_running[dec] <= 64


def test_slots_are_shared_over_decode_workers_and_copies() -> None:
    from agentprof.replay.serving.pools import Pools
    from agentprof.replay.serving.stepcost import StepCost

    _, pre, pp, dec, dp = pools_of(ROW)
    pools = Pools.of(StepCost(pre, pp, 0.9, 64e9, 25e9), StepCost(dec, dp, 0.9, 64e9, 25e9, copies=2.0), 1, 4,
                     decode_slots=128)
    assert pools.max_running == 16.0  # 128 slots over 4 workers, each simulated request standing for two
    assert Pools.of(StepCost(pre, pp, 0.9, 64e9, 25e9), StepCost(dec, dp, 0.9, 64e9, 25e9), 1, 4).max_running \
        == float("inf")


def test_devices_check_runs_listed_rows_within_the_recipes_decode_slots_and_draft_depth(points, monkeypatch) -> None:
    # GB200 Dynamo-TRT DeepSeek MTP, 4 decode workers x 32 slots, 144 clients: devices check --simulate hands
    # the row's catalog slots to the pools; no decode worker ever runs more than 32, and the 16 clients beyond
    # the slots wait at the decode workers
    from agentprof.catalog.decodeslots import decode_slots
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.serving import benchpoint

    row = points.filter(pl.col("disagg").fill_null(False) & (pl.col("conc") == 144)
                        & (pl.col("spec_decoding") == "mtp")).head(1)
    assert row.height == 1
    seen: list[dict] = []
    real = benchpoint.simulate_pools_point

    def spy(*a, **kw):
        det: dict = {}
        out = real(*a, **kw, detail=det)
        seen.append({"slots": kw.get("decode_slots"), "draft": a[3].draft_tokens, **det})
        return out

    monkeypatch.setattr(benchpoint, "simulate_pools_point", spy)
    benchpoint.simulate_check(row, load_fitted())
    assert len(seen) == 1
    want, _ = decode_slots("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 1024)
    assert seen[0]["slots"] == want == 128
    assert seen[0]["draft"] == 3.0  # its decode steps verify the recipe's MTP3 drafts (draft_depth.toml)
    eng = seen[0]["engine"]
    peaks = [p for p, role in zip(eng.peak_running, eng.roles, strict=True) if role == "decode"]
    assert len(peaks) == 4 and max(peaks) <= 32 and sum(peaks) == 128
    assert eng.queue_by_role["decode"]["wait_s"] > 0


def test_a_prefill_pass_takes_no_further_prompt_past_its_batch_budget() -> None:
    # 16 clients start at once with 1,638-2,048-token prompts: with the whole 8,192-token budget a pass takes
    # several of them, which wait for it together; with a 2,048-token batch budget a further prompt never fits
    # beside the first: one prompt a pass, each its own wait
    largest = []
    for batch in (None, 2048.0):
        (_, _, _), det = _gpt_pools(16, isl=2048, batch=batch)
        eng = det["engine"]
        wave = eng.queue_s[eng.issue_t == 0.0]  # a prompt's wait for its pass
        assert wave.size == 16
        # a pass's prompts arrive a few tokenizations apart: waits within 2 ms of the previous are one pass's
        passes = np.split(np.sort(wave), np.flatnonzero(np.diff(np.sort(wave)) > 2e-3) + 1)
        largest.append(max(p.size for p in passes))
    assert largest[0] >= 4 and largest[1] == 1, largest


def test_a_prefill_worker_holds_no_more_prompts_than_its_recipe_lets_it_run() -> None:
    # 16 clients start at once with 1K prompts: the whole 8,192-token budget takes several into one pass; a
    # prefill server whose recipe runs 2 requests at once (--max-running-requests) never takes a third, so its
    # prompts wait longer
    largest, waits = [], []
    for requests in (float("inf"), 2.0):
        (_, _, _), det = _gpt_pools(16, requests=requests)
        eng = det["engine"]
        wave = np.sort(eng.queue_s[eng.issue_t == 0.0])  # a prompt's wait for its pass
        # a pass's prompts arrive a few tokenizations apart: waits within 2 ms of the previous are one pass's
        largest.append(max(p.size for p in np.split(wave, np.flatnonzero(np.diff(wave) > 2e-3) + 1)))
        waits.append(float(wave.mean()))
    assert largest[0] > 2 and largest[1] == 2, largest
    assert waits[1] > waits[0], waits
