"""``agentprof capacity`` and the serving-simulation options and panel shared with ``agentprof replay``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from agentprof.replay.serving.why import beyond_text, why_lines
from agentprof.report.formats import fmt_duration

_CTX = {"help_option_names": ["-h", "--help"]}


def serving_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The simulation flags (shared by ``replay`` and ``capacity``)."""
    for dec in reversed([
        click.option("--router", type=click.Choice(["prefix-affinity", "round-robin"]), default="prefix-affinity",
                     show_default=True, help="How requests pick a replica when a system runs several."),
        click.option("--cap-wait", type=float, metavar="SECONDS",
                     help="Cap each human wait (user, permission, idle) at SECONDS in the simulation."),
        click.option("--arrival-rate", type=float, metavar="PER_HOUR",
                     help="Sessions arrive as a Poisson process (sessions/hour) instead of a closed loop."),
        click.option("--cache-ttl", type=float, metavar="SECONDS",
                     help="Provider-style TTL: cached blocks unused for SECONDS no longer hit."),
        click.option("--hash-scope", type=click.Choice(["global", "session"]), default="global",
                     show_default=True,
                     help="global: sessions sharing a prefix hit each other's blocks; session: private caches."),
        click.option("--attention", type=click.Choice(["auto", "tp", "dp"]), default="auto", show_default=True,
                     help="Attention layout of each instance: tp (tensor-parallel; an MLA latent KV is copied on "
                          "every rank), dp (data-parallel attention ranks, each with its own sequences' KV; MoE "
                          "shared), auto (TP where its pool holds the sessions' KV; where only DP's does, both simulated and "
                          "the one whose sessions finish faster kept)."),
        click.option("--kv-dtype", type=click.Choice(["auto", "bf16", "fp8"]), default="auto", show_default=True,
                     help="KV-cache element type: auto (as the catalog's recipe deployed it: FP8 where a recipe sets "
                          "it, else BF16), bf16, or fp8 (half the bytes per token: twice the contexts in HBM)."),
        click.option("--deployment", type=click.Choice(["agentic", "benchmark"]), default="agentic",
                     show_default=True,
                     help="agentic: each system as an agentic deployment runs it (its validated recipe's LMCache CPU "
                          "tier, KV dtype and HBM share; else the recipes' CPU tier per instance, an estimate); "
                          "benchmark: the catalog's benchmark settings, HBM only. --cache-policy and --kv-dtype "
                          "override their parts."),
        click.option("--overflow", type=click.Choice(["compact", "reject", "stand-in"]), default="compact",
                     show_default=True,
                     help="A call beyond the served window (the model's context or one replica's KV pool): compact "
                          "(the client summarizes its history, as Claude Code does), reject (the call fails, its "
                          "session ends) or stand-in (a catalog model whose window covers the trace)."),
        click.option("--sessions", type=click.IntRange(min=1), metavar="N",
                     help="Sessions the closed loop runs (the recorded ones cycled; default: each once, or one per "
                          "slot)."),
        click.option("--pools", metavar="pWxG-dWxG",
                     help="Serve disaggregated: W prefill workers of G accelerators, W decode workers of G (e.g. "
                          "p1x4-d1x4), the prompt's KV handed over the system's links."),
    ]):
        f = dec(f)
    return f


def serving_config(concurrency: int, router: str, cap_wait: float | None, arrival_rate: float | None,
                   cache_ttl: float | None, hash_scope: str, pools: str | None = None, attention: str = "auto",
                   kv_dtype: str = "auto", deployment: str = "agentic", overflow: str = "compact",
                   sessions: int | None = None) -> Any:
    from agentprof.replay.serving import ServingConfig

    cfg = ServingConfig(concurrency=concurrency, router=router, cap_wait_s=cap_wait, arrival_rate_per_h=arrival_rate,
                        ttl_s=cache_ttl, scope=hash_scope, disagg=pools, attention=attention, kv_dtype=kv_dtype,
                        deployment=deployment, levers=True, overflow=overflow, sessions=sessions)
    cfg.check()
    return cfg


def print_serving(console: Any, rows: list[tuple[str, dict[str, Any]]], title: str) -> None:
    """The serving panel: per system, latency percentiles, throughput, hits by tier, energy and cost."""
    from rich.markup import escape
    from rich.padding import Padding
    from rich.text import Text

    from agentprof.report.fit_width import Column, fitted_tables

    cols = [Column("system", "left", name=True)] + [Column(c) for c in (
        "conc.", "TTFT p50 / p99", "TPOT p50", "queue p99", "task p50", "tasks/h", "tasks/h/kW", "hits HBM/CPU/disk",
        "busy", "Wh/task", "$/task (self / API)")]
    cells = []
    for name, d in rows:
        h = d["hit_share"]
        cost = d.get("cost_per_task") or {}
        cells.append([escape(name), str(d["concurrency"]),
                      f"{fmt_duration(d['ttft_s']['p50'])} / {fmt_duration(d['ttft_s']['p99'])}",
                      *(fmt_duration(v) for v in (d["tpot_s"]["p50"], d["queue_s"]["p99"], d["task_s"]["p50"])),
                      f"{d['tasks_per_hour']:.1f}" if d.get("tasks_per_hour") else "—",
                      f"{d['tasks_per_hour_per_kw']:.2f}" if d.get("tasks_per_hour_per_kw") else "—",
                      f"{h['hbm']:.0%}/{h['cpu']:.0%}/{h['disk']:.0%}", f"{d['utilization']:.0%}",
                      f"{d['energy_wh_per_task']:.0f}" if d.get("energy_wh_per_task") else "—",
                      f"{cost.get('self_hosted_usd', float('nan')):.2f} / "
                      f"{cost.get('provider_usd', float('nan')):.2f}"])
    for t in fitted_tables(title, cols, cells, console.width):
        console.print(t)
    for name, d in rows:  # the why as short lines: a paragraph over 60 words is not read in a terminal
        console.print(f"[dim]{escape(name)}:[/dim]")
        for line in why_lines(d):
            console.print(Padding(Text(line, style="dim"), (0, 0, 0, 2)))
        line = beyond_text(d)
        if line:
            console.print(f"{name}: {line}")
    if rows:
        p = rows[0][1].get("power") or {}
        if p:
            console.print(f"[dim]energy boundary: {p['boundary']}[/dim]")


@click.command("capacity", context_settings=_CTX)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--system", "-s", "systems", multiple=True, required=True, help="Serving system (repeatable).")
@click.option("--slo", "slos", multiple=True, required=True, metavar="METRIC_PCT=VALUE",
              help="Latency bound, e.g. ttft_p99=5s, tpot_p99=50ms, queue_p90=1s (repeatable; all must hold).")
@click.option("--model", help="Serve every call as this catalog model (default: the recorded one or its stand-in).")
@click.option("--cache-policy", default="auto", show_default=True,
              help="auto (each system's agentic deployment, see --deployment) | prefix (HBM prefix cache only) | "
                   "lmcache:cpu=SIZE[,disk=SIZE] (adds CPU and disk tiers)")
@click.option("--max-concurrency", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Largest concurrency to try.")
@serving_options
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False), help="Extra catalog file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--no-bands", is_flag=True,
              help="Skip the bands (a system resting on estimates is searched twice more, every ranged estimate at "
                   "its fast and at its slow end).")
def capacity_cmd(paths: tuple[str, ...], systems: tuple[str, ...], slos: tuple[str, ...], model: str | None,
                 cache_policy: str, max_concurrency: int, router: str, cap_wait: float | None,
                 arrival_rate: float | None, cache_ttl: float | None, hash_scope: str, catalogs: tuple[str, ...],
                 as_json: bool, pools: str | None = None, attention: str = "auto", kv_dtype: str = "auto",
                 deployment: str = "agentic", no_bands: bool = False, overflow: str = "compact",
                 sessions: int | None = None) -> None:
    """How many agent sessions can each system serve within a latency SLO?

    Simulates the sessions of PATHS at growing concurrency (doubling, then bisecting) and reports the largest
    that meets every --slo, with tasks per hour, tasks per hour per kW, energy and cost per task.

    \b
    Examples:
      agentprof capacity traces/samples/kv-cache-tester -s h200+x86 \\
          -s rubin+vera --slo ttft_p99=30s
      agentprof capacity traces/ -s jalapeno --slo ttft_p99=5s \\
          --slo tpot_p99=50ms --cache-policy lmcache:cpu=2TB --json
    """
    from agentprof.catalog.hardware import load_catalog
    from agentprof.importers import load_any
    from agentprof.replay.cachepolicy import parse_policy
    from agentprof.replay.serving.capacity import capacity
    from agentprof.safe_text import console as safe_console

    cfg = serving_config(1, router, cap_wait, arrival_rate, cache_ttl, hash_scope, pools, attention, kv_dtype,
                         deployment, overflow, sessions)
    policy = parse_policy(cache_policy)
    cfg = replace(cfg, cache_from_deployment=policy.kind == "auto")
    if policy.kind == "none":
        from agentprof.errors import AgentprofError

        raise AgentprofError("capacity needs a cache policy: auto, prefix or lmcache:cpu=SIZE[,disk=SIZE]")
    if policy.kind == "lmcache":
        cfg = replace(cfg, cpu_bytes=policy.cpu_bytes, disk_bytes=policy.disk_bytes)
    cat = load_catalog(tuple(catalogs))
    trace = load_any(list(paths))
    res = capacity(trace, list(systems), list(slos), model=model, base=cfg, catalog=cat,
                   max_concurrency=max_concurrency, bands=not no_bands)
    if as_json:
        click.echo(json.dumps(res, indent=2, default=str))
        return
    console = safe_console()
    slo = ", ".join(f"{s['metric']}_{s['percentile']} <= {fmt_duration(s['bound_s'])}" for s in res["slo"])
    console.print(f"capacity at {slo}: {res['sessions']} session(s), {res['calls']} calls as {res['model']}")
    ok = [(r["system"], r["serving"]) for r in res["systems"] if r.get("serving")]
    print_serving(console, ok, "largest concurrency that meets the SLO")
    for r in res["systems"]:
        if r.get("error"):
            console.print(f"[red]{r['system']}: {r['error']}[/red]")
        elif r.get("first_failing"):
            f = r["first_failing"]
            vals = ", ".join(f"{k[:-2]} {fmt_duration(v)}" for k, v in f.items() if k != "concurrency")
            console.print(f"[dim]{r['system']}: concurrency {f['concurrency']} breaks it ({vals})[/dim]")
        else:
            console.print(f"[dim]{r['system']}: meets the SLO up to --max-concurrency {res['max_concurrency']}[/dim]")
        b = r.get("band")
        if b:
            console.print(f"[yellow]{r['system']}: band (every ranged estimate at its fast / slow end)[/yellow] "
                          f"up to {min(b['concurrency'])}–{max(b['concurrency'])} session(s) "
                          f"({len(b['ranged'])} ranged figures, named in --json)")
    for n in res["notes"]:
        console.print(f"[dim]note: {n}[/dim]")
