"""Data-parallel attention in the serving simulation: its KV pool, hits, a cold prompt on one rank, the lockstep,
the ``auto`` choice and what the outputs say (the shipped kv-cache-tester sessions as Kimi K2.5, an MLA model)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from agentprof.catalog import resolve_model
from agentprof.catalog.hardware import load_catalog
from agentprof.errors import AgentprofError
from agentprof.replay.serving import ServingConfig, simulate
from agentprof.replay.serving.dpattention import choose, dp_resolved
from agentprof.replay.serving.sessions import SessionPlan
from agentprof.replay.systems import resolve


def sub_plan(plan: SessionPlan, sessions: list[int], calls: int | None = None) -> SessionPlan:
    """The plan of a few of its sessions (each cut to its first ``calls`` calls): fast simulations."""
    from dataclasses import replace

    starts, per_call, offs, ids = [0], [], [0], []
    tails = []
    for s in sessions:
        a, b = int(plan.start[s]), int(plan.start[s + 1])
        if calls is not None:
            b = min(b, a + calls)
        per_call.extend(range(a, b))
        starts.append(starts[-1] + (b - a))
        tails.append(plan.tail_s[s])
    for c in per_call:
        blk = plan.node_ids[plan.node_offsets[c]:plan.node_offsets[c + 1]]
        ids.append(blk)
        offs.append(offs[-1] + blk.size)
    pc = np.asarray(per_call, dtype=np.int64)
    return replace(
        plan, session_ids=[plan.session_ids[s] for s in sessions], start=np.asarray(starts, dtype=np.int64),
        head_s=plan.head_s[sessions], tail_s=np.asarray(tails), recorded_s=plan.recorded_s[sessions],
        gap_s=plan.gap_s[pc], input_tokens=plan.input_tokens[pc], output_tokens=plan.output_tokens[pc],
        fixed_s=plan.fixed_s[pc], node_offsets=np.asarray(offs, dtype=np.int64),
        node_ids=np.concatenate(ids) if ids else plan.node_ids[:0], span_ids=[plan.span_ids[c] for c in per_call],
        trace_ids=[plan.trace_ids[c] for c in per_call], models=[plan.models[c] for c in per_call],
        cache_read=plan.cache_read[pc], cache_write=plan.cache_write[pc], reuse_tokens=plan.reuse_tokens[pc],
        notes=[], after=None, after_gap_s=None)


@pytest.fixture(scope="module")
def few(plan):
    # twelve of the longer sessions (not the three beyond Kimi's context window, which --overflow compact
    # shortens), their first six calls each, all started at once: together more KV than H200's tensor-parallel
    # pool holds
    mean_prompt = [float(plan.input_tokens[a:b].mean()) for a, b in zip(plan.start[:-1], plan.start[1:], strict=True)]
    order = [int(i) for i in np.argsort(mean_prompt)[::-1]]
    return sub_plan(plan, order[3:15], calls=6)


def cfg(n: int, attention: str = "auto", **kw) -> ServingConfig:
    # the layout logic on the benchmark deployment (HBM only unless a test adds a tier): the agentic one's CPU
    # tier holds the sessions' KV under TP, so auto would never weigh DP here
    kw.setdefault("deployment", "benchmark")
    return ServingConfig(concurrency=n, attention=attention, ramp_s=0.0, **kw)


def test_dp_kv_pool_grows_by_the_ranks_less_the_replicated_weights(few, resolved) -> None:
    r = resolved("h200+x86")
    # 16 sessions at once (four recorded sessions twice): TP's pool overflows, its recomputes make it slow (with the
    # driver-reported 150.75e9 B of H200 HBM it holds 12 well enough that the median stays under ten seconds)
    tp = simulate(few, r, cfg(16, "tp", levers=True)).serving
    dp = simulate(few, r, cfg(16, "dp")).serving
    assert tp["attention"]["layout"] == "tp" and dp["attention"]["layout"] == "dp"
    assert "levers" not in dp  # off unless asked (replay and the report ask)
    check_levers(tp, dp)
    # from the catalog: usable HBM per GPU, the non-expert weights each rank holds whole under DP (all but SGLang's
    # shared experts of a tensor-parallel MoE), the routed experts split over the g GPUs either way; the MLA latent
    # once per TP instance, once per DP rank
    dep, mu = r.dep, r.system.mem_util
    g, hbm = dep.gpus, dep.accel.hbm_bytes * mu
    copied = dep.nonexpert_bytes - dep.dpa_split_bytes  # what each DP rank holds whole
    assert dep.engine == "sglang" and 0 < dep.dpa_split_bytes < 0.5 * dep.nonexpert_bytes
    free_tp = hbm - (dep.nonexpert_bytes + dep.routed_bytes) / g
    free_dp = hbm - copied - (dep.dpa_split_bytes + dep.routed_bytes) / g
    assert tp["attention"]["kv_pool_tokens_per_system"] == pytest.approx(free_tp / dep.kv_token_bytes, rel=1e-9)
    assert dp["attention"]["kv_pool_tokens_per_system"] == pytest.approx(g * free_dp / dep.kv_token_bytes, rel=1e-9)
    ratio = dp["attention"]["kv_pool_tokens_per_system"] / tp["attention"]["kv_pool_tokens_per_system"]
    share = copied * (g - 1) / g / free_tp  # the copied weights' share of the TP pool
    assert ratio == pytest.approx(g * (1.0 - share), rel=1e-9)
    assert 3.0 < ratio < g
    assert dp["replicas"] == g and dp["attention"]["ranks_per_instance"] == g
    # the same calls ran; more of their prompts hit (each rank keeps its own sessions' prefixes)
    assert dp["calls"] == tp["calls"]
    assert dp["hit_share"]["hbm"] > tp["hit_share"]["hbm"] + 0.2
    assert dp["ttft_s"]["p50"] < tp["ttft_s"]["p50"] / 3  # the recomputes TP's small pool forced are gone
    # auto weighs the sessions' KV against both pools: here only DP holds it, so it simulates both layouts and keeps
    # the one whose sessions finish their tasks faster; its two runs are the forced ones above, figure for figure
    auto = simulate(few, r, cfg(16)).serving
    a = auto["attention"]
    assert "only data-parallel attention's pool holds" in a["reason"] and "both layouts were simulated" in a["reason"]
    for k, d in (("tp", tp), ("dp", dp)):
        assert a["compared"][k]["tasks_per_hour"] == pytest.approx(d["tasks_per_hour"], rel=1e-12)
        assert a["compared"][k]["ttft_p50_s"] == pytest.approx(d["ttft_s"]["p50"], rel=1e-12)
        assert a["compared"][k]["hit_share_hbm"] == pytest.approx(d["hit_share"]["hbm"], rel=1e-12)
    best = max(("tp", tp), ("dp", dp), key=lambda kd: kd[1]["tasks_per_hour"])
    assert a["layout"] == best[0] and auto["tasks_per_hour"] == pytest.approx(best[1]["tasks_per_hour"], rel=1e-12)
    # here DP's hits cut the median TTFT but its cold prompts on one rank and the lockstep stretch the tail: the
    # sessions' tasks take longer, so auto keeps TP (the rule weighs the tasks, not the pool sizes or the hits)
    assert dp["hit_share"]["hbm"] > tp["hit_share"]["hbm"] and dp["tasks_per_hour"] < tp["tasks_per_hour"]
    assert a["layout"] == "tp" and "tensor-parallel, whose sessions finish their tasks faster" in a["reason"]


def check_levers(tp: dict, dp: dict) -> None:
    """The slow TP run names its levers, each a simulation of the same sessions: --attention dp is the DP run
    figure for figure, --kv-dtype fp8 doubles the pool in tokens, the CPU tier serves hits; and how many instances
    would hold the sessions' KV."""
    assert tp["ttft_s"]["p50"] >= 10.0  # slow: the median first token takes ten seconds or more
    lv = tp["levers"]
    rows = {row["flag"]: row for row in lv["tried"]}
    assert set(rows) == {"--kv-dtype fp8", "--cache-policy lmcache:cpu=2TB",
                         "--kv-dtype fp8 --cache-policy lmcache:cpu=2TB", "--attention dp"}
    d = rows["--attention dp"]
    assert d["ttft_p50_s"] == pytest.approx(dp["ttft_s"]["p50"], rel=1e-12) and d["layout"] == "dp"
    assert d["tasks_per_hour"] == pytest.approx(dp["tasks_per_hour"], rel=1e-12)
    pool = tp["attention"]["kv_pool_tokens_per_system"]
    f = rows["--kv-dtype fp8"]
    assert f["kv_dtype"] == "fp8" and f["layout"] == "tp"  # TP was forced: the lever keeps it
    assert f["kv_pool_tokens_per_system"] == pytest.approx(2 * pool, rel=1e-12)
    assert f["hit_share_hbm"] > tp["hit_share"]["hbm"]
    assert rows["--cache-policy lmcache:cpu=2TB"]["hit_share_cpu"] > 0
    h = lv["hold_kv"]
    assert h["kv_demand_tokens"] == pytest.approx(tp["attention"]["kv_demand_tokens"])
    assert h["instances"] == math.ceil(h["kv_demand_tokens"] / pool) and h["accelerators"] == 8 * h["instances"]
    assert h["instances_fp8"] == math.ceil(h["kv_demand_tokens"] / (2 * pool))
    # the why sentence carries the same figures
    assert f"Slow: TTFT p50 {tp['ttft_s']['p50']:.1f} s" in tp["why"] and f"--kv-dtype fp8: TTFT p50 {f['ttft_p50_s']:.2f} s" in tp["why"]
    assert f"{h['instances']} instance(s) of 8 ({h['accelerators']} accelerators) at bf16" in tp["why"]


def test_a_cold_long_prompt_waits_longer_on_one_rank(plan, resolved) -> None:
    # one session's first call (cold, ~50K+ tokens): under DP its attention runs on one GPU, under TP on eight
    s = int(np.argmax(plan.input_tokens[plan.start[:-1]]))
    one = sub_plan(plan, [s], calls=1)
    r = resolved("h200+x86")
    tp = simulate(one, r, ServingConfig(concurrency=1, attention="tp"))
    dp = simulate(one, r, ServingConfig(concurrency=1, attention="dp"))
    t_tp = float(tp.engine.first_t[0] - tp.engine.issue_t[0])
    t_dp = float(dp.engine.first_t[0] - dp.engine.issue_t[0])
    assert one.input_tokens[0] > 30_000
    assert t_dp > 2.0 * t_tp
    # and no sibling rank stalled it: it ran alone
    assert dp.serving["attention"]["lockstep_wait_s"] == 0.0


def test_ranks_step_in_lockstep(few, resolved) -> None:
    # a rank decoding next to a sibling's long prefill waits for the sibling's steps: the lockstep adds time
    r = resolved("h200+x86")
    run = simulate(few, r, cfg(12, "dp"))
    a = run.serving["attention"]
    assert a["lockstep_wait_s"] > 0
    # the instance is busy while any rank steps: at least the busiest rank's share, at most all ranks' sum
    busy = np.asarray(run.engine.busy_s)
    horizon = run.engine.makespan_s
    util = run.serving["utilization"]
    assert busy.max() / horizon - 1e-9 <= util <= busy.sum() / horizon + 1e-9


def test_auto_picks_tp_for_one_session_dp_above_for_mla_and_tp_for_gpt_oss(few, resolved) -> None:
    cat = load_catalog()
    r = resolved("h200+x86")
    assert choose(r, "auto", 1).mode == "tp"
    assert choose(r, "auto", 2).mode == "dp"  # without the sessions' KV to weigh: the MLA rule alone
    gpt, _ = resolve_model("gpt-oss-120b")
    rg = resolve(cat.system("h200+x86"), gpt, cat)
    lay = choose(rg, "auto", 50)
    assert lay.mode == "tp" and "MLA" not in lay.reason.split("so")[0] and "tensor-parallel" in lay.reason
    # jalapeno's declared software is not known to run DP attention: tp unless asked
    rj = resolved("jalapeno")
    assert choose(rj, "auto", 50).mode == "tp" and choose(rj, "dp", 50).mode == "dp"
    # concurrency 1 under auto is the single-session layout (the equivalence test relies on it)
    d1 = simulate(few, r, cfg(1)).serving
    assert d1["attention"]["layout"] == "tp" and d1["replicas"] == 1
    # two sessions' KV fits H200's tensor-parallel pool: auto keeps TP (a prompt's attention on all GPUs, no lockstep)
    d2 = simulate(few, r, cfg(2)).serving
    assert d2["attention"]["layout"] == "tp" and "fits under tensor-parallel" in d2["attention"]["reason"]
    d12 = simulate(few, r, cfg(12)).serving
    assert "auto" in d12["attention"]["reason"] and set(d12["attention"]["compared"]) == {"tp", "dp"}
    assert d12["attention"]["calibration_level"] == dp_resolved(r).level
    # an LMCache CPU tier holds the sessions' prefixes under TP too: auto keeps TP
    dcpu = simulate(few, r, cfg(12, cpu_bytes=2e12)).serving
    assert dcpu["attention"]["layout"] == "tp" and "CPU/disk tiers" in dcpu["attention"]["reason"]


def test_dp_resolution_keeps_the_calibration_and_prices_the_all_to_all(resolved) -> None:
    r = resolved("h200+x86")
    d = dp_resolved(r)
    assert d.dep.dp_attention and not r.dep.dp_attention
    assert d.framework == r.framework and d.level == r.level
    assert "data-parallel attention" in d.calibration
    # same fitted terms, the fan-out of the all-to-all (log2 g) instead of the one-shot all-reduce's
    assert d.params.mbu == r.params.mbu and d.params.mfu == r.params.mfu
    assert d.params.t_fixed_s != r.params.t_fixed_s
    assert d.dep.weight_bytes_per_gpu > r.dep.weight_bytes_per_gpu


def test_bad_attention_layout_is_one_clear_error(resolved) -> None:
    with pytest.raises(AgentprofError, match="unknown attention layout"):
        ServingConfig(attention="sp").check()
    with pytest.raises(AgentprofError, match="aggregated"):
        choose(resolved("gb200+grace"), "dp", 4, disagg=True)


def test_json_and_terminal_state_the_layout(capsys) -> None:
    from agentprof.cli import main

    from .conftest import KVCT

    def run(*extra: str) -> str:
        try:
            main(["replay", str(KVCT / "trace_0121.json"), "-s", "b200+x86", "--concurrency", "2", *extra])
        except SystemExit as e:
            assert not e.code
        return capsys.readouterr().out

    s = json.loads(run("--json", "--attention", "dp"))["systems"][0]["serving"]
    assert s["attention"]["layout"] == "dp" and s["attention"]["ranks_per_instance"] == 8
    assert "Attention data-parallel" in s["why"]
    assert math.isfinite(s["attention"]["kv_pool_tokens_per_system"])
    out = run("--attention", "tp")
    assert "Attention tensor-parallel" in " ".join(out.split())


def test_report_sweep_and_terminal_panel_state_the_layout() -> None:
    from rich.console import Console

    from agentprof.importers import load_any
    from agentprof.replay.serving.sweep import sweep
    from agentprof.report.terminal import serving_view

    from .conftest import KVCT

    t = load_any(str(KVCT / "trace_0121.json"))
    dp = sweep(t, ["b200+x86"], (1, 2), base=ServingConfig(attention="dp"))["systems"][0]
    auto = sweep(t, ["b200+x86"], (1, 2))["systems"][0]
    assert dp["attention"] == ["dp", "dp"] and "layout by concurrency: 1 dp, 2 dp" in dp["why"]
    assert auto["attention"] == ["tp", "tp"] and "Attention tensor-parallel" in auto["why"]
    con = Console(record=True, width=200)
    con.print(serving_view({"concurrency": [1, 2], "sessions": 1, "model": "kimi-k2.5", "cache": "HBM",
                            "systems": [dp]}))
    text = con.export_text()
    assert "· DP" in text and "data-parallel attention ranks" in text
