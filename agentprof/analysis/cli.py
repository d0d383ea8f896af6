"""``agentprof analyze`` (time split, redundancy, hit rates, cache misses) and ``agentprof cachesim``."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from agentprof.distributed.options import cluster_options
from agentprof.errors import AgentprofError
from agentprof.report.formats import (
    fmt_capture_cost,
    fmt_count,
    fmt_duration,
    fmt_fine,
    fmt_pct,
    fmt_x,
    short_file,
    short_frame,
    short_ids,
)

_CTX = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def _load(paths: tuple[str, ...], skip_bad_lines: bool, progress: bool | None, workers: int | None = None,
          scheduler: str | None = None):
    from agentprof.distributed.options import load

    show = sys.stderr.isatty() if progress is None else progress
    return load(paths, workers, scheduler, skip_bad_lines, show)


@click.command("analyze", context_settings=_CTX)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the full result as one JSON object.")
@click.option("--skip-bad-lines", is_flag=True, help="Skip unreadable records (counted) instead of stopping.")
@click.option("--misses", "n_misses", type=click.IntRange(min=0), default=10, show_default=True,
              help="Cache-miss causes to list in the terminal output (every miss is in --json).")
@click.option("--progress/--no-progress", default=None, help="Import progress bar on stderr (default: on a terminal).")
@cluster_options
@click.option("--batch-mb", type=click.FloatRange(min=0, min_open=True), default=None, metavar="MB",
              help="Analyze in partitions of about MB of input, one at a time (bounded memory; with --workers or "
                   "--scheduler, the partition size; default 256).")
def analyze(paths: tuple[str, ...], as_json: bool, skip_bad_lines: bool, n_misses: int, progress: bool | None,
            workers: int | None, scheduler: str | None, batch_mb: float | None) -> None:
    """Where the time went, how much of each prompt repeated earlier prompts, and why caches missed.

    PATH is an agentprof trace, a log another agent left behind (Claude Code, Codex, OpenHands,
    mini-swe-agent, kv-cache-tester, ...) or a folder of them; foreign files are imported on the fly.
    Reports, per session and for the whole corpus: the time split (model with TTFT/decode, tool, parse,
    orchestration, wait) along the critical path, the Amdahl bound (task time if model calls took no time),
    prefix reuse per call, kv-cache-tester's per-conversation hit rate next to the stricter share, provider
    cache reads, and the cache misses with their likely causes and fixes. Definitions: docs/ANALYSIS.md.

    \b
    Examples:
      agentprof analyze traces/mine.parquet
      agentprof analyze ~/.claude/projects/-home-me-myrepo/ --json > analysis.json
      agentprof analyze kv-cache-tester/traces/ --misses 0
    """
    from agentprof.analysis import analyze as run
    from agentprof.analysis.analyzer import dumps

    if workers or scheduler or batch_mb:
        from agentprof.distributed.cluster import DEFAULT_BATCH_MB
        from agentprof.distributed.run import analyze_partitioned

        result = analyze_partitioned(list(paths), workers, scheduler, batch_mb or DEFAULT_BATCH_MB, skip_bad_lines)
        if result.sessions.height == 0:
            raise AgentprofError(f"{', '.join(paths)}: no spans to analyze (empty trace)")
    else:
        trace = _load(paths, skip_bad_lines, progress)
        if trace.spans.height == 0:
            raise AgentprofError(f"{', '.join(paths)}: no spans to analyze (empty trace)")
        result = run(trace)
    if as_json:
        click.echo(dumps(result))
        return
    _print_analysis(result.to_dict(), n_misses)


def _print_analysis(d: dict[str, Any], n_misses: int) -> None:
    from agentprof.report.fit_width import Column, fitted_tables
    from agentprof.safe_text import console as safe_console
    from agentprof.safe_text import markup, text
    from agentprof.trace.waits import HUMAN_REASONS

    con = safe_console()
    src = d["source"]
    con.print(f"[bold]{fmt_count(d['sessions'], 'session')}[/bold] ({fmt_count(d['conversations'], 'conversation')}), "
              f"[bold]{d['model_calls']:,} model calls[/bold] — {markup(src['format'])}, {src['files']} file(s), "
              f"tokenizer {markup(src['tokenizer'])}{'' if src['tokenizer_exact'] else ' (approximate)'}, "
              f"{src['block_size']}-token blocks")
    t = d["time"]
    wall = t["wall_s"] or 0.0
    sh = t["shares"]
    active = t["agent_active_s"] or 0.0
    human = wall - active
    # the TTFT / decode split covers the calls that recorded a first token; the rest of the model time is shown
    # as not split rather than as a 0 s prefill
    split = (t["model_ttft_s"] or 0.0) + (t["model_decode_s"] or 0.0)
    unsplit = (t["model_s"] or 0.0) - split
    model_rows: list[tuple[str, Any, str | None]] = [("  TTFT / prefill", t["model_ttft_s"], None),
                                                     ("  decode", t["model_decode_s"], None)] if split > 0 else []
    if unsplit > 1e-3:
        model_rows.append(("  no first token recorded", unsplit, None))
    rows = [("model", t["model_s"], "model"), *model_rows, ("tool", t["tool_s"], "tool"),
            ("parse", t["parse_s"], "parse"), ("orchestration", t["orchestration_s"], "orchestration"),
            ("  glue (outside spans)", t["glue_s"], None)]
    if (t.get("startup_s") or 0.0) > 1e-3:
        rows.append(("    start-up (before 1st span)", t["startup_s"], None))
    rows.append(("wait", t["wait_s"], "wait"))
    rows += [(f"  wait: {k}", v, None) for k, v in t["waits_by_reason"].items()]
    cells: list[list[Any]] = []
    for name, v, key in rows:
        reason = name[len("  wait: "):] if name.startswith("  wait: ") else None
        of_active = sh["of_agent_active"].get(key) if key else (
            "—" if reason in HUMAN_REASONS else fmt_pct(v / active if active else None))
        cells.append([text(name), fmt_duration(v), fmt_pct(v / wall if wall else None),
                      of_active if isinstance(of_active, str) else fmt_pct(of_active)])
    cells.append(["[bold]wall[/bold]", fmt_duration(wall), fmt_pct(1.0) if wall else "—", ""])
    cells.append(["[bold]agent-active[/bold]", fmt_duration(active), fmt_pct(active / wall if wall else None),
                  fmt_pct(1.0) if active else "—"])
    cells.append(["critical path", fmt_duration(t["critical_path_s"]),
                  fmt_pct(t["critical_path_s"] / wall if wall else None), ""])
    cells.append(["sum of spans", fmt_duration(t["span_sum_s"]), "", ""])
    cells.append(["[bold]Amdahl bound[/bold]", fmt_duration(t["amdahl_bound_s"]),
                  fmt_pct(t["amdahl_bound_s"] / wall if wall else None), ""])
    cells.append(["  agent-active clock", fmt_duration(t["amdahl_bound_active_s"]), "",
                  fmt_pct(t["amdahl_bound_active_s"] / active if active else None)])
    for tb in fitted_tables("Time (critical path; buckets sum to wall)",
                            [Column("bucket", "left", name=True), Column("time"), Column("of wall"),
                             Column("of active")], cells, con.width):
        con.print(tb)
    con.print(f"[dim]active: agent-active, the wall minus user turns, approvals and idle gaps "
              f"({fmt_duration(human)} here). Amdahl bound: the wall with model calls taking no time; model calls "
              f"bound the speed-up at {fmt_x(sh['of_wall']['max_speedup'])} of wall time and "
              f"{fmt_x(sh['of_agent_active']['max_speedup'])} of agent-active time.[/dim]", highlight=False)
    f = d.get("failures") or {}
    if f.get("model_calls") or f.get("tool_calls"):
        kinds = ", ".join(f"{g['count']:,} {markup(g['error_type'])}"
                          + (f" ({markup(g['kind'])})" if g["kind"] != "model" else "")
                          for g in f["by_error_type"][:5])
        con.print(f"[bold]failed calls:[/bold] {f['model_calls']:,} model ({fmt_duration(f['model_s'])}), "
                  f"{f['tool_calls']:,} tool ({fmt_duration(f['tool_s'])}) — {kinds}", highlight=False)
    pp = f.get("partial_parses") or {}
    if pp.get("count"):
        con.print(f"partial JSON parses: {pp['count']:,} attempts by a library on streamed arguments "
                  f"({pp['incomplete']:,} on text not yet complete, {fmt_duration(pp['time_s'])}): parse time, not "
                  "failures", highlight=False)
    _print_tools(con, d.get("tools") or [])
    co = d.get("capture_overhead")
    if co:
        con.print(fmt_capture_cost(co), highlight=False)
    _print_cpu(con, d)
    r = d["redundancy"]
    quants = ("mean", "median", "p10", "p25", "p75", "p90")
    red_rows = []
    for key, label in (("prefix_reuse_prev", "reuse vs previous call"),
                       ("prefix_reuse_prev_late", "  after the 10th call"),
                       ("best_reuse", "best earlier call"),
                       ("session_hit_rate", "kv-cache-tester hit rate"),
                       ("strict_hit_share", "  strict (all blocks)"),
                       ("provider_cache_read_share", "provider cache read")):
        v = r[key]
        red_rows.append([label, f"{v['n']:,}", *(fmt_pct(v[q]) for q in quants)])
    for tb in fitted_tables("Prompt redundancy (per call; hit rates per conversation)",
                            [Column("metric", "left", name=True), Column("n"), *(Column(q) for q in quants)],
                            red_rows, con.width):
        con.print(tb)
    tok = r["tokens"]
    line = (f"hashed prompt tokens {tok['prompt']:,} "
            f"(estimated, {markup(d.get('source', {}).get('tokenizer') or 'offline tokenizer')})")
    if tok["input"]:
        line += f"; provider input tokens {tok['input']:,} (as reported)"
    line += f"; reusable {tok['reusable']:,} (estimated)"
    if r["provider_cache_read_share_weighted"] is not None:
        line += (f"; provider cached {tok['cached']:,} (as reported; provider cache read share "
                 f"{fmt_pct(r['provider_cache_read_share_weighted'])}, token-weighted)"
                 f"; reusable minus cached {tok['gap']:,}")
    con.print(line, highlight=False)
    sess = d["per_session"]
    if sess:
        srows = []
        shown = sorted(sess, key=lambda x: -(x.get("wall_s") or 0))[:20]
        sids, cut = short_ids([str(s["session_id"]) for s in shown])
        for s, sid in zip(shown, sids, strict=True):
            srows.append([text(sid), text(s["role"]), f"{s['model_calls']:,}",
                          fmt_duration(s.get("wall_s") or 0.0), fmt_duration(s.get("model_s") or 0.0),
                          fmt_duration(s.get("tool_s") or 0.0), fmt_duration(s.get("wait_s") or 0.0),
                          fmt_pct(s.get("prefix_reuse_prev_median")), fmt_pct(s.get("session_hit_rate")),
                          f"{s['cache_misses']:,}"])
        cols = [Column("session", "left", name=True), Column("role", "left")] + [Column(c) for c in (
            "calls", "wall", "model", "tool", "wait", "reuse", "hit rate", "misses")]
        for tb in fitted_tables(f"Sessions ({min(len(sess), 20)} of {len(sess)}, longest first)", cols, srows,
                                con.width, caption="session ids cut to 8 characters; whole in --json" if cut else None):
            con.print(tb)
    misses = d["cache_misses"]
    if misses and n_misses > 0:
        _print_misses(con, misses, n_misses)
    _print_notes(con, [dg.get("message", "") for dg in d["diagnostics"]],
                 [dg.get("kind", "") for dg in d["diagnostics"]])


def _print_misses(con: Any, misses: list[dict[str, Any]], n_groups: int) -> None:
    """The cache misses grouped by their most likely cause: the calls, the cached share of what was reusable and
    the fix once per group (every miss with all its causes is in --json). Calls are numbered from 1, as in the
    report."""
    from agentprof.analysis.misses import by_cause
    from agentprof.safe_text import markup

    groups = by_cause(misses)
    con.print(f"[bold]Cache misses[/bold]: {len(misses):,} in {len(groups):,} cause(s)"
              + (f", the {n_groups} largest" if len(groups) > n_groups else "") + "; each in --json", highlight=False)
    for g in groups[:n_groups]:
        ms = g["misses"]
        calls = [f"{m['call_index'] + 1}" for m in ms if isinstance(m.get("call_index"), int)]
        where = f" in {g['sessions']:,} sessions" if g["sessions"] > 1 else ""
        shown = ", ".join(calls[:8]) + (f" and {len(calls) - 8:,} more" if len(calls) > 8 else "")
        con.print(f"  [bold]{markup(g['cause'])}[/bold] ({g['score']:.2f}): {len(ms):,} call(s){where}"
                  + (f": {shown}" if shown and g["sessions"] == 1 else ""), highlight=False)
        read = [(m["cached_tokens"], m["reusable_tokens"]) for m in ms
                if m.get("cached_tokens") is not None and m.get("reusable_tokens") is not None]
        if read:
            lo, hi = min(r for _, r in read), max(r for _, r in read)
            got = sum(c for c, _ in read) / max(sum(r for _, r in read), 1)
            con.print(f"    provider read {got:.0%} of {lo:,}" + (f"–{hi:,}" if hi != lo else "")
                      + " reusable tokens", highlight=False)
        first = max(ms[0].get("causes") or [{}], key=lambda c: c.get("score") or 0)
        if first.get("detail") and (len(ms) == 1 or not read):
            con.print(f"    {markup(first['detail'], 1000)}", highlight=False)
        if g["fix"]:
            con.print(f"    fix: {markup(g['fix'], 1000)}", highlight=False)


TOP_TOOLS = 15


def _print_tools(con: Any, tools: list[dict[str, Any]]) -> None:
    """The tools by total time (the analysis' ``tools``: summed span time, so parallel calls each count)."""
    from agentprof.report.fit_width import Column, fitted_tables
    from agentprof.safe_text import text

    if not tools:
        return
    rows = [[text(x["name"]), f"{x['count']:,}", fmt_duration(x["total_s"]), fmt_duration(x["p50_s"]),
             fmt_duration(x["p95_s"]), fmt_duration(x["max_s"]), f"{x['errors']:,}"] for x in tools[:TOP_TOOLS]]
    title = f"Tools by total time ({min(len(tools), TOP_TOOLS)} of {len(tools)})"
    cols = [Column("tool", "left", name=True)] + [Column(c) for c in ("calls", "total", "p50", "p95", "max",
                                                                       "errors")]
    for tb in fitted_tables(title, cols, rows, con.width, caption="summed span time (parallel calls each count); "
                                                                  "all tools in --json"):
        con.print(tb)


TOP_HOTSPOTS = 15


def _print_cpu(con: Any, d: dict[str, Any]) -> None:
    """CPU-bound shares of orchestration and tools, and the top sampled functions (captured traces)."""
    from agentprof.report.fit_width import Column, fitted_tables
    from agentprof.safe_text import shown, text

    cb = d.get("cpu_bound")
    if not cb or cb.get("orchestration_cpu_s") is None:
        return
    err = cb.get("orchestration_cpu_err_s")
    pm = f" ± {fmt_fine(err)}" if err else ""
    con.print(f"orchestration CPU: {fmt_fine(cb['orchestration_cpu_s'])}{pm} on a CPU, "
              f"{fmt_fine(cb['orchestration_busy_s'])} "
              f"on or waiting for one, of {fmt_fine(cb['orchestration_wall_s'] or 0.0)}: "
              f"[bold]{fmt_pct(cb['orchestration_cpu_share'])} CPU-bound[/bold]"
              + ("" if cb.get("sampled") else " (not sampled: capture with --sample to see which functions)"),
              highlight=False)
    if cb["tools"]:
        rows = [[text(t["tool"]), f"{t['calls']:,}", fmt_fine(t["wall_s"]), fmt_fine(t["cpu_s"]),
                 fmt_pct(t["cpu_bound_share"])] for t in cb["tools"][:TOP_HOTSPOTS]]
        for tb in fitted_tables("Tools: CPU-bound share", [Column("tool", "left", name=True), Column("calls"),
                                                           Column("wall"), Column("CPU"), Column("CPU-bound")],
                                rows, con.width, caption="CPU-bound: CPU time (child processes included) plus time "
                                                         "waiting for a CPU, over wall time"):
            con.print(tb)
    hs = d.get("hotspots") or []
    if hs:
        cwd = os.getcwd()
        rows = []
        for h in hs[:TOP_HOTSPOTS]:
            cell = text(short_frame(str(h["frame"])))  # the function, its file (shortened) dim under it
            cell.append("\n" + shown(short_file(str(h["file"]), cwd)), style="dim")
            rows.append([cell, text(h["where"]), fmt_fine(h["self_s"]), fmt_fine(h["self_cpu_s"]),
                         fmt_fine(h["total_s"])])
        cols = [Column("function / file", "left", name=True), Column("where", "left", name=True), Column("self"),
                Column("on CPU"), Column("total")]
        for tb in fitted_tables(f"Hotspots: top {min(len(hs), TOP_HOTSPOTS)} functions by sampled self time "
                                "(samples and whole paths in --json)", cols, rows, con.width,
                                caption="self: sampled in the function itself; on CPU: of that, running (not "
                                        "waiting); total: with what it called"):
            con.print(tb)


def _print_notes(con: Any, messages: list[str], kinds: list[str], per_kind: int = 3) -> None:
    """Diagnostics as ``note:`` lines, at most ``per_kind`` of each kind (the rest counted; all are in --json)."""
    from agentprof.safe_text import markup

    shown: dict[str, int] = {}
    for msg, kind in zip(messages, kinds, strict=True):
        shown[kind] = shown.get(kind, 0) + 1
        if shown[kind] <= per_kind:
            con.print(f"[yellow]note:[/yellow] {markup(msg, 1000)}", highlight=False)
    for kind, n in shown.items():
        if n > per_kind:
            con.print(f"[yellow]note:[/yellow] and {n - per_kind} more {markup(kind or 'notes')} (see --json)",
                      highlight=False)


def _parse_tiers(values: tuple[str, ...]) -> list[Any]:
    from agentprof.analysis.cachesim import Tier
    from agentprof.analysis.units import parse_size

    tiers = []
    for v in values:
        name, sep, size = v.partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise AgentprofError(f"--tier {v!r}: expected NAME=SIZE, e.g. --tier cpu=64GiB")
        if name not in ("hbm", "cpu", "disk"):
            raise AgentprofError(f"--tier {v!r}: tier must be hbm, cpu or disk")
        tiers.append(Tier(name, parse_size(size)))
    return tiers


@click.command("cachesim", context_settings=_CTX)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--model", required=True,
              help="Served model for KV bytes per token (catalog key or alias, e.g. gpt-oss-120b, deepseek-r1, "
                   "kimi-k2.5, mistral-nemo-12b; closed models map to a stand-in, stated in the output).")
@click.option("--tier", "tier_opts", multiple=True, metavar="NAME=SIZE",
              help="Cache tier and its capacity per TP rank (hbm, cpu, disk; e.g. cpu=64GiB, disk=2TB, "
                   "cpu=unlimited). Repeatable. Default: LMCache's default cpu=5GiB; unlimited in provider mode.")
@click.option("--block", type=click.IntRange(min=1), default=None,
              help="Chunk size in tokens (multiple of the trace's block size). Default 256 (LMCache); the "
                   "trace's block size in provider mode.")
@click.option("--policy", type=click.Choice(["lru", "lfu", "fifo"]), default="lru", show_default=True,
              help="Eviction policy (LRU touches chunks in reverse, as LMCache's engine does).")
@click.option("--ttl", "ttl", default=None, metavar="DURATION",
              help="Entries expire this long after last use (e.g. 5m, 1h). Default: none; 5m in provider mode.")
@click.option("--provider", type=click.Choice(["anthropic", "openai"]), default=None,
              help="Provider prompt-cache mode: TTL refreshed on use, minimum cacheable prompt, cache per model.")
@click.option("--min-tokens", type=click.IntRange(min=0), default=None,
              help="Prompts shorter than this are neither looked up nor stored (provider default 1024).")
@click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True, help="Tensor-parallel degree (capacity is per rank).")
@click.option("--kv-bytes", type=click.FloatRange(min=0, min_open=True), default=2.0, show_default=True, help="Bytes per KV element (2 = bf16, 1 = fp8).")
@click.option("--sweep/--no-sweep", default=True, show_default=True,
              help="Hit rate against capacity of a single tier, and the capacity reaching 90% of unlimited.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--skip-bad-lines", is_flag=True, help="Skip unreadable records (counted) instead of stopping.")
@click.option("--progress/--no-progress", default=None, help="Import progress bar on stderr (default: on a terminal).")
@cluster_options
def cachesim(paths: tuple[str, ...], model: str, tier_opts: tuple[str, ...], block: int | None, policy: str,
             ttl: str | None, provider: str | None, min_tokens: int | None, tp: int, kv_bytes: float, sweep: bool,
             as_json: bool, skip_bad_lines: bool, progress: bool | None, workers: int | None,
             scheduler: str | None) -> None:
    """Replay a trace's prompts through an LMCache-like KV cache (or a provider prompt cache).

    Sessions are interleaved on their recorded timestamps, so concurrent sessions compete for capacity.
    Mirrors LMCache 0.5: chained 256-token chunks, prefix-only hits, partial tail never cached, prompt
    tokens only, reverse-order LRU, capacity = floor(bytes / align_up(chunk bytes, 4096)) per rank, tier
    lookup hbm → cpu → disk with loads charged per tier. Reports the token hit rate per tier, bytes loaded,
    evictions and the capacity at which the hit rate reaches 90% of its unlimited value.

    \b
    Examples:
      agentprof cachesim traces/mine.parquet --model gpt-oss-120b
      agentprof cachesim kv-cache-tester/traces/ --model deepseek-r1 --tp 8 \\
          --tier hbm=20GiB --tier cpu=200GiB
      agentprof cachesim ~/.claude/projects/-home-me-repo/ --model kimi-k2.5 \\
          --provider anthropic --ttl 5m
    """
    from agentprof.analysis.cachesim import Tier, capacity_sweep, simulate
    from agentprof.analysis.provider_cache import ANTHROPIC_TTL_S, OPENAI_TTL_S
    from agentprof.analysis.units import parse_duration

    # one shared cache couples every session: the cluster imports, the simulation runs here (docs/ANALYSIS.md)
    trace = _load(paths, skip_bad_lines, progress, workers, scheduler)
    if trace.spans.height == 0:
        raise AgentprofError(f"{', '.join(paths)}: no spans to simulate (empty trace)")
    is_provider = provider is not None
    tiers = _parse_tiers(tier_opts) if tier_opts else ([Tier("provider", None)] if is_provider
                                                        else [Tier("cpu", 5 * 1024 ** 3)])
    blk = block if block is not None else (int(trace.meta.block_size) if is_provider else 256)
    ttl_s = parse_duration(ttl) if ttl else ((ANTHROPIC_TTL_S if provider == "anthropic" else OPENAI_TTL_S)
                                             if is_provider else None)
    min_tok = min_tokens if min_tokens is not None else (1024 if is_provider else 0)
    res = simulate(trace, model, tiers, block=blk, policy=policy, ttl_s=ttl_s, provider=is_provider,
                   min_cacheable_tokens=min_tok, tp=tp, kv_dtype_bytes=kv_bytes)
    sw = capacity_sweep(trace, model, block=blk, policy=policy, ttl_s=ttl_s, provider=is_provider,
                        min_cacheable_tokens=min_tok, tp=tp, kv_dtype_bytes=kv_bytes) if sweep else None
    out = {"simulation": res.to_dict(), "sweep": sw.to_dict() if sw else None,
           "defaults": {"tiers": "LMCache default cpu=5GiB" if not tier_opts and not is_provider else None}}
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
        return
    _print_sim(out)


def _print_sim(out: dict[str, Any]) -> None:
    from agentprof.analysis.units import format_bytes
    from agentprof.report.fit_width import Column, fitted_tables
    from agentprof.safe_text import console as safe_console
    from agentprof.safe_text import markup

    con = safe_console()
    s = out["simulation"]
    con.print(f"[bold]{s['model_calls']:,} model calls[/bold], {s['prompt_tokens']:,} prompt tokens; model "
              f"{markup(s['model'])} ({format_bytes(s['chunk_bytes_per_rank'])} per {s['block']}-token chunk per rank, "
              f"TP {s['tp']}); policy {s['policy']}" + (f", TTL {s['ttl_s']:.0f} s" if s["ttl_s"] else "")
              + (" — provider prompt-cache mode" if s["provider"] else ""), highlight=False)
    if s["model_note"]:
        con.print(f"[yellow]stand-in:[/yellow] {markup(s['model_note'], 1000)}", highlight=False)
    if out["defaults"]["tiers"]:
        con.print(f"tiers: {out['defaults']['tiers']} (set --tier to change)")
    rows = [[tr["name"], format_bytes(tr["capacity_bytes"]),
             "—" if tr["capacity_chunks"] is None else f"{tr['capacity_chunks']:,}", f"{tr['hit_tokens']:,}",
             fmt_pct(tr["hit_rate"]), format_bytes(tr["bytes_loaded"]), f"{tr['evictions']:,}"] for tr in s["tiers"]]
    cols = [Column("tier", "left", name=True)] + [Column(c) for c in (
        "capacity/rank", "chunks", "hit tokens", "hit rate", "bytes loaded", "evictions")]
    for tb in fitted_tables(f"Token hit rate {s['hit_rate']:.1%}", cols, rows, con.width):
        con.print(tb)
    pr = s["per_request_hit_rate"]
    con.print(f"per-request hit rate: median {fmt_pct(pr['median'])}, p10 {fmt_pct(pr['p10'])}, p90 {fmt_pct(pr['p90'])}")
    sw = out["sweep"]
    if sw:
        rows = [[format_bytes(p["capacity_bytes"]), "—" if p["capacity_chunks"] is None else f"{p['capacity_chunks']:,}",
                 fmt_pct(p["hit_rate"])] for p in sw["points"]]
        for tb in fitted_tables("Single-tier capacity sweep", [Column("capacity/rank"), Column("chunks"),
                                                               Column("hit rate")], rows, con.width):
            con.print(tb)
        con.print(f"90% of the unlimited hit rate ({fmt_pct(sw['unlimited_hit_rate'])}) needs "
                  f"[bold]{format_bytes(sw['capacity_at_target_bytes'])}[/bold] per rank "
                  f"({sw['capacity_at_target_chunks']:,} chunks)")
    _print_notes(con, list(s["diagnostics"]), ["simulation"] * len(s["diagnostics"]))
