"""The why step: the sentences that explain a ``serving`` object — calls in flight, cache hits by tier, queueing,
cold calls, the window tasks are counted in, the layout and deployment that ran, and the levers of a slow run —
and the short line on calls beyond the served window. ``why`` is one paragraph (JSON, the report's folded
panel); ``why_lines`` the same content as short lines for an 80-column terminal."""

from __future__ import annotations

from typing import Any

from agentprof.replay.serving.levers import SLOW_TTFT_S
from agentprof.replay.serving.metrics import FULL_LOAD


def _load(d: dict[str, Any]) -> tuple[str, str, str]:
    """The first sentence in its three parts: calls in flight, cache hits and busy time, latency and cold calls."""
    h = d["hit_share"]
    c = d.get("cold_calls") or {}
    q = d["queue_s"]
    ttft = d["ttft_s"]
    return (f"{d['concurrency']} sessions keep {d['calls_in_flight_mean']:.1f} calls in flight on average "
            f"(peak {d['calls_in_flight_peak']}): agents spend most of their time in tools and waits",
            f"{h['total']:.0%} of prompt tokens hit the cache (HBM {h['hbm']:.0%}, CPU {h['cpu']:.0%}, "
            f"disk {h['disk']:.0%})",
            f"queue p99 {q['p99'] or 0:.2f} s; TTFT p50 {ttft['p50'] or 0:.2f} s, p99 {ttft['p99'] or 0:.2f} s; "
            f"server busy {d['utilization']:.0%} of the time; {c.get('count', 0)} cold call(s) (under half the prompt "
            f"cached, median {c.get('median_prompt_tokens', 0):,.0f} tokens) have TTFT p99 "
            f"{c.get('ttft_p99_cold_s') or 0:.2f} s, the warm ones {c.get('ttft_p99_warm_s') or 0:.2f} s")


def why(d: dict[str, Any]) -> str:
    """One paragraph that explains the latency: calls in flight, cache hits by tier, queueing, cold calls, the
    window, the layout, the deployment and the levers (:func:`why_lines` splits it for a terminal)."""
    inflight, hits, latency = _load(d)
    return (f"{inflight}; {hits}; {latency}." + _window_text(d) + _full_text(d) + _layout_text(d)
            + deployment_text(d) + (levers_text(d["levers"]) if d.get("levers") else ""))


def why_lines(d: dict[str, Any]) -> list[str]:
    """:func:`why` as short lines, each a sentence or two under 60 words: load, latency, window, layout and its
    reason, deployment and each thing it did not take, and each lever of a slow run."""
    inflight, hits, latency = _load(d)
    lines = [f"{inflight}.", f"{hits[0].upper()}{hits[1:]}.", f"{latency[0].upper()}{latency[1:]}."]
    lines += [t.strip() for t in (_window_text(d), _full_text(d)) if t]
    a = d.get("attention")
    if a:
        main, inst = _layout_parts(a)
        lines.append(f"{main}.")
        if a.get("reason"):
            lines.append(f"Layout: {a['reason']}.")
        if inst:
            lines.append(inst.strip())
    dep = d.get("deployment")
    if dep:
        main, skipped = _deployment_parts(dep)
        lines += [f"{main}.", *(f"Not taken: {x}." for x in skipped)]
    lv = d.get("levers")
    if lv:
        head, parts = _levers(lv)
        lines.append(f"{head} What would change it:")
        lines += [f"· {p}." for p in parts]
    return lines


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
    if w["basis"].startswith("Little"):
        task = (d.get("task_s") or {}).get("p50")
        return (f" Tasks per hour: {d.get('concurrency')} sessions always in flight, each the simulated task time"
                + (f" (p50 {task / 60:.1f} min)" if task else "") + "; too few sessions ran at full load to count.")
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
    main, skipped = _deployment_parts(dep)
    return f" {main}" + (f"; not taken: {'; '.join(skipped)}" if skipped else "") + "."


def _deployment_parts(dep: dict[str, Any]) -> tuple[str, list[str]]:
    """The deployment sentence without its full stop, and what it did not take (nothing said for benchmark)."""
    if dep["name"] == "benchmark":
        return "Deployment: benchmark settings (HBM prefix cache only unless --cache-policy adds tiers)", []
    what = "the validated agentic recipe" if dep["level"] == "recipe" else "an estimate from the agentic recipes"
    cpu = dep["cpu_tier_bytes"]
    tier = f"LMCache CPU tier {cpu / 2**30:,.0f} GiB" if cpu else "no CPU tier"
    return (f"Deployment: agentic, {what} ({dep['source']}): {tier}, {dep['kv_dtype']} KV, "
            f"{dep['mem_util']:.0%} of HBM", list(dep.get("not_applied") or []))


def _layout_text(d: dict[str, Any]) -> str:
    """The attention layout the simulation ran and why (empty when not recorded)."""
    a = d.get("attention")
    if not a:
        return ""
    main, inst = _layout_parts(a)
    return f" {main} ({a['reason']}).{inst}"


def _layout_parts(a: dict[str, Any]) -> tuple[str, str]:
    """The layout, its instances and KV pool against the sessions' demand; the instance-size sentence (or "")."""
    pool = a.get("kv_pool_tokens_per_system")
    dtype = f" of {a['kv_dtype']}" if a.get("kv_dtype") else ""
    kv = f"; KV pool {pool / 1e6:.2f}M tokens{dtype} per system" if pool else ""
    demand = a.get("kv_demand_tokens")
    kv += f" against the sessions' ~{demand / 1e6:.2f}M" if pool and demand else ""
    g = a.get("accelerators_per_instance")
    size = f"; {a['instances']} instance(s) of {g} accelerators" if g else ""
    name = "data-parallel" if a["layout"] == "dp" else "tensor-parallel"
    inst = f" {a['instance_size']}." if a.get("instance_size") else ""
    return f"Attention {name}{size}{kv}", inst


def levers_text(lv: dict[str, Any]) -> str:
    """The levers in one sentence (the ``why`` line's last part)."""
    head, parts = _levers(lv)
    return f" {head} What would change it: " + "; ".join(parts) + "."


def _levers(lv: dict[str, Any]) -> tuple[str, list[str]]:
    """The slow run's headline and each lever's outcome."""
    parts = []
    for row in lv["tried"]:
        if row.get("error"):
            parts.append(f"{row['flag']}: cannot run ({row['error']})")
            continue
        pool = row.get("kv_pool_tokens_per_system")
        lay = "data-parallel" if row.get("layout") == "dp" else "tensor-parallel"
        parts.append(f"{row['flag']}: TTFT p50 {row['ttft_p50_s'] or 0:.2f} s, p99 {row['ttft_p99_s'] or 0:.0f} s, "
                     f"hits HBM {row['hit_share_hbm']:.0%} CPU {row['hit_share_cpu']:.0%}, {lay}"
                     + (f", KV pool {pool / 1e6:.2f}M tokens" if pool else "")
                     + (f" (still {SLOW_TTFT_S:g} s or more)" if row.get("slow") else ""))
    h = lv["hold_kv"]
    if h.get("instances"):
        hold = (f"holding the sessions' {h['kv_demand_tokens'] / 1e6:.2f}M tokens of KV in HBM takes "
                f"{h['instances']} instance(s) of {h['accelerators_per_instance']} ({h['accelerators']} accelerators) "
                f"at {h['kv_dtype']}")
        if h.get("instances_fp8"):
            hold += f", {h['instances_fp8']} ({h['accelerators_fp8']}) at fp8"
        parts.append(hold)
    return (f"Slow: TTFT p50 {lv['ttft_p50_s']:.1f} s, of which {lv['queue_p50_s'] or 0:.1f} s queue (p50), with "
            f"{lv['hit_share']:.0%} of prompt tokens cached.", parts)
