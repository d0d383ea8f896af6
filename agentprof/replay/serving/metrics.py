"""The ``serving`` object of a simulated system: latency percentiles, throughput, cache hits by tier,
utilization, energy and cost per finished task, and the facts that explain them (calls in flight, queue).

Definitions: TTFT = first token − issue (the request overhead, queue, KV loads and prefill included); TPOT =
(last token − first token)/(output − 1); queue = time waiting for admission. Tasks per hour are the tasks
completed in the simulated window over its length (:func:`window`: the closed loop's full-load stretch, else the
whole run). Energy = mean system power (idle + (busy − idle) × utilization, the catalog's power boundary) /
tasks per hour; cost = system price per hour / tasks per hour.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentprof.catalog.serving import ServingCatalog
from agentprof.replay.serving.levers import levers_text
from agentprof.replay.serving.scheduler import EngineResult
from agentprof.replay.serving.sessions import SessionPlan

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
    tph = win["tasks"] * 3600.0 / win["length_s"] if win["tasks"] and win["length_s"] > 0 else None
    util = float(sum(eng.busy_s) / (makespan * replicas)) if makespan > 0 else 0.0
    if utilization is not None:
        util = float(utilization)
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
        kw = (idle.value + (busy.value - idle.value) * util) * gpu_scale
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


MIN_WINDOW_TASKS = 10
"""Tasks the full-load window must hold (at most the concurrency) for its rate to stand: fewer and the whole run is
the window (each slot ran about one session: no stretch with every slot busy and tasks finishing)."""


def window(eng: EngineResult, concurrency: int, open_loop: bool, keep: np.ndarray | None = None) -> dict[str, Any]:
    """The simulated window tasks per hour are counted in, and the tasks completed in it (with ``keep``, a mask
    over the run's sessions, only theirs are counted: the window itself is the whole run's).

    Closed loop: from the moment every slot holds a session (the ramp's last start) to the first moment a slot
    finishes with no session left to start (the drain), when that stretch holds at least
    ``min(concurrency, MIN_WINDOW_TASKS)`` completed tasks; else, and for open-loop arrivals, the whole run
    (0 to the last session's end). Failed sessions (``--overflow reject``) free their slot but are not tasks."""
    st, en = eng.sess_start, eng.sess_end
    failed = eng.sess_failed if eng.sess_failed.size == en.size else np.zeros(en.size, dtype=bool)
    done = np.sort(en[np.isfinite(en) & ~failed])
    counted = done if keep is None else en[np.isfinite(en) & ~failed & keep]
    ends = np.sort(en[np.isfinite(en)])
    whole = {"start_s": 0.0, "end_s": float(eng.makespan_s), "tasks": int(counted.size),
             "basis": "whole run (ramp and drain included)"}
    if open_loop or not ends.size:
        whole["length_s"] = whole["end_s"]
        return whole
    starts = np.sort(st[np.isfinite(st)])
    slots = min(concurrency, starts.size)
    t0 = float(starts[slots - 1])
    t1 = float(ends[ends.size - slots]) if ends.size >= slots else float(eng.makespan_s)
    n = int(((done > t0) & (done <= t1)).sum())
    if t1 > t0 and n >= min(concurrency, MIN_WINDOW_TASKS):
        if keep is not None:
            n = int(((counted > t0) & (counted <= t1)).sum())
        return {"start_s": t0, "end_s": t1, "tasks": n, "length_s": t1 - t0,
                "basis": "full load (every slot holds a session: after the ramp, before the drain)"}
    whole["length_s"] = whole["end_s"]
    return whole


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


def why(d: dict[str, Any]) -> str:
    """One sentence that explains the latency: calls in flight, cache hits by tier, queueing, cold calls."""
    h = d["hit_share"]
    c = d.get("cold_calls") or {}
    q = d["queue_s"]
    ttft = d["ttft_s"]
    return (f"{d['concurrency']} sessions keep {d['calls_in_flight_mean']:.1f} calls in flight on average "
            f"(peak {d['calls_in_flight_peak']}): agents spend most of their time in tools and waits; "
            f"{h['total']:.0%} of prompt tokens hit the cache (HBM {h['hbm']:.0%}, CPU {h['cpu']:.0%}, "
            f"disk {h['disk']:.0%}); queue p99 {q['p99'] or 0:.2f} s; TTFT p50 {ttft['p50'] or 0:.2f} s, "
            f"p99 {ttft['p99'] or 0:.2f} s; server busy {d['utilization']:.0%} of the time; "
            f"{c.get('count', 0)} cold call(s) (under half the prompt cached, median "
            f"{c.get('median_prompt_tokens', 0):,.0f} tokens) have TTFT p99 {c.get('ttft_p99_cold_s') or 0:.2f} s, "
            f"the warm ones {c.get('ttft_p99_warm_s') or 0:.2f} s." + _window_text(d) + _full_text(d) + _layout_text(d)
            + deployment_text(d) + (levers_text(d["levers"]) if d.get("levers") else ""))


def beyond_text(d: dict[str, Any]) -> str:
    """One short line: the calls beyond the served window, the policy, and the headline without their sessions
    (empty when every call fitted)."""
    b = d.get("beyond_context") or {}
    if not b.get("count"):
        return ""
    w = b.get("without") or {}
    p99 = (w.get("ttft_s") or {}).get("p99")
    tph = w.get("tasks_per_hour")
    return (f"{b['count']:,} call(s) in {b['sessions']} session(s) beyond {b['window_tokens']:,} tokens "
            f"(--overflow {b['policy']}); without them: TTFT p99 "
            + (f"{p99:.1f} s" if p99 is not None else "n/a") + (f", {tph:.1f} tasks/h" if tph else ""))


def _window_text(d: dict[str, Any]) -> str:
    """Where tasks per hour come from: the tasks completed in the simulated window (empty when not recorded)."""
    w = d.get("window")
    if not w:
        return ""
    return (f" Tasks per hour: {d.get('tasks_completed', 0)} task(s) completed in {(w['end_s'] - w['start_s']) / 3600:.2f} h"
            f" ({w['basis'].split(' (')[0]}).")


def _full_text(d: dict[str, Any]) -> str:
    """The steady state: TTFT while every slot held a session (empty when every call came then)."""
    f = d.get("full_load")
    if not f or f["share"] >= 0.999:
        return ""
    return (f" While {FULL_LOAD:.0%} or more of the {d['concurrency']} slots held a session ({f['share']:.0%} of the "
            f"calls): TTFT p50 "
            f"{f['ttft_s']['p50'] or 0:.2f} s, queue p50 {f['queue_s']['p50'] or 0:.2f} s, {f['hit_share']:.0%} hits;"
            " the other calls came in the ramp or as sessions finished.")


def deployment_text(d: dict[str, Any]) -> str:
    """The deployment the simulation ran (empty when not recorded): where its CPU tier, KV dtype and HBM share
    come from, and what it did not take."""
    dep = d.get("deployment")
    if not dep:
        return ""
    if dep["name"] == "benchmark":
        return " Deployment: benchmark settings (HBM prefix cache only unless --cache-policy adds tiers)."
    what = "the validated agentic recipe" if dep["level"] == "recipe" else "an estimate from the agentic recipes"
    cpu = dep["cpu_tier_bytes"]
    tier = f"LMCache CPU tier {cpu / 2**30:,.0f} GiB" if cpu else "no CPU tier"
    skip = f"; not taken: {'; '.join(dep['not_applied'])}" if dep.get("not_applied") else ""
    return (f" Deployment: agentic, {what} ({dep['source']}): {tier}, {dep['kv_dtype']} KV, "
            f"{dep['mem_util']:.0%} of HBM{skip}.")


def _layout_text(d: dict[str, Any]) -> str:
    """The attention layout the simulation ran and why (empty when not recorded)."""
    a = d.get("attention")
    if not a:
        return ""
    pool = a.get("kv_pool_tokens_per_system")
    dtype = f" of {a['kv_dtype']}" if a.get("kv_dtype") else ""
    kv = f"; KV pool {pool / 1e6:.2f}M tokens{dtype} per system" if pool else ""
    demand = a.get("kv_demand_tokens")
    kv += f" against the sessions' ~{demand / 1e6:.2f}M" if pool and demand else ""
    g = a.get("accelerators_per_instance")
    size = f"; {a['instances']} instance(s) of {g} accelerators" if g else ""
    name = "data-parallel" if a["layout"] == "dp" else "tensor-parallel"
    inst = f" {a['instance_size']}." if a.get("instance_size") else ""
    return f" Attention {name}{size}{kv} ({a['reason']}).{inst}"

