"""``agentprof replay`` (what-if replay of traces on serving systems) and ``agentprof devices`` (the hardware
catalog and the calibrated device model: ``list``, ``fit``, ``check``, ``seed-check``)."""

from __future__ import annotations

import json
from typing import Any

import click

from agentprof.catalog.hardware import load_catalog
from agentprof.distributed.options import cluster_options
from agentprof.errors import AgentprofError
from agentprof.replay.serving.cli import serving_config, serving_options
from agentprof.report.formats import fmt_duration, fmt_duration_short, fmt_share, fmt_x

_CTX = {"help_option_names": ["-h", "--help"]}


def _cpu_map(values: tuple[str, ...], path: str | None) -> dict[str, float]:
    from agentprof.replay.orchestration import load_cpu_map

    out: dict[str, float] = load_cpu_map(path) if path else {}
    for v in values:
        name, sep, frac = v.partition("=")
        if not name:
            raise AgentprofError(f"--cpu-bound {v!r}: expected TOOL or TOOL=FRACTION")
        try:
            f = float(frac) if sep else 1.0
        except ValueError:
            raise AgentprofError(f"--cpu-bound {v!r}: FRACTION must be a number between 0 and 1") from None
        if not 0 <= f <= 1:
            raise AgentprofError(f"--cpu-bound {v!r}: FRACTION must be between 0 and 1")
        out[name] = f
    return out


@click.command("replay", context_settings=_CTX)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--system", "-s", "systems", multiple=True, required=True,
              help="Serving system to replay on (repeatable; see `agentprof devices list`).")
@click.option("--model", help="Replay every call through this catalog model (default: each call's own model, "
                              "closed models through their open stand-in).")
@click.option("--cache-policy", default="auto", show_default=True,
              help="auto (HBM prefix cache; with --concurrency each system's agentic deployment, see --deployment) | "
                   "none | prefix (HBM prefix cache only) | lmcache:cpu=SIZE[,disk=SIZE]")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Agent sessions active at once on each system: runs the multi-session serving simulation "
                   "(shared KV cache, continuous batching) and adds a serving panel.")
@click.option("--cpu-bound", "cpu_bound", multiple=True, metavar="TOOL[=FRACTION]",
              help="Treat this tool's time as CPU-bound (repeatable); it then scales with the host CPU.")
@click.option("--cpu-bound-file", type=click.Path(dir_okay=False),
              help="TOML/JSON mapping of tool name to CPU-bound fraction (0..1 or true/false).")
@click.option("--recorded-host", default="xeon-8480c", show_default=True,
              help="Host CPU the trace was recorded on (for scaling CPU-bound spans).")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False),
              help="Extra catalog file (accelerators, hosts, links, systems, models); repeatable.")
@click.option("--fitted", type=click.Path(dir_okay=False), help="Fitted parameters (default: the shipped ones).")
@click.option("--speculative", type=click.Choice(["none", "eagle3"]), default="none", show_default=True,
              help="Decode with the model's catalogued speculative drafter (Eagle3 for Kimi K2.5: 3 draft tokens, "
                   "acceptance 2.05-3.2 per step, catalog/speculative.toml), alone and with --concurrency.")
@serving_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@cluster_options
def replay(paths: tuple[str, ...], systems: tuple[str, ...], model: str | None, cache_policy: str,
           concurrency: int | None, cpu_bound: tuple[str, ...], cpu_bound_file: str | None, recorded_host: str,
           catalogs: tuple[str, ...], fitted: str | None, router: str, cap_wait: float | None,
           arrival_rate: float | None, cache_ttl: float | None, hash_scope: str, as_json: bool,
           workers: int | None = None, scheduler: str | None = None, pools: str | None = None,
           attention: str = "auto", kv_dtype: str = "auto", deployment: str = "agentic",
           speculative: str = "none", overflow: str = "compact", sessions: int | None = None) -> None:
    """Replay traces on serving systems: how much faster does the whole task get, not just the model calls?

    Every model call is re-timed by the calibrated device model, CPU-bound orchestration scales with the
    host CPU, waits stay as recorded, and each session is re-assembled along its recorded critical path.

    \b
    Examples:
      agentprof replay traces/samples/kv-cache-tester -s h200+x86 -s jalapeno
      agentprof replay ~/.claude/projects/my-project/ -s gb200+grace \\
          --cache-policy lmcache:cpu=500GiB
      agentprof replay run.jsonl -s b200+x86 -s b200+vera --cpu-bound pytest
      agentprof replay traces/samples/kv-cache-tester -s h200+x86 -s rubin+vera \\
          --concurrency 50 --cache-policy lmcache:cpu=2TB --cap-wait 60
    """
    from agentprof.distributed.options import load
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.replay import replay as run

    cat = load_catalog(tuple(catalogs))
    cpu = _cpu_map(cpu_bound, cpu_bound_file)
    simulate = concurrency is not None or any(v is not None for v in (cap_wait, arrival_rate, cache_ttl, pools,
                                                                      sessions))
    serving = serving_config(concurrency or 1, router, cap_wait, arrival_rate, cache_ttl, hash_scope, pools,
                             attention, kv_dtype, deployment, overflow, sessions) \
        if simulate else None
    trace = load(paths, workers, scheduler)  # the prefix cache couples sessions: only the import is distributed
    res = run(trace, list(systems), model=model, cache_policy=cache_policy, concurrency=concurrency or 1,
              catalog=cat, cpu_bound=cpu, recorded_host=recorded_host,
              fitted=load_fitted(fitted) if fitted else None, serving=serving, deployment=deployment,
              kv_dtype=kv_dtype, speculative=speculative, overflow=overflow)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2, default=str))
        return
    _print_replay(res)


def _print_replay(res: Any) -> None:
    from agentprof.replay.bands import ESTIMATED_TIER, ranged_count
    from agentprof.report.fit_width import Column, fitted_tables
    from agentprof.report.results import grouped_standins
    from agentprof.safe_text import console as safe_console
    from agentprof.safe_text import markup, text

    console = safe_console()
    console.print(f"[bold]replay:[/bold] {res.sessions} session(s), {res.replayed_calls}/{res.model_calls} model "
                  f"calls, cache {markup(res.cache_policy)}, concurrency {res.concurrency}", highlight=False)
    # the task time and speed-ups first: when the width is short, the later columns stack below them
    cols = [Column("system", "left", name=True)] + [Column(c) for c in (
        "task", "task ×", "calls ×", "model", "model %", "tools", "orch.", "wait", "vs 1st", "Amdahl")]

    def times(x: Any) -> list[str]:
        return [fmt_duration_short(v) for v in (x.model_s, x.tool_s, x.orchestration_s, x.wait_s)]

    r = res.recorded
    rows: list[list[Any]] = [["recorded", fmt_duration_short(r.e2e_s), fmt_x(1.0), fmt_x(1.0), times(r)[0],
                              fmt_share(r.model_share), *times(r)[1:], "", fmt_x(r.amdahl_bound)]]
    for s in res.systems:
        rows.append([text(s.name), "[red]cannot run[/red]", *["—"] * 9] if s.error else
                    [text(s.name), fmt_duration_short(s.e2e_s), fmt_x(s.speedup_vs_recorded),
                     fmt_x(s.model_calls_speedup), times(s)[0], fmt_share(s.model_share), *times(s)[1:],
                     fmt_x(s.speedup_vs_first), fmt_x(s.amdahl_bound)])
    for t in fitted_tables(None, cols, rows, console.width, ["dim"] + [None] * len(res.systems)):
        console.print(t)
    console.print("[dim]task: end-to-end time; task ×: its speed-up; calls ×: the model calls' speed-up; orch.: "
                  "agent code and parsing outside model calls, tools and waits; Amdahl: the task speed-up with "
                  "infinitely fast model calls[/dim]")
    if r.agent_active_s is not None and r.e2e_s and r.agent_active_s < r.e2e_s - 1e-6:
        console.print("agent-active time (user turns, approvals and idle left out): recorded "
                      f"{fmt_duration_short(r.agent_active_s)}; "
                      + "; ".join(f"{s.name} {fmt_duration_short(s.agent_active_s)} "
                                  f"({fmt_x(s.speedup_vs_recorded_active)}, "
                                  f"Amdahl bound {fmt_x(s.amdahl_bound_active)})"
                                  for s in res.systems if not s.error),
                      highlight=False)
    for s in res.systems:
        if s.error:
            console.print(f"[red]{markup(s.name)}: {markup(s.error, 1000)}[/red]")
        for d in s.deployments:
            lev = d.get("level_error") or {}
            err = (f", its cross-validated error TPOT {fmt_share(lev.get('median_ape_tpot'))} / TTFT "
                   f"{fmt_share(lev.get('median_ape_ttft'))}" if lev else "")
            console.print(f"[dim]{markup(s.name)}: {markup(d['model'])} {d['precision']} on {d['accelerators']} accelerator(s), "
                          f"step overhead {d['t_fixed_ms']} ms — calibration {d.get('calibration_level', '?')}"
                          f"{err}[/dim]")
            console.print(f"[dim]  parameters: {markup(d['calibration'], 1000)}[/dim]")
            sp = d.get("speculative")
            if sp:
                console.print(f"{markup(s.name)}: speculative decoding {sp['method']}: {sp['draft_tokens']:g} draft "
                              f"tokens, {sp['accept']:.2f} kept per step, drafter {sp['drafter_params'] / 1e9:.2f}B "
                              f"parameters (+{sp['draft_s_per_step'] * 1e3:.2f} ms per step) [{markup(sp['source'])}]")
        if s.waiting_for and s.model_calls_s:
            parts = ", ".join(f"{k.replace('_', ' ')} {fmt_duration(v)} ({v / s.model_calls_s:.0%})"
                              for k, v in s.waiting_for.items() if v > 0)
            console.print(f"{markup(s.name)}: model calls wait for {parts}")
        if s.band:
            b = s.band
            lo, hi = sorted(b["speedup_vs_recorded"]) if all(b["speedup_vs_recorded"]) else (None, None)
            src = "the catalog ranges" + (" and the deployment's estimated CPU tier" if ESTIMATED_TIER in b["ranged"]
                                          else "") + (" and the drafter's figures" if any(
                                              x.startswith("speculative.") for x in b["ranged"]) else "")
            ttft = b.get("serving_ttft_p50_s") or []
            served = (f", {res.concurrency} sessions' first token p50 {fmt_duration(min(ttft))}–"
                      f"{fmt_duration(max(ttft))}" if len(ttft) == 2 and all(x is not None for x in ttft) else "")
            if max(b["e2e_s"]) - min(b["e2e_s"]) < 0.005 * max(b["e2e_s"]) and not served:
                console.print(f"{markup(s.name)}: the task time moves under 0.5 % across the band "
                              f"({ranged_count(b)} from {src}, named in --json)")
                continue
            console.print(f"[yellow]{markup(s.name)}: band from {src}[/yellow] task time "
                          f"{fmt_duration(min(b['e2e_s']))}–{fmt_duration(max(b['e2e_s']))}, model calls "
                          f"{fmt_duration(min(b['model_calls_s']))}–{fmt_duration(max(b['model_calls_s']))}, "
                          "task speed-up "
                          f"{fmt_x(lo)}–{fmt_x(hi)}{served} ({ranged_count(b)}, named in --json)")
    for line in grouped_standins(list(res.standins.values())):
        console.print(f"[yellow]stand-in[/yellow] {markup(line, 1000)}")
    o = res.orchestration
    console.print(f"CPU-bound orchestration scaled by host: {fmt_duration(o['cpu_bound_s'])} (declared "
                  f"{fmt_duration(o['cpu_bound_declared_s'])}, attribute {fmt_duration(o['cpu_bound_attribute_s'])}, "
                  f"cpu_ns {fmt_duration(o['cpu_bound_cpu_ns_s'])}, parse {fmt_duration(o['cpu_bound_parse_s'])}); "
                  f"not CPU-bound (I/O or unknown): {fmt_duration(o['not_cpu_bound_s'])}; recorded host "
                  f"{markup(o['recorded_host'])}")
    if o.get("gaps_s"):
        console.print(f"gaps between spans (the agent's own loop): {fmt_duration(o['gaps_s'])}, of which "
                      f"{fmt_duration(o['gaps_cpu_bound_s'])} CPU-bound ({markup(o['gaps_source'])}) scaled by host")
    for n in res.notes:
        console.print(f"[dim]note: {markup(n, 1000)}[/dim]")
    served = [(s.name, s.serving) for s in res.systems if s.serving]
    if served:
        from agentprof.replay.serving.cli import print_serving

        print_serving(console, served, f"serving: {res.concurrency} concurrent session(s) per system")
    console.print(markup(res.finding(), None))


@click.group("devices", context_settings=_CTX)
def devices() -> None:
    """The hardware catalog and the calibrated device model.

    \b
    Examples:
      agentprof devices list
      agentprof devices fit --points data/inferencex/calibration_points.csv
      agentprof devices check POINTS.csv --cross-validate --json
      agentprof devices seed-check --markdown
    """


@devices.command("list", context_settings=_CTX)
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False), help="Extra catalog file.")
@click.option("--json", "as_json", is_flag=True, help="Print the catalog as one JSON object.")
def list_cmd(catalogs: tuple[str, ...], as_json: bool) -> None:
    """Serving systems, accelerators and host CPUs (with sources; estimates marked).

    \b
    Examples:
      agentprof devices list
      agentprof devices list --catalog my-systems.toml --json
    """
    from rich.markup import escape

    from agentprof.replay.calibration import load_fitted, user_fitted_in_use
    from agentprof.safe_text import markup

    cat = load_catalog(tuple(catalogs))
    fitted = load_fitted()
    own = user_fitted_in_use()
    calibrated = {e.attrs.get("hardware") for e in fitted.entries["group"].values()}
    data = _catalog_dict(cat, calibrated)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    from agentprof.report.fit_width import Column, fitted_tables
    from agentprof.safe_text import console as safe_console

    console = safe_console()

    def show(title: str, cols: list[Column], rows: list[list[str]]) -> None:
        for tb in fitted_tables(title, cols, [[escape(c) for c in r] for r in rows], console.width):
            console.print(tb)

    show("serving systems", [Column("system", "left", name=True), Column("accelerators", "left"),
                             Column("HBM / BW per chip", "left"), Column("host (single-thread)", "left"),
                             Column("host link", "left"), Column("software", "left", wrap=True),
                             Column("calibration", "left", wrap=True)],
         [[s["name"], f"{s['count']} x {s['accelerator']}", f"{s['hbm_gb']:.0f} GB / {s['hbm_bw_tb_s']:.3g} TB/s",
           f"{s['host']} ({s['host_st_speed']:.2f}x{'*' if s['host_st_estimate'] else ''})",
           f"{s['link']} ({s['link_gb_s']:.0f} GB/s)", ", ".join(s["frameworks"]), s["calibration"]]
          for s in data["systems"]])
    show("accelerators (dense peak)", [Column("key", "left", name=True), Column("name", "left", wrap=True)]
         + [Column(c) for c in ("HBM", "BW", "FP8", "FP4", "TDP", "all-in kW")] + [Column("calibrated", "left")],
         [[x["key"], x["display"], f"{x['hbm_gb']:.0f} GB", f"{x['hbm_bw_tb_s']:.3g} TB/s",
           f"{x['fp8_pflops']:.3g} PF" if x["fp8_pflops"] else "—",
           f"{x['fp4_pflops']:.3g} PF" if x["fp4_pflops"] else "—",
           f"{x['tdp_w']:.0f} W" if x["tdp_w"] else "—", f"{x['allin_kw']:.2f}" if x["allin_kw"] else "—",
           "yes" if x["calibrated"] else (f"via {x['proxy']}" if x["proxy"] else "no")] for x in data["accelerators"]])
    show("host CPUs", [Column("key", "left", name=True), Column("name", "left", wrap=True), Column("cores"),
                       Column("memory BW"), Column("single-thread"), Column("source", "left", wrap=True)],
         [[x["key"], x["display"], f"{x['cores']:.0f}", f"{x['mem_bw_gb_s']:.0f} GB/s" if x["mem_bw_gb_s"] else "—",
           f"{x['st_speed']:.2f}x", x["st_source"]] for x in data["hosts"]])
    show("models", [Column("key", "left", name=True), Column("name", "left", wrap=True),
                    Column("params (active)"), Column("layers"), Column("attention", "left"),
                    Column("KV bytes/token"), Column("formats", "left", wrap=True)],
         [[x["key"], x["display"], f"{x['params_b']:.0f}B ({x['active_b']:.1f}B)", f"{x['layers']:.0f}",
           x["attention"], f"{x['kv_bytes_per_token']:,.0f}", ", ".join(x["formats"])] for x in data["models"]])
    console.print("[dim]* estimate (see hosts.toml). Sources: docs/SOURCES.md. Add your own with --catalog FILE.[/dim]")
    if own is not None:
        console.print(f"calibration: your own fit {markup(str(own))} (written by 'agentprof devices fit'), not the "
                      "shipped one", highlight=False)


def _catalog_dict(cat: Any, calibrated: set[str | None]) -> dict[str, Any]:
    systems = []
    for s in cat.systems.values():
        acc = s.accelerator
        cal = "declared estimates" if s.params else (
            "fitted" if acc.key in calibrated else (f"borrows {acc.proxy} (estimate)" if acc.proxy else "uncalibrated"))
        systems.append({"name": s.key, "display": s.display, "accelerator": acc.key, "count": s.count,
                        "hbm_gb": acc.hbm_bytes / 1e9, "hbm_bw_tb_s": acc.hbm_bw / 1e12, "host": s.host.key,
                        "host_st_speed": s.host.st_speed, "host_st_estimate": s.host.fields["st_speed"].is_estimate,
                        "link": s.link.key, "link_gb_s": s.link.bw.value / 1e9, "frameworks": list(s.frameworks),
                        "precisions": list(s.precisions), "tp": s.tp, "calibration": cal})

    def num(x: Any, k: str, scale: float = 1.0) -> float | None:
        f = x.fields.get(k)
        return f.value / scale if f else None

    accs = [{"key": a.key, "display": a.display, "family": a.family, "hbm_gb": a.hbm_bytes / 1e9,
             "hbm_bw_tb_s": a.hbm_bw / 1e12, "fp8_pflops": num(a, "fp8_flops", 1e15),
             "fp4_pflops": num(a, "fp4_flops", 1e15), "bf16_pflops": num(a, "bf16_flops", 1e15),
             "tdp_w": num(a, "tdp_w"), "allin_kw": num(a, "allin_kw"), "calibrated": a.key in calibrated,
             "proxy": a.proxy, "estimates": sorted(k for k, f in a.fields.items() if f.is_estimate),
             "evidence": {k: f.evidence_class for k, f in a.fields.items()}}
            for a in cat.accelerators.values()]
    hosts = [{"key": h.key, "display": h.display, "cores": h.fields["cores"].value,
              "mem_bw_gb_s": num(h, "mem_bw", 1e9), "st_speed": h.st_speed,
              "st_source": h.fields["st_speed"].source[:90]} for h in cat.hosts.values()]
    models = [{"key": m.key, "display": m.display, "params_b": m.get("params_total") / 1e9,
               "active_b": m.get("params_active") / 1e9, "layers": m.get("layers"), "attention": m.attention,
               "kv_bytes_per_token": m.kv_bytes_per_token(), "formats": sorted(m.formats)} for m in cat.models.values()]
    return {"systems": systems, "accelerators": accs, "hosts": hosts, "models": models,
            "links": [{"key": k.key, "display": k.display, "gb_s": k.bw.value / 1e9} for k in cat.links.values()]}


@devices.command("fit", context_settings=_CTX)
@click.option("--points", type=click.Path(dir_okay=False), default="data/inferencex/calibration_points.csv",
              show_default=True, help="Measured serving points (InferenceX CSV layout).")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Where to write (default: fitted.toml in your agentprof data folder, e.g. "
                   "~/.local/share/agentprof or $XDG_DATA_HOME/agentprof; $AGENTPROF_DATA_DIR sets it). The device "
                   "model reads that file instead of the shipped fit while it exists. Never the installed package.")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False), help="Extra catalog file.")
@click.option("--json", "as_json", is_flag=True, help="Print the in-sample fidelity as JSON.")
@click.option("--skip-levels", is_flag=True,
              help="Do not measure the error per calibration level (leave-one-layout/group-out; about 3.5 min on 2 cores).")
def fit_cmd(points: str, out: str | None, catalogs: tuple[str, ...], as_json: bool, skip_levels: bool) -> None:
    """Fit the cost model's free terms on measured points and store them (with provenance) as data.

    By default the fit goes to your agentprof data folder, and replay, capacity and report use it (saying so)
    until you delete it; the shipped fit is never overwritten. The error of each calibration level (fitted
    layout, unseen layout of a fitted group, unseen group) is
    measured by cross-validation and stored with the parameters, so every prediction can state it.

    \b
    Examples:
      agentprof devices fit
      agentprof devices fit --points my_points.csv --out my-fitted.toml --json \\
          --skip-levels
    """
    from agentprof.outputs import checked_output, write_with
    from agentprof.replay.calibration import user_fitted_path, write_fitted
    from agentprof.replay.devicefit import fit_file
    from agentprof.replay.fidelity import check, level_errors
    from agentprof.replay.points import load_points
    from agentprof.resources import shipped

    points = str(shipped(points))  # the default names the repository's file; a wheel carries a copy
    target = checked_output(out if out else user_fitted_path(), (".toml",), "fitted terms")
    cat = load_catalog(tuple(catalogs))
    fitted = fit_file(points, cat)
    if not skip_levels:
        fitted.level_errors, _ = level_errors(load_points(points), cat, fitted.attn_eff)
    path = write_with(target, lambda: write_fitted(fitted, target))
    summary = check(load_points(points), fitted, cat).summary()
    if as_json:
        click.echo(json.dumps({"written": str(path), "provenance": fitted.provenance, "in_sample": summary,
                               "attn_eff": {"pooled": fitted.attn_eff,
                                            "by_accelerator": fitted.attn_eff_by_accelerator,
                                            "by_attention": fitted.attn_eff_by_attention}}, indent=2))
        return
    click.echo(f"fitted {len(fitted.entries['layout'])} layouts in {len(fitted.entries['group'])} groups on "
               f"{fitted.provenance['points_used']} points; wrote {path}")
    if out is None:
        click.echo("replay, capacity and report now use this fit instead of the shipped one (delete the file to go "
                   "back)")
    click.echo("prefill attention efficiency (fraction of the BF16 peak), MLA: pooled " f"{fitted.attn_eff:.3f}" +
               "".join(f", {k} {v:.3f}" for k, v in sorted(fitted.attn_eff_by_accelerator.items())))
    for kind, table in sorted(fitted.attn_eff_by_attention.items()):
        click.echo(f"  {kind.upper()}: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(table.items())))
    _print_fidelity(summary, "in-sample")


@devices.command("check", context_settings=_CTX)
@click.argument("points", type=click.Path(dir_okay=False))
@click.option("--cross-validate", is_flag=True,
              help="Fit on each ISL/OSL setting of POINTS and check on the others (instead of the shipped fit).")
@click.option("--fitted", type=click.Path(dir_okay=False), help="Fitted parameters (default: the shipped ones).")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False), help="Extra catalog file.")
@click.option("--simulate", is_flag=True,
              help="Run each point through the serving simulation (closed-loop clients, fixed ISL/OSL, no reuse; "
                   "disaggregated points on their prefill and decode pools) instead of the analytic queueing terms.")
@click.option("--leave-out", type=click.Choice(["layout", "group"]),
              help="Leave-one-layout-out or leave-one-group-out cross-validation, with the lookup baseline.")
@click.option("--per-point", "per_point", type=click.Path(dir_okay=False),
              help="Write the input rows plus predicted ttft_s, tpot_s, e2e_s and calibration to this CSV.")
@click.option("--held-out-prompts", is_flag=True,
              help="Check only the points with prompts longer than any the fit was made on (the long prompts it "
                   "never saw).")
@click.option("--json", "as_json", is_flag=True, help="Print points, covered, and median/p90 APE per metric.")
def check_cmd(points: str, cross_validate: bool, fitted: str | None, catalogs: tuple[str, ...],
              simulate: bool, leave_out: str | None, per_point: str | None, held_out_prompts: bool,
              as_json: bool) -> None:
    """Predict TTFT, TPOT and end-to-end latency for every point of a CSV, or of InferenceX results JSON (a run's
    agg_bmk.json, the API's points), and report the errors.

    \b
    Examples:
      agentprof devices check data/inferencex/calibration_points.csv
      agentprof devices check POINTS.csv --cross-validate --json
      agentprof devices check POINTS.csv --simulate --cross-validate --json
      agentprof devices check POINTS.csv --leave-out layout
      agentprof devices check agg_bmk.json
      agentprof devices check my_points.csv --per-point predicted.csv
      agentprof devices check data/inferencex/official_api_points.csv \\
          --held-out-prompts
    """
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.fidelity import check
    from agentprof.replay.fidelity import cross_validate as cv
    from agentprof.replay.fidelity import leave_out as lo
    from agentprof.replay.points import load_points
    from agentprof.resources import shipped

    points = str(shipped(points))  # the examples name the repository's files; a wheel carries copies
    cat = load_catalog(tuple(catalogs))
    if simulate and _is_agentic(points):
        if held_out_prompts:
            raise AgentprofError("--held-out-prompts selects fixed-length serving points, not agentic ones")
        from agentprof.replay.agentic import load_agentic
        from agentprof.replay.serving.benchpoint import simulate_agentic

        res = simulate_agentic(load_agentic(points), load_fitted(fitted), cat)
        res.pop("table", None)
        click.echo(json.dumps({**res, "mode": "simulated AgentX points (mean TTFT and ITL)"}, indent=2))
        return
    df = load_points(points)
    if cross_validate and leave_out:
        raise AgentprofError("choose one of --cross-validate and --leave-out")
    longer = ""
    if held_out_prompts:
        if cross_validate or leave_out:
            raise AgentprofError("--held-out-prompts checks a fit as it was made: not with --cross-validate or "
                                 "--leave-out, which fit again")
        from agentprof.replay.fidelity import fit_points, longer_prompts

        seen = fit_points(load_fitted(fitted))
        longest = int(seen["isl"].max())
        df = longer_prompts(df, seen)
        if df.height == 0:
            raise AgentprofError(f"{points}: no point has a prompt longer than the fit's longest ({longest:,} "
                                 "tokens)")
        longer = f", prompts longer than it saw (> {longest:,} tokens)"
    if simulate and leave_out:
        raise AgentprofError("--simulate works with the shipped fit or --cross-validate, not --leave-out")
    table = None
    if simulate:
        from agentprof.replay.serving.benchpoint import (
            simulate_check,
            simulate_cross_validate,
            summary_with_slices,
        )

        if cross_validate:
            res = simulate_cross_validate(df, cat)
            out = {**res["pooled"], "folds": res["folds"],
                   "mode": "simulated, cross-validated (fit on one ISL/OSL, check on the others)"}
        else:
            ch = simulate_check(df, load_fitted(fitted), cat)
            table = ch.table
            out = {**summary_with_slices(ch), "mode": "simulated, " + _fit_label(fitted) + longer}
    elif cross_validate:
        res = cv(df, cat)
        table = res["table"]
        out = {**res["pooled"], "folds": res["folds"], "mode": "cross-validated (fit on one ISL/OSL, check on the others)"}
    elif leave_out:
        res = lo(df, leave_out, cat)
        table = res.pop("table", None)
        out = {**res.get("model", {"points": 0, "covered": 0}), "baseline": res.get("baseline"),
               "model_on_baseline_points": res.get("model_on_baseline_points"),
               "held_out_units": res["held_out_units"], "mode": f"leave one {leave_out} out"}
    else:
        table = check(df, load_fitted(fitted), cat).table
        from agentprof.replay.fidelity import summarize

        out = {**summarize(table), "mode": _fit_label(fitted) + longer}
    if per_point and table is not None:
        _write_per_point(df, table, per_point)
        out["per_point"] = per_point
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    _print_fidelity(out, out["mode"])
    if leave_out and out.get("baseline"):
        b, m = out["baseline"], out["model_on_baseline_points"]
        click.echo("on the points the lookup covers, median APE TTFT / TPOT / E2E:")
        for name, v in (("lookup baseline", b), ("model", m)):
            click.echo(f"  {name:<16}" + " / ".join(fmt_share(v[k]["median_ape"]) for k in ("ttft", "tpot", "e2e")))


def _fit_label(fitted: str | None) -> str:
    """Which fitted terms a check used: the one given, the user's own (``devices fit``) or the shipped one."""
    from agentprof.replay.calibration import user_fitted_in_use

    if fitted:
        return f"fit {fitted}"
    own = user_fitted_in_use()
    return f"your fit {own}" if own is not None else "shipped fit"


def _write_per_point(df: Any, table: Any, path: str) -> None:
    """The input rows (in input order) with the predicted ``ttft_s``, ``tpot_s``, ``e2e_s`` and ``calibration``
    (the level: fitted, group, unseen; empty where the point is not covered)."""
    import polars as pl

    pred = table.sort("row").select(
        "row", pl.when(pl.col("covered")).then(pl.col("pred_ttft")).otherwise(None).alias("ttft_s"),
        pl.when(pl.col("covered")).then(pl.col("pred_tpot")).otherwise(None).alias("tpot_s"),
        pl.when(pl.col("covered")).then(pl.col("pred_e2e")).otherwise(None).alias("e2e_s"),
        pl.when(pl.col("covered")).then(pl.col("level")).otherwise(pl.lit("")).alias("calibration"))
    if "held_out" in table.columns or "fit_on" in table.columns:
        pred = pred.unique("row", keep="first").sort("row")
    rows = df.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    out = rows.join(pred.with_columns(pl.col("row").cast(pl.Int64)), on="row", how="left").drop("row")
    try:
        out.write_csv(path)
    except OSError as e:
        raise AgentprofError(f"{path}: cannot write: {e.strerror or e}") from None


def _is_agentic(path: str) -> bool:
    """An AgentX points file (mean TTFT/ITL with server hit rates) rather than fixed-length points."""
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.readline()
    except OSError:
        return False
    return "server_gpu_cache_hit_rate" in head and "mean_ttft" in head


def _print_fidelity(s: dict[str, Any], label: str) -> None:
    from rich.markup import escape

    from agentprof.report.fit_width import Column, fitted_tables
    from agentprof.safe_text import console as safe_console

    console = safe_console()
    rows: list[list[str]] = []

    def add(name: str, v: dict[str, Any]) -> None:
        cells = []
        for m in ("ttft", "tpot", "e2e"):
            cells += [fmt_share(v[m]["median_ape"]), fmt_share(v[m]["p90_ape"])]
        rows.append([escape(name), *cells])

    add("all", s)
    for by in ("hardware", "framework", "model", "serving", "conc_band", "level"):
        for k, v in s.get(f"by_{by}", {}).items():
            add(f"{by.replace('_', ' ')} {k} ({v['points']})", v)
    cols = [Column("slice (points)", "left", name=True)] + [Column(f"{m} {q}") for m in ("TTFT", "TPOT", "E2E")
                                                             for q in ("median", "p90")]
    title = f"{escape(label)}: {s['covered']}/{s['points']} points covered; absolute % error, median and p90"
    for t in fitted_tables(title, cols, rows, console.width):
        console.print(t)
    if s.get("max_miss_factor"):
        console.print(f"worst miss: {s['max_miss_factor']:.1f}x (prediction vs measurement, either way)")
    if s.get("off_5x") is not None:
        console.print(f"{s['off_5x']} point(s) off by more than 5x in TTFT, TPOT or E2E")
    if s.get("uncovered"):
        for why, n in s["uncovered"].items():
            console.print(f"[dim]not covered: {n} point(s): {why}[/dim]")


@devices.command("seed-check", context_settings=_CTX)
@click.option("--markdown", is_flag=True, help="Print the table as markdown (as in docs/DEVICE_MODEL.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the predictions as JSON.")
@click.option("--claims", type=click.Path(dir_okay=False),
              help="Claims file to check (default: the shipped catalog/seed_claims.toml).")
def seed_check_cmd(markdown: bool, as_json: bool, claims: str | None) -> None:
    """The model's predictions for the seeds' Jalapeño InferenceX 8K1K claims, and how far each lands.

    \b
    Examples:
      agentprof devices seed-check
      agentprof devices seed-check --markdown
      agentprof devices seed-check --claims my_claims.toml --json
    """
    from agentprof.replay.seedcheck import SHORT_HEADERS, SHORT_NOTE, seed_check, table_rows, to_markdown

    res = seed_check(claims_path=claims)
    if as_json:
        click.echo(json.dumps(res, indent=2, default=str))
    elif markdown:
        click.echo(to_markdown(res))
    else:  # the same cells as tables that fit the terminal (figures whole, the claim's names repeated)
        from rich.markup import escape

        from agentprof.report.fit_width import Column, fitted_tables
        from agentprof.safe_text import console as safe_console

        console = safe_console()
        rows, note = table_rows(res)
        cols = [Column(h, "left", name=k < 2) for k, h in enumerate(SHORT_HEADERS)]
        for t in fitted_tables("Jalapeño seed claims against the model", cols,
                               [[escape(c) for c in r] for r in rows], console.width):
            console.print(t)
        console.print(escape(f"{SHORT_NOTE} {note}"), style="dim")
