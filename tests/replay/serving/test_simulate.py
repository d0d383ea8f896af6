"""The serving simulation on the 19 shipped kv-cache-tester sessions: it reduces to the single-session replay,
behaves like a queue should, and its cache agrees with the analysis."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
import pytest

from agentprof.analysis.calls import model_calls
from agentprof.analysis.redundancy import redundancy_columns
from agentprof.replay import replay
from agentprof.replay.serving import ServingConfig, build_plan, simulate
from agentprof.replay.serving.overflow import TRIGGER_SHARE
from agentprof.trace.schema import Trace

from .conftest import ROOT


def compacted(plan, window: float) -> set[int]:
    """Plan sessions whose context passes the compaction trigger of ``window`` (--overflow compact changes them;
    the one-session replay prices their calls as recorded)."""
    need = plan.input_tokens + plan.output_tokens
    return {i for i in range(plan.n_sessions)
            if (need[plan.calls_of(i).start:plan.calls_of(i).stop] > TRIGGER_SHARE * window).any()}


@pytest.mark.parametrize("deployment", ["agentic", "benchmark"])
@pytest.mark.parametrize("system", ["h200+x86", "jalapeno"])
def test_concurrency_one_matches_single_session_replay(kvct, plan, resolved, system, deployment) -> None:
    # jalapeno runs Kimi K2.5 on 4 of its 8 chips: two replicas, a small HBM pool (evictions happen: with the
    # agentic deployment's CPU tier they are served from it, in both); h200 under its recipe: 85 % of HBM
    rep = replay(kvct, [system], deployment=deployment)
    per = rep.calls.group_by("session_id").agg(pl.col("replayed_s").sum(), pl.col("recorded_s").sum())
    want = dict(zip(per["session_id"].to_list(),
                    zip(per["replayed_s"].to_list(), per["recorded_s"].to_list(), strict=True), strict=True))
    run = simulate(plan, resolved(system), ServingConfig(concurrency=1, deployment=deployment))
    assert rep.systems[0].deployments[0]["deployment"]["name"] == run.serving["deployment"]["name"] == deployment
    assert rep.systems[0].deployments[0]["deployment"]["cpu_tier_bytes"] == run.serving["deployment"]["cpu_tier_bytes"]
    # prompts beyond the 262K window are compacted in both (--overflow compact): every session's context then
    # fits one replica's HBM, so neither serves a hit from the CPU tier
    assert rep.systems[0].cache["cpu_hit_tokens"] == run.engine.hits[:, 1].sum() == 0
    task = run.engine.sess_end - run.engine.sess_start
    assert task.size == plan.n_sessions == 19
    # the compacted sessions (their summarizing calls priced onto the calls they precede) agree as the others do
    assert 0 < len(compacted(plan, run.serving["beyond_context"]["window_tokens"])) < plan.n_sessions
    side = side_by_side(plan)
    assert side  # the recording ran a few calls side by side (parallel sub-agents)
    shorter = 0
    for i, sid in enumerate(plan.session_ids):
        replayed, recorded = want[sid]
        e2e = plan.recorded_s[i] - recorded + replayed  # sequential sessions: gaps kept, calls re-timed
        if i in side:  # calls side by side as recorded: no longer than the calls one after another
            assert task[i] <= e2e * 1.01, sid
            shorter += bool(task[i] < e2e * 0.99)
        else:
            assert task[i] == pytest.approx(e2e, rel=0.01), sid
    assert shorter


def moved(plan) -> np.ndarray:
    """The calls of ``plan`` that do not wait for the one before them (the chain a plan without ``after`` runs)."""
    chain = replace(plan, after=None, after_gap_s=None).waits_for()[0]
    return np.flatnonzero(plan.waits_for()[0] != chain)


def side_by_side(plan) -> set[int]:
    """Sessions of ``plan`` with a call that does not wait for the one before it."""
    return set(np.unique(np.repeat(np.arange(plan.n_sessions), np.diff(plan.start))[moved(plan)]).tolist())


def test_parallel_sub_agent_calls_are_issued_side_by_side(plan, resolved) -> None:
    """A call the recording started before the previous reply came waits only for the reply it had (or for
    none): the simulation issues it while the other is still in flight, as the agent did."""
    after, gap = plan.waits_for()
    m = moved(plan)
    assert m.size >= 4 and (after[m] < m - 1).all() and (gap >= 0).all()
    assert any("side by side" in n for n in plan.notes)
    run = simulate(plan, resolved("h200+x86"), ServingConfig(concurrency=1))
    # each call after the one before it, as the simulation did before: the same sessions take longer
    chained = simulate(replace(plan, after=None, after_gap_s=None), resolved("h200+x86"),
                       ServingConfig(concurrency=1))
    assert chained.serving["calls_in_flight_peak"] == 1
    assert (chained.engine.sess_end - chained.engine.sess_start).sum() > (run.engine.sess_end - run.engine.sess_start).sum()


@pytest.mark.parametrize("ramp_s", [0.0, 60.0])
def test_ttft_p99_and_queue_do_not_decrease_with_concurrency(plan, resolved, ramp_s) -> None:
    # the sessions start ramp_s apart at every concurrency, so only the concurrency changes between runs (the
    # default ramp, mean session time / concurrency, also moves every session's phase: a different sample path
    # per concurrency, on which the mean wait once dipped 0.0405 -> 0.0390 s from 4 to 8 sessions); one attention
    # layout throughout (auto may switch layouts between concurrencies, and a switch is not a queue's monotone)
    r = resolved("b200+x86")
    ttft, queue, wait = [], [], []
    for n in (1, 2, 4, 8, 16, 32):
        d = simulate(plan, r, ServingConfig(concurrency=n, ramp_s=ramp_s, attention="tp")).serving
        ttft.append(d["ttft_s"]["p99"])
        queue.append(d["queue_s"]["p99"])
        wait.append(d["queue_wait_mean_s"])
    # equal up to rounding where two concurrencies never overlap a call (the same p99 call, summed in another
    # order); the queue's p99 of one sample path may dip a little (with steps padded to captured CUDA-graph
    # batches, a step costs a staircase of the batch: 0.582 -> 0.562 s from 16 to 32 sessions), never by more
    # than 5 %. The first token's p99 is the 10th-slowest of 1,011 calls, where one call's coincidence with
    # another session's long prefill moves it between paths (6.71 -> 6.10 s from 2 to 4 sessions at ramp 0): no
    # concurrency makes it faster than one session alone. A mean wait of a few ms is a few calls' coincidences
    # on one path, a few seconds over 1,011 calls (2.22 -> 1.24 ms from 2 to 4 sessions at ramp 0, 1.27 -> 0.81
    # ms at ramp 60 s); above 5 ms it never dips 5 %
    assert all(b >= ttft[0] * 0.97 for b in ttft[1:]), ttft
    assert all(b >= a * 0.95 for a, b in zip(queue, queue[1:], strict=False)), queue
    assert all(b >= a * 0.95 or a < 5e-3 for a, b in zip(wait, wait[1:], strict=False)), wait
    assert wait[-1] > 5 * wait[1]
    assert queue[-1] > 0 and ttft[-1] > ttft[0]


def test_littles_law_on_the_simulated_queue(plan, resolved) -> None:
    run = simulate(plan, resolved("h200+x86"), ServingConfig(concurrency=16))
    e = run.engine
    horizon = e.makespan_s
    # L (time-averaged queue length, integrated on every queue change) = lambda (entries / time) x W (mean
    # wait per entry, from each request's own admission times)
    L = e.queue_area / horizon
    lam = e.queue_entries / horizon
    W = e.queue_s.sum() / e.queue_entries
    assert e.queue_s.sum() > 50  # the queue is not trivially empty (a minute and more of waits)
    assert pytest.approx(lam * W, rel=1e-6) == L


def test_unbounded_hbm_hit_share_equals_the_analysis_prefix_reuse(kvct, plan, resolved) -> None:
    # the sessions within the stand-in's window (the others are compacted, so their prompts are not the recorded)
    skip = {plan.session_ids[i] for i in compacted(plan, 262_144)}
    sub = Trace(kvct.meta, kvct.spans.filter(~pl.col("session_id").is_in(list(skip))), kvct.diagnostics)
    cb = model_calls(sub)
    reusable = redundancy_columns(cb).get_column("reusable_tokens").fill_null(0).sum()
    want = reusable / cb.calls.get_column("input_tokens").sum()
    run = simulate(build_plan(sub), resolved("h200+x86"),
                   ServingConfig(concurrency=8, hbm_unbounded=True, scope="session"))
    assert run.serving["beyond_context"]["count"] == 0
    assert run.serving["hit_share"]["total"] == pytest.approx(want, abs=1e-4)
    assert run.serving["hit_share"]["cpu"] == 0.0
    assert run.serving["evicted_blocks"]["hbm"] == 0


def test_fifty_real_sessions_get_ttft_in_seconds_and_the_why(plan, resolved) -> None:
    # HBM under tensor-parallel attention cannot hold 50 agents' 100K-token MLA contexts (the latent is copied on
    # every rank); data-parallel attention ranks can, so auto simulates both and keeps the one whose sessions
    # finish faster: DP's pool hits more, but each rank re-expands its prompts' whole MLA prefix alone; an
    # LMCache CPU tier holds the KV, so auto keeps TP without comparing (no prompt's attention on one rank)
    r = resolved("b200+x86")
    hbm_only = simulate(plan, r, ServingConfig(concurrency=50, deployment="benchmark")).serving
    tiered = simulate(plan, r, ServingConfig(concurrency=50, cpu_bytes=2e12, deployment="benchmark")).serving
    att = hbm_only["attention"]
    both = att["compared"]
    assert both["dp"]["kv_pool_tokens_per_system"] > att["kv_demand_tokens"] > both["tp"]["kv_pool_tokens_per_system"]
    assert both["dp"]["hit_share_hbm"] > both["tp"]["hit_share_hbm"]
    other = "dp" if att["layout"] == "tp" else "tp"
    assert both[att["layout"]]["tasks_per_hour"] >= both[other]["tasks_per_hour"]
    assert hbm_only["hit_share"]["hbm"] == pytest.approx(both[att["layout"]]["hit_share_hbm"])
    assert tiered["attention"]["layout"] == "tp" and "compared" not in tiered["attention"]
    assert hbm_only["ttft_s"]["p50"] < 5.0 and hbm_only["hit_share"]["hbm"] > 0.8
    assert tiered["ttft_s"]["p50"] < 5.0
    # (the sessions past the 262K window are compacted: the tier serves the others' evicted prefixes, ~5 % of
    # the prompt tokens)
    assert tiered["hit_share"]["cpu"] > 0.03 and tiered["hit_share"]["total"] > 0.9
    assert tiered["calls_in_flight_mean"] < 10  # agents spend most of their time away from the model
    why = tiered["why"]
    for needle in ("calls in flight", "CPU", "queue p99", "cold call"):
        assert needle in why
    assert tiered["sessions"] == 50 and any("cycled" in n for n in tiered["notes"])
    # the default: B200 as the validated agentic recipe deploys Kimi (S61: FP8 KV, 95 % of HBM, 500 GiB of
    # LMCache CPU tier per 4-GPU worker, so 1,000 GiB on 8 GPUs), stated with its source and what it leaves out
    agentic = simulate(plan, r, ServingConfig(concurrency=50)).serving
    dep = agentic["deployment"]
    assert dep["name"] == "agentic" and dep["level"] == "recipe" and "S61" in dep["source"]
    assert dep["cpu_tier_bytes"] == 1000 * 2**30 and dep["kv_dtype"] == "fp8" and dep["mem_util"] == 0.95
    assert agentic["attention"]["kv_dtype"] == "fp8" and "agentic deployment" in agentic["attention"]["kv_source"]
    assert dep["kv_dtype_from"].startswith("deployment: S61") and dep["mem_util_from"].startswith("deployment: S61")
    assert dep["cpu_tier_from"].startswith("deployment: 500 GiB per worker x 2 worker(s) of 4")
    skipped = " ".join(dep["not_applied"])
    assert "speculative decoding" in skipped and "workers of 4 accelerators" in skipped  # the catalog runs TP8
    # FP8 at 95 % of HBM holds more of the sessions' prefixes in HBM than BF16 at 90 %: fewer CPU loads
    assert agentic["kv_pool_tokens"] > 2 * tiered["kv_pool_tokens"]
    assert agentic["hit_share"]["hbm"] > tiered["hit_share"]["hbm"]
    assert agentic["ttft_s"]["p50"] < 5.0 and "Deployment: agentic, the validated agentic recipe" in agentic["why"]


def test_nvlink_c2c_loads_cpu_hits_faster_than_pcie(plan, resolved) -> None:
    cfg = ServingConfig(concurrency=50, cpu_bytes=2e12, deployment="benchmark")  # BF16 KV: the tier serves hits
    pcie = simulate(plan, resolved("b200+x86"), cfg)
    c2c = simulate(plan, resolved("b200+x86", link="nvlink-c2c-vera"), cfg)
    assert c2c.serving["host_link"]["gb_s"] > 4 * pcie.serving["host_link"]["gb_s"]
    # the same CPU-tier hits cost a fraction of the time to bring into HBM over NVLink-C2C
    for run in (pcie, c2c):
        assert run.serving["hit_share"]["cpu"] > 0.03
    sel = pcie.engine.hits[:, 1] > 0
    per_tok = pcie.engine.load_s[sel].sum() / pcie.engine.hits[sel, 1].sum()
    sel2 = c2c.engine.hits[:, 1] > 0
    per_tok2 = c2c.engine.load_s[sel2].sum() / c2c.engine.hits[sel2, 1].sum()
    assert per_tok2 == pytest.approx(per_tok * 64 / 450, rel=1e-6)
    assert c2c.serving["kv_load_s"]["mean"] < pcie.serving["kv_load_s"]["mean"] / 4


def test_prefix_affinity_router_keeps_sessions_on_their_cache(plan, resolved) -> None:
    r = resolved("jalapeno")  # two replicas of four chips
    rr = simulate(plan, r, ServingConfig(concurrency=8, router="round-robin")).serving
    aff = simulate(plan, r, ServingConfig(concurrency=8, router="prefix-affinity")).serving
    assert rr["replicas"] == aff["replicas"] == 2
    assert aff["hit_share"]["hbm"] > rr["hit_share"]["hbm"] + 0.04


def test_ttl_and_wait_cap(plan, kvct, resolved) -> None:
    from agentprof.replay.serving import build_plan

    r = resolved("b200+x86")
    base = simulate(plan, r, ServingConfig(concurrency=4)).serving
    ttl = simulate(plan, r, ServingConfig(concurrency=4, ttl_s=5.0)).serving
    assert ttl["hit_share"]["total"] < base["hit_share"]["total"] - 0.1  # gaps between calls exceed 5 s
    capped = build_plan(kvct, cap_wait=10.0)
    assert capped.gap_s.sum() < plan.gap_s.sum()
    assert any("capped at 10 s" in n for n in capped.notes)
    short = simulate(capped, r, ServingConfig(concurrency=4)).serving
    assert short["task_s"]["p50"] < base["task_s"]["p50"]


def test_open_arrivals_and_energy_cost(plan, resolved) -> None:
    d = simulate(plan, resolved("h200+x86"), ServingConfig(concurrency=4, arrival_rate_per_h=4.0)).serving
    assert d["sessions"] == 19 and d["tasks_per_hour"] > 0
    p = d["power"]
    assert p["idle_kw"] <= p["mean_kw"] <= p["busy_kw"]
    assert d["energy_wh_per_task"] == pytest.approx(p["mean_kw"] * 1000 / d["tasks_per_hour"])
    cost = d["cost_per_task"]
    assert cost["self_hosted_usd"] == pytest.approx(cost["usd_per_hour"] / d["tasks_per_hour"])
    assert "S2-const" in cost["usd_per_hour_source"]
    prov = cost["provider"]
    assert prov["priced_calls"] == d["calls"] and "claude" in prov["models"][0]
    assert cost["provider_usd"] > 0


@pytest.mark.parametrize("system", ["h200+x86", "jalapeno"])
def test_concurrency_one_with_a_drafter_matches_single_session_replay(kvct, plan, resolved, system) -> None:
    """The drafter is priced once (agentprof.replay.speculative) for the replay and every variant the simulation
    runs: at concurrency 1 each session's time is the one-session replay's with it, and shorter than without."""
    rep = replay(kvct, [system], speculative="eagle3", bands=False)
    per = rep.calls.group_by("session_id").agg(pl.col("replayed_s").sum(), pl.col("recorded_s").sum())
    want = dict(zip(per["session_id"].to_list(),
                    zip(per["replayed_s"].to_list(), per["recorded_s"].to_list(), strict=True), strict=True))
    run = simulate(plan, resolved(system), ServingConfig(concurrency=1, speculative="eagle3"))
    plain = simulate(plan, resolved(system), ServingConfig(concurrency=1))
    assert run.serving["speculative"]["accept"] == rep.systems[0].deployments[0]["speculative"]["accept"]
    task = run.engine.sess_end - run.engine.sess_start
    side = side_by_side(plan)  # their calls overlap as recorded: not the one-after-another sum
    for i, sid in enumerate(plan.session_ids):  # the compacted sessions too (--overflow compact in both)
        if i in side:
            continue
        replayed, recorded = want[sid]
        assert task[i] == pytest.approx(plan.recorded_s[i] - recorded + replayed, rel=0.01), sid
    assert (task < plain.engine.sess_end - plain.engine.sess_start).all()
    assert run.serving["tpot_s"]["p50"] < plain.serving["tpot_s"]["p50"]


STEPS = ("overflow", "deployment", "layout", "run", "metrics", "levers", "why")
"""The serving pipeline's step modules in order (agentprof.replay.serving.simulate is their driver)."""
ENGINE = ("scheduler", "cache", "stepcost", "pools")
"""The engine the run step drives: its calls while it runs (per step, per call) are its inner loop."""


def serving_entries(run: Callable[[], Any]) -> tuple[Counter, Counter, int, int]:
    """Run ``run`` under a profile hook and count, while a serving simulation runs (from the call of the driver's
    ``simulate`` until it returns), the entries into each ``agentprof.replay.serving`` module: a call of a
    function defined in it (its own dataclasses' generated ``__init__`` included) from a frame of another
    agentprof module (stdlib frames between, e.g. ``dataclasses.replace``, are skipped), the engine's calls
    excepted (:data:`ENGINE`: its inner loop). Also returned: the entries by (caller, callee) module, the
    simulated configurations (``Engine.run`` calls) and the greatest depth of ``simulate`` calls."""
    from agentprof.replay.serving.scheduler import Engine

    pfx = "agentprof.replay.serving."
    sim_code, run_code = simulate.__code__, Engine.run.__code__
    entries: Counter = Counter()
    pairs: Counter = Counter()
    state = {"depth": 0, "deepest": 0, "configs": 0}

    def caller(frame: Any) -> str:
        f = frame.f_back
        while f is not None and not f.f_globals.get("__name__", "").startswith("agentprof"):
            f = f.f_back
        return f.f_globals.get("__name__", "") if f is not None else ""

    def hook(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "return" and code is sim_code:
            state["depth"] -= 1
        if event != "call":
            return
        if code is sim_code:
            state["depth"] += 1
            state["deepest"] = max(state["deepest"], state["depth"])
        elif code is run_code:
            state["configs"] += 1
        name = frame.f_globals.get("__name__", "")
        if not state["depth"] or not name.startswith(pfx) or code.co_name == "<module>":
            return
        c = caller(frame)
        if c != name and c.removeprefix(pfx) not in ENGINE:
            entries[name.removeprefix(pfx)] += 1
            pairs[(c.removeprefix(pfx), name.removeprefix(pfx))] += 1

    sys.setprofile(hook)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entries, pairs, state["configs"], state["deepest"]


def test_a_report_enters_each_serving_step_once_per_simulated_configuration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One trace through the report's stages (a slow run, so its levers are simulated too): each step module is
    entered at most once per simulated configuration, only by the driver, and the driver is never re-entered."""
    from agentprof.importers import load_any
    from agentprof.replay.serving import levers
    from agentprof.report.stages import run_stages

    # slow by a threshold well below the run's median first token (10.1 s on Jalapeno as fitted, a hair above the
    # 10 s default), so the levers run whatever a refit moves
    monkeypatch.setattr(levers, "SLOW_TTFT_S", 5.0)

    trace = load_any([str(ROOT / "traces" / "samples" / "claude-code" / "session-3fe1b6bc.jsonl")])
    got: dict[str, Any] = {}
    entries, pairs, configs, deepest = serving_entries(lambda: got.update(out=run_stages(
        trace, systems=["jalapeno"], serving=[1], serving_levers=True, analysis=False, cache=False)))
    row = got["out"].serving["systems"][0]
    assert len(row["levers"]["tried"]) >= 2 and configs == 1 + len(row["levers"]["tried"])
    assert deepest == 1 and entries["simulate"] == 1  # the sweep's one call; levers run inside it
    for step in STEPS:
        assert 1 <= entries[step] <= configs, (step, entries[step], configs)
        assert {c for c, m in pairs if m == step} == {"simulate"}, step


def test_no_step_module_imports_the_driver_or_a_later_step() -> None:
    """Each step takes what the steps before it made: its imports (type-checking ones included) name neither the
    driver nor a step after it, so metrics cannot reach the levers or the driver."""
    import ast

    folder = ROOT / "agentprof" / "replay" / "serving"
    for i, step in enumerate(STEPS):
        names = set()
        for node in ast.walk(ast.parse((folder / f"{step}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.update(f"{node.module}.{a.name}" for a in node.names)
        reached = {n.split(".")[3] for n in names if n.startswith("agentprof.replay.serving.")}
        assert not reached & {"simulate", *STEPS[i + 1:]}, (step, sorted(reached))

