"""``agentprof import``: read agent logs (or agentprof traces) and write one agentprof trace."""

from __future__ import annotations

import json
import sys

import click

from agentprof.importers.detect import FORMATS

_LIST_MAX = 30  # files listed one per line in the human summary (--json lists all)


@click.command("import", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--from", "fmt", type=click.Choice(["auto", *FORMATS]), default="auto", show_default=True,
              metavar="FORMAT", help=f"Input format: auto (detected per file), {', '.join(FORMATS)}.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the trace here (.parquet, or .jsonl for agentprof JSONL).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--skip-bad-lines", is_flag=True, help="Skip unreadable records (counted) instead of stopping.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal).")
def import_cmd(paths: tuple[str, ...], fmt: str, output: str | None, as_json: bool, skip_bad_lines: bool,
               progress: bool | None) -> None:
    """Import the traces agents already leave behind into one agentprof trace.

    PATH is a file or a folder (searched recursively): Claude Code sessions (~/.claude/projects/<project>/,
    sub-agent files included), Codex rollouts (~/.codex/sessions/), OpenHands completion logs,
    mini-swe-agent and SWE-agent trajectories, Aider .aider.llm.history, kv-cache-tester traces, OTLP JSON
    (collector file exporter) or agentprof traces.

    \b
    Examples:
      agentprof import ~/.claude/projects/-home-me-repo/ -o traces/claude.parquet
      agentprof import ~/.codex/sessions/ --json
      agentprof import kv-cache-tester/traces/ --from kv-cache-tester \\
          -o traces/kvct.parquet
    """
    from agentprof.importers import load_any
    from agentprof.importers.summary import summarize
    from agentprof.outputs import checked_output, write_with
    from agentprof.trace.files import write

    out = checked_output(output, (".parquet", ".jsonl"), "an imported trace") if output else None
    show = sys.stderr.isatty() if progress is None else progress
    trace = load_any(list(paths), fmt=fmt, skip_bad_lines=skip_bad_lines, progress=show)
    if out is not None:
        write_with(out, lambda: write(trace, out))
    summary = summarize(trace)
    if output:
        summary["output"] = output
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    _print_human(summary)


def _print_human(s: dict) -> None:
    from rich.table import Table

    from agentprof.safe_text import console as safe_console
    from agentprof.safe_text import markup

    console = safe_console()
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    t.add_row("format", markup(s["format"]))
    t.add_row("files", f"{s['files']:,}")
    t.add_row("sessions", f"{s['sessions']:,}")
    t.add_row("model calls", f"{s['model_calls']:,} ({s['prompts_hashed']:,} prompts hashed)")
    t.add_row("tool calls", f"{s['tool_calls']:,}")
    t.add_row("waits", f"{s['waits']:,}")
    t.add_row("input tokens", f"{s['input_tokens']:,} (cache read {s['cache_read_tokens']:,}, "
              f"cache write {s['cache_write_tokens']:,})")
    t.add_row("output tokens", f"{s['output_tokens']:,}")
    if s["diagnostics"]:
        t.add_row("diagnostics", markup(", ".join(f"{k} {v}" for k, v in s["diagnostics"].items()), 1000))
    if s["skipped"]:
        t.add_row("skipped", f"{s['skipped']} bad line(s)/file(s)")
    console.print(t)
    files = s.get("file_formats") or {}
    if len(s.get("files_by_format") or {}) > 1 or s.get("skipped_files"):
        shown = list(files.items())[:_LIST_MAX]
        for path, fmt in shown:
            console.print(f"  {fmt:<16} {path}", highlight=False, markup=False, soft_wrap=True)
        if len(files) > len(shown):
            console.print(f"  … and {len(files) - len(shown):,} more file(s): " + ", ".join(
                f"{n:,} {f}" for f, n in s["files_by_format"].items()), highlight=False, markup=False, soft_wrap=True)
        for sk in s.get("skipped_files", [])[:_LIST_MAX]:
            console.print(f"  {'skipped':<16} {sk['path']}: {sk['reason']}", highlight=False, markup=False, soft_wrap=True)
        if len(s.get("skipped_files", [])) > _LIST_MAX:
            console.print(f"  … and {len(s['skipped_files']) - _LIST_MAX:,} more skipped (--json lists all)",
                          highlight=False, markup=False, soft_wrap=True)
    if "output" in s:
        console.print(f"wrote {markup(s['output'], None)}", highlight=False)
    else:
        console.print("[dim](nothing written; add -o FILE.parquet to save the trace)[/dim]")
