"""The metrics step (:func:`measure`): the ``serving`` object of a simulated configuration — latency percentiles,
throughput, cache hits by tier, utilization, energy and cost per finished task, and the facts that explain them
(calls in flight, queue, layout, calls beyond the window).

Definitions: TTFT = first token − issue (the request overhead, queue, KV loads and prefill included); TPOT =
(last token − first token)/(output − 1); queue = time waiting for admission. Tasks per hour are the tasks
completed in the simulated window over its length (:func:`window`: the closed loop's full-load stretch, else the
whole run). Energy = mean system power (idle + (busy − idle) × utilization, the catalog's power boundary) /
tasks per hour; cost = system price per hour / tasks per hour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from agentprof.catalog.serving import ServingCatalog
from agentprof.replay.serving.kvdtype import kv_dtype_name
from agentprof.replay.serving.scheduler import EngineResult
from agentprof.replay.serving.sessions import SessionPlan

if TYPE_CHECKING:
    from agentprof.replay.serving.config import ServingConfig
    from agentprof.replay.serving.layout import Variant
    from agentprof.replay.serving.overflow import Sent
    from agentprof.replay.serving.run import Ran

POWER_BOUNDARY = ("all-in draw of the system's accelerators with their share of host CPUs, NICs, switches and "
                  "cooling (SemiAnalysis all-in kW per GPU); facility overhead (PUE) excluded")


def pcts(x: np.ndarray, qs: tuple[int, ...] = (50, 90, 99)) -> dict[str, float | None]:
    x = x[np.isfinite(x)]
    if not x.size:
        return {f"p{q}": None for q in qs}
    v = np.percentile(x, qs)
    return {f"p{q}": float(a) for q, a in zip(qs, v, strict=True)}


def provider_cost(plan: SessionPlan, eng: EngineResult, cat: ServingCatalog) -> dict[str, Any] | None:
    """Mean provider list price per task for the recorded models; cache reads/writes as recorded, else the
    session's own prefix reuse (what an earlier call of the session had) as reads and the rest of each prompt
    as writes, as a provider's prompt cache bills them. It does not depend on the simulated system."""
    calls = eng.req_call
    models = [plan.models[c] for c in calls.tolist()]
    prices = [cat.provider_for(m) for m in models]
    if not any(prices):
        return None
    rec_read = plan.cache_read[calls]
    rec_write = plan.cache_write[calls]
    recorded = bool((rec_read + rec_write).sum() > 0)
    read = rec_read if recorded else plan.reuse_tokens[calls]
    write = rec_write if recorded else np.maximum(eng.inp - read, 0.0)
    fresh = np.maximum(eng.inp - read - write, 0.0)
    usd = np.zeros(calls.size)
    sources: dict[str, str] = {}
    for i, p in enumerate(prices):
        if p is None:
            usd[i] = np.nan
            continue
        usd[i] = (fresh[i] * p.input.value + read[i] * p.cache_read.value + write[i] * p.cache_write.value
                  + eng.out[i] * p.output.value) / 1e6
        sources.setdefault(p.key, p.input.source)
    n_tasks = max(int(np.isfinite(eng.sess_end).sum()), 1)
    priced = np.isfinite(usd)
    return {"usd_per_task": float(np.nansum(usd)) / n_tasks, "priced_calls": int(priced.sum()),
            "unpriced_calls": int((~priced).sum()), "models": sorted(sources),
            "basis": "recorded cache read/write tokens" if recorded else
            "prefix reused from the session's earlier calls billed as cache reads, the rest of each prompt as cache writes (no cache tokens recorded)",
            "sources": sources}


def serving_dict(plan: SessionPlan, eng: EngineResult, concurrency: int, system: str, replicas: int,
                 cat: ServingCatalog, open_loop: bool, gpu_scale: float = 1.0,
                 utilization: float | None = None) -> dict[str, Any]:
    """``gpu_scale``: accelerators the deployment uses / the system's count (disaggregated pools sized apart
    from the system): power and price scale with it. ``utilization``: the busy share when it is not the
    replicas' mean (data-parallel attention ranks step together: an instance is busy while any rank is)."""
    ttft = eng.first_t - eng.issue_t
    multi = eng.out > 1.0
    tpot = np.where(multi, (eng.done_t - eng.first_t) / np.maximum(eng.out - 1.0, 1.0), np.nan)
    task = eng.sess_end - eng.sess_start
    rec = plan.recorded_s[eng.sess_plan]
    failed = eng.sess_failed if eng.sess_failed.size == task.size else np.zeros(task.size, dtype=bool)
    ok = np.isfinite(task) & (task > 0) & ~failed
    speed = rec[ok] / task[ok]
    makespan = eng.makespan_s
    n_inst = int(ok.sum())
    win = window(eng, concurrency, open_loop)
    tph = win["per_hour"]
    util = float(sum(eng.busy_s) / (makespan * replicas)) if makespan > 0 else 0.0
    if utilization is not None:
        util = float(utilization)
    power_util = util
    if win["basis"].startswith("Little") and tph:  # the server as busy as the rate keeps it, not as the ramp left it
        power_util = min(util * makespan * tph / 3600.0 / max(win["tasks"], 1), 1.0)
    inp = float(eng.inp.sum())
    hits = eng.hits.sum(axis=0)
    out_per_task = float(eng.out.sum()) / max(n_inst, 1)
    wait_mean = float(eng.queue_s.mean()) if eng.queue_s.size else 0.0
    d: dict[str, Any] = {
        "concurrency": concurrency, "sessions": n_inst, "calls": int(eng.req_call.size), "replicas": replicas,
        "ttft_s": pcts(ttft), "tpot_s": pcts(tpot), "queue_s": pcts(eng.queue_s),
        "kv_load_s": {**pcts(eng.load_s), "mean": float(eng.load_s.mean()) if eng.load_s.size else 0.0},
        "task_s": pcts(task[ok], (50, 90)),
        "task_speedup_median": float(np.median(speed)) if speed.size else None,
        "tasks_per_hour": tph,
        "tasks_completed": win["tasks"],
        "window": {k: win[k] for k in ("start_s", "end_s", "basis")},
        "output_tokens_per_s": (tph * out_per_task / 3600.0) if tph else None,
        "hit_share": {"hbm": float(hits[0] / inp) if inp else 0.0, "cpu": float(hits[1] / inp) if inp else 0.0,
                      "disk": float(hits[2] / inp) if inp else 0.0,
                      "total": float(hits.sum() / inp) if inp else 0.0},
        "utilization": util,
        "calls_in_flight_mean": eng.mean_in_flight, "calls_in_flight_peak": eng.peak_in_flight,
        "queue_wait_mean_s": wait_mean, "preemptions": eng.preemptions, "makespan_s": makespan,
        "evicted_blocks": eng.evicted_blocks, "cold_calls": cold_calls(eng),
        "full_load": None if open_loop else full_load(eng, concurrency),
    }
    power = cat.power.get(system)
    if power and tph:
        busy, idle = power
        kw = (idle.value + (busy.value - idle.value) * power_util) * gpu_scale
        d["energy_wh_per_task"] = kw * 1000.0 / tph
        d["tasks_per_hour_per_kw"] = tph / kw
        d["power"] = {"mean_kw": kw, "busy_kw": busy.value * gpu_scale, "idle_kw": idle.value * gpu_scale,
                      "busy_source": busy.source,
                      "idle_source": idle.source, "boundary": POWER_BOUNDARY}
    else:
        d["energy_wh_per_task"] = None
    cost: dict[str, Any] = {}
    price = cat.price.get(system)
    if price and tph:
        cost["self_hosted_usd"] = price.value * gpu_scale / tph
        cost["usd_per_hour"] = price.value * gpu_scale
        cost["usd_per_hour_source"] = price.source
    prov = provider_cost(plan, eng, cat)
    if prov:
        cost["provider_usd"] = prov["usd_per_task"]
        cost["provider"] = prov
    d["cost_per_task"] = cost or None
    return d


WINDOW_TASKS_PER_SLOT = 5
"""Tasks per slot the full-load window must hold for its count to stand. Fewer, and the count over-reads: a slot
held by one of the longest sessions all window long leaves the others cycling the short ones (the recorded
lengths vary ~5x; 19 kv-cache-tester sessions at 4 slots count 4.3 tasks/h in the window where every slot busy
gives 3.0), so the rate is Little's law's instead."""


def window(eng: EngineResult, concurrency: int, open_loop: bool, keep: np.ndarray | None = None) -> dict[str, Any]:
    """The simulated window tasks per hour are counted in, and the tasks completed in it (with ``keep``, a mask
    over the run's sessions, only theirs are counted: the window itself is the whole run's).

    Closed loop: from the moment every slot holds a session (the ramp's last start) to the first moment a slot
    finishes with no session left to start (the drain), when that stretch holds :data:`WINDOW_TASKS_PER_SLOT`
    completed tasks per slot. Else the run held every slot busy too briefly to count completions (a few
    sessions per slot, started over a ramp): the rate is Little's law for the
    closed loop the figure names, its slots always holding a session, each for the mean simulated task time
    (completions over the whole run would count the ramp and the drain as capacity left idle). Open-loop
    arrivals: the whole run (0 to the last session's end). Failed sessions (``--overflow reject``) hold their
    slot while they run but are not tasks. ``per_hour`` is the rate."""
    st, en = eng.sess_start, eng.sess_end
    failed = eng.sess_failed if eng.sess_failed.size == en.size else np.zeros(en.size, dtype=bool)
    done = np.sort(en[np.isfinite(en) & ~failed])
    counted = done if keep is None else en[np.isfinite(en) & ~failed & keep]
    ends = np.sort(en[np.isfinite(en)])
    whole = {"start_s": 0.0, "end_s": float(eng.makespan_s), "tasks": int(counted.size),
             "basis": "whole run (ramp and drain included)", "length_s": float(eng.makespan_s)}
    whole["per_hour"] = _rate(whole["tasks"], whole["length_s"])
    if open_loop or not ends.size:
        return whole
    starts = np.sort(st[np.isfinite(st)])
    slots = min(concurrency, starts.size)
    t0 = float(starts[slots - 1])
    t1 = float(ends[ends.size - slots]) if ends.size >= slots else float(eng.makespan_s)
    n = int(((done > t0) & (done <= t1)).sum())
    if t1 > t0 and n >= WINDOW_TASKS_PER_SLOT * slots:
        if keep is not None:
            n = int(((counted > t0) & (counted <= t1)).sum())
        return {"start_s": t0, "end_s": t1, "tasks": n, "length_s": t1 - t0, "per_hour": _rate(n, t1 - t0),
                "basis": "full load (every slot holds a session: after the ramp, before the drain)"}
    held = np.isfinite(st) & np.isfinite(en) & (True if keep is None else keep)
    occupied = float((en[held] - st[held]).sum())  # slot-seconds the sessions held, failed ones included
    little = slots * 3600.0 * whole["tasks"] / occupied if occupied > 0 and whole["tasks"] else None
    return {**whole, "per_hour": little,
            "basis": f"Little's law: {slots} slot(s) always holding a session, each for the mean simulated task "
                     "time (no stretch of the run held every slot busy long enough to count completions)"}


def _rate(tasks: int, seconds: float) -> float | None:
    """Tasks per hour over a window of ``seconds``; None without tasks or time."""
    return tasks * 3600.0 / seconds if tasks and seconds > 0 else None


FULL_LOAD = 0.9
"""A closed loop is at full load while at least this share of its slots hold a session: its sessions finish at
different times (recorded lengths vary ~5x), so all N are active only briefly; 90 % keeps the plateau between
the ramp and the drain."""


def full_load(eng: EngineResult, concurrency: int) -> dict[str, Any] | None:
    """TTFT of the calls issued while at least :data:`FULL_LOAD` of the closed loop's ``concurrency`` slots held a
    session (after the ramp, before the drain): the steady state the run's percentiles mix with its ramp and
    drain. None when no call was issued then."""
    st, en = eng.sess_start, eng.sess_end
    ok = np.isfinite(st)
    if not ok.any():
        return None
    st, en = np.sort(st[ok]), np.sort(np.where(np.isfinite(en[ok]), en[ok], np.inf))
    t = eng.issue_t
    active = np.searchsorted(st, t, side="right") - np.searchsorted(en, t, side="right")
    m = active >= FULL_LOAD * concurrency
    if not m.any():
        return None
    ttft = eng.first_t - eng.issue_t
    return {"min_active": FULL_LOAD * concurrency, "calls": int(m.sum()), "share": float(m.mean()),
            "ttft_s": pcts(ttft[m]),
            "queue_s": pcts(eng.queue_s[m]),
            "hit_share": float(eng.hits[m].sum() / eng.inp[m].sum()) if eng.inp[m].sum() > 0 else 0.0}


def cold_calls(eng: EngineResult) -> dict[str, Any]:
    """Calls that found less than half their prompt cached (session starts, evicted prefixes): their count
    and median prompt, and the TTFT p99 of the other (warm) calls."""
    hit = eng.hits.sum(axis=1)
    cold = hit < 0.5 * eng.inp
    ttft = eng.first_t - eng.issue_t
    return {"count": int(cold.sum()), "median_prompt_tokens": float(np.median(eng.inp[cold])) if cold.any() else 0.0,
            "ttft_p99_warm_s": pcts(ttft[~cold])["p99"], "ttft_p99_cold_s": pcts(ttft[cold])["p99"]}


def measure(recorded: SessionPlan, served: Sent, v: Variant, ran: Ran, cfg: ServingConfig, cat: ServingCatalog,
            size_note: str) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    """The metrics step: the ``serving`` object of one configuration's run (without the deployment, levers and
    why the driver adds) and, per ``recorded`` call, its first instance's replayed duration (issue -> last token,
    plus the summarizing call a compaction sent just before it; NaN where not simulated), that instance's request
    in the engine's result and its summarizing request (-1 where none)."""
    r, pools, eng, ov = v.resolved, v.pools, ran.engine, served.overflow
    plan = ov.plan
    open_loop = cfg.arrival_rate_per_h is not None
    # lockstep ranks: an instance is busy (every rank steps, the idle ones on empty batches) while any rank is
    util = (sum(eng.group_busy_s) / (eng.makespan_s * len(eng.group_busy_s))
            if eng.group_busy_s and eng.makespan_s > 0 else None)
    d = serving_dict(plan, eng, cfg.concurrency, r.system.key, v.replicas, cat, open_loop,
                     v.accelerators / max(r.system.count, 1), utilization=util)
    d["attention"] = {"layout": v.layout.mode, "ranks_per_instance": v.layout.ranks, "reason": v.layout.reason,
                      "instances": v.instances, "accelerators_per_instance": r.dep.gpus,
                      "kv_pool_tokens_per_system": None if pools else v.cost.pool_tokens * v.replicas,
                      "kv_dtype": kv_dtype_name(r), "kv_bytes_per_token": r.dep.kv_token_bytes,
                      "kv_source": r.kv_source, "kv_demand_tokens": served.kv_demand_tokens,
                      "calibration": r.calibration, "calibration_level": r.level,
                      "lockstep_wait_s": eng.lockstep_wait_s}
    if size_note:
        d["attention"]["instance_size"] = size_note
    d["beyond_context"] = dict(served.beyond_context)
    if ov.beyond.any():
        d["beyond_context"]["without"] = _without(eng, plan, ov.beyond, cfg.concurrency, open_loop)
    if pools:
        d["pools"] = {"layout": cfg.disagg, "prefill_workers": pools.n_prefill,
                      "prefill_gpus": pools.prefill.dep.gpus, "decode_workers": pools.n_decode,
                      "decode_gpus": r.dep.gpus, "accelerators": v.accelerators, "kv_link": pools.link,
                      "kv_link_gb_s": pools.link_bw / 1e9,
                      "handoff_s": pcts(eng.handoff_s + pools.t_req_s),
                      "queue_wait_mean_s": {k: w["wait_s"] / max(w["entries"], 1)
                                            for k, w in eng.queue_by_role.items()}}
    notes = list(plan.notes)
    if ran.copies > 1:
        notes.append(f"{plan.n_sessions} recorded session(s) cycled to run {eng.sess_start.size} session(s) in "
                     f"{cfg.concurrency} concurrent slots (copies share no cache blocks)")
    if eng.oversize:
        notes.append(f"{eng.oversize} request(s) needed more KV than the whole pool and ran alone")
    if v.speculative:
        d["speculative"] = v.speculative
    d["budget_tokens"] = v.budget_tokens
    d["budget_source"] = v.budget_source
    d["kv_pool_tokens"] = v.cost.pool_tokens
    d["host_link"] = {"key": r.system.link.key, "gb_s": r.system.link.bw.value / 1e9}
    d["router"] = cfg.router
    d["ramp_s"] = ran.ramp_s
    d["notes"] = notes
    call_s = np.full(recorded.n_calls, np.nan)
    call_req = np.full(recorded.n_calls, -1, dtype=np.int64)
    dur = eng.done_t - eng.issue_t
    for i, (c, t) in enumerate(zip(ov.source[eng.req_call].tolist(), dur.tolist(), strict=True)):
        if c >= 0 and call_req[c] < 0:
            call_req[c] = i
            call_s[c] = t
    pre_req = np.full(recorded.n_calls, -1, dtype=np.int64)
    for c in np.flatnonzero(call_req >= 0).tolist():
        j = int(eng.req_call[call_req[c]])
        if j and ov.source[j - 1] < 0:  # the summarizing call of the same instance: the last one done before it
            cand = np.flatnonzero((eng.req_call == j - 1) & (eng.done_t <= eng.issue_t[call_req[c]]))
            if cand.size:
                pre_req[c] = int(cand[np.argmax(eng.done_t[cand])])
                call_s[c] += float(dur[pre_req[c]])
    return d, call_s, call_req, pre_req


def _without(eng: EngineResult, served: SessionPlan, beyond: np.ndarray, concurrency: int,
             open_loop: bool) -> dict[str, Any]:
    """The headline figures over the sessions that never passed the served window (same run)."""
    sess_of = np.repeat(np.arange(served.n_sessions), np.diff(served.start))
    keep_req = ~beyond[sess_of[eng.req_call]] if eng.req_call.size else np.zeros(0, dtype=bool)
    keep_inst = ~beyond[eng.sess_plan]
    task = (eng.sess_end - eng.sess_start)[keep_inst & ~eng.sess_failed]
    win = window(eng, concurrency, open_loop, keep_inst)
    return {"sessions": int((~beyond).sum()), "ttft_s": pcts((eng.first_t - eng.issue_t)[keep_req]),
            "task_s": pcts(task[np.isfinite(task)], (50, 90)), "tasks_per_hour": win["per_hour"]}
