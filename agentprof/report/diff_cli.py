"""``agentprof diff BASE NEW``: did the agent get slower or less cache-friendly, figure by figure, tested; exit 1
on a significant regression past ``--fail-if-slower`` / ``--fail-if-reuse-drops`` (for CI). ``--save-baseline``
stores one side's figures for later comparisons; ``--format markdown`` / ``json`` are for CI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from agentprof.errors import AgentprofError

_CTX = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def sides(paths: tuple[str, ...], base: tuple[str, ...], new: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """BASE and NEW paths: two positional paths, or ``--base``/``--new`` (repeatable), never a mix."""
    if base or new:
        if paths:
            raise AgentprofError("give BASE and NEW either as two paths or with --base/--new, not both")
        if not base or not new:
            raise AgentprofError("--base and --new are both needed (each repeatable: one path per run or folder)")
        return list(base), list(new)
    if len(paths) != 2:
        raise AgentprofError(f"expected two paths, BASE and NEW, got {len(paths)}; for several files per side "
                             "use a folder each, or --base PATH --base PATH --new PATH ...")
    return [paths[0]], [paths[1]]


def _label(paths: list[str]) -> str:
    first = Path(paths[0]).name or paths[0]
    return first + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")


def _check_paths(paths: list[str]) -> None:
    for p in paths:
        if not Path(p).exists():
            raise AgentprofError(f"{p}: no such file or folder")


def run_diff(base_paths: list[str], new_paths: list[str], alpha: float, min_change_pct: float, correction: str,
             skip_bad_lines: bool, min_abs_ms: float = 1.0) -> Any:
    """Load both sides (BASE may be one stored baseline file) and compare them (the ``DiffResult``)."""
    from agentprof.analysis import baseline
    from agentprof.analysis.diff import diff
    from agentprof.importers import load_any

    _check_paths([*base_paths, *new_paths])
    show = sys.stderr.isatty()
    if len(base_paths) == 1 and baseline.is_baseline(base_paths[0]):
        base: Any = baseline.load(base_paths[0], label=_label(base_paths))
    else:
        base = load_any(base_paths, skip_bad_lines=skip_bad_lines, progress=show)
    new = load_any(new_paths, skip_bad_lines=skip_bad_lines, progress=show)
    return diff(base, new, alpha=alpha, min_change=min_change_pct / 100.0, correction=correction,
                labels=(_label(base_paths), _label(new_paths)), min_abs_s=min_abs_ms / 1e3)


def save_baseline(paths: list[str], out: str, skip_bad_lines: bool) -> None:
    """``agentprof diff --save-baseline FILE RUNS…``: one side's figures, stored."""
    from agentprof.analysis import baseline
    from agentprof.analysis.diff import figures
    from agentprof.importers import load_any
    from agentprof.outputs import checked_output

    if not paths:
        raise AgentprofError("--save-baseline FILE needs the runs to store: agentprof diff --save-baseline FILE "
                             "RUNS… (trace files or folders)")
    _check_paths(paths)
    checked_output(out, (".json",), "a baseline (.json)")
    f = figures(load_any(paths, skip_bad_lines=skip_bad_lines, progress=sys.stderr.isatty()), "RUNS", _label(paths))
    try:
        written = baseline.save(f, out)
    except OSError as e:
        raise AgentprofError(f"{out}: cannot write: {e.strerror or e}") from None
    click.echo(f"wrote {written}: {len(f.runs)} run(s), {sum(v.size for v in f.samples.values()):,} per-call "
               f"values of {len(f.samples)} figures, {written.stat().st_size:,} bytes")


def write_html(res: Any, failed: list[dict[str, Any]], out: str, title: str | None) -> Path:
    from agentprof.outputs import checked_output
    from agentprof.report.diff_page import write_diff_page

    checked_output(out, (".html", ".htm"), "an HTML page")
    try:
        return write_diff_page(out, res, failed, title=title)
    except OSError as e:
        raise AgentprofError(f"{out}: cannot write: {e.strerror or e}") from None


def report_diff(paths: tuple[str, ...], output: str | None, title: str | None, skip_bad_lines: bool,
                open_browser: bool) -> None:
    """``agentprof report --diff BASE NEW [-o FILE]``: the diff page (default ``reports/diff.html``)."""
    import webbrowser

    if len(paths) != 2:
        raise AgentprofError(f"report --diff needs exactly two paths, BASE and NEW (a file or folder each), got "
                             f"{len(paths)}")
    res = run_diff([paths[0]], [paths[1]], 0.01, 10.0, "holm", skip_bad_lines)
    out = write_html(res, [], output or str(Path("reports") / "diff.html"), title)
    click.echo(f"wrote {out} ({len(res.significant)} significant change(s) of {len(res.changes)} figures)")
    if open_browser:
        webbrowser.open(out.resolve().as_uri())


@click.command("diff", context_settings=_CTX)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--base", "base", multiple=True, metavar="PATH", help="A BASE trace file or folder (repeatable).")
@click.option("--new", "new", multiple=True, metavar="PATH", help="A NEW trace file or folder (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text",
              show_default=True, help="markdown: a table for a pull-request comment or $GITHUB_STEP_SUMMARY.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--save-baseline", "save_to", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Store the figures of PATHS (one side's runs) in FILE (.json) to compare against later: "
                   "agentprof diff FILE NEW.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the side-by-side page to this HTML file.")
@click.option("--fail-if-slower", "slower_pct", type=float, default=None, metavar="PCT",
              help="Exit 1 if a time figure (a tool's or model's calls, TTFT, gaps; wall and buckets with 2+ runs "
                   "a side) got significantly slower by more than PCT percent, or the output rate dropped by more "
                   "than PCT percent. Figures with too few calls to test: by the threshold alone.")
@click.option("--fail-if-reuse-drops", "reuse_pct", type=float, default=None, metavar="PCT",
              help="Exit 1 if prefix reuse or the provider cache share dropped significantly by more than PCT "
                   "percentage points.")
@click.option("--alpha", type=float, default=0.01, show_default=True,
              help="Significance level after the correction for testing many figures.")
@click.option("--min-change", "min_change_pct", type=float, default=10.0, show_default=True, metavar="PCT",
              help="A significant change must also move the figure by at least this many percent.")
@click.option("--min-abs-ms", "min_abs_ms", type=float, default=1.0, show_default=True, metavar="MS",
              help="... and a time figure by at least this many milliseconds.")
@click.option("--correction", type=click.Choice(["holm", "bh"]), default="holm", show_default=True,
              help="holm: family-wise error rate (any false flag); bh: Benjamini-Hochberg false discovery rate.")
@click.option("--title", default=None, help="Title of the HTML page.")
@click.option("--skip-bad-lines", is_flag=True, help="Skip unreadable records (counted) instead of stopping.")
def diff(paths: tuple[str, ...], base: tuple[str, ...], new: tuple[str, ...], fmt: str, as_json: bool,
         save_to: str | None, html_out: str | None, slower_pct: float | None, reuse_pct: float | None, alpha: float,
         min_change_pct: float, min_abs_ms: float, correction: str, title: str | None, skip_bad_lines: bool) -> None:
    """Compare two versions of an agent: what got slower or less cache-friendly, and is it significant?

    BASE and NEW are each a trace file or a folder of them (any format `agentprof analyze` reads), or BASE a
    baseline stored with --save-baseline; every top-level session is one run. Per call (each tool, each
    model's duration, TTFT and output rate, parse spans, orchestration gaps): the median call and Welch's t on
    the logs, runs as blocks, so one run a side is enough. Per run (wall, agent-active, buckets, call and token
    counts, prefix reuse, cache share): medians and Mann-Whitney U across runs (8+ runs a side). All
    corrected for the number of figures. Cache-miss causes only in NEW are listed. Definitions: docs/DIFF.md.

    \b
    Examples:
      agentprof diff traces/main/ traces/pr/ --fail-if-slower 20
      agentprof diff --save-baseline base.json traces/main/
      agentprof diff base.json traces/pr/ --format markdown --fail-if-slower 20
      agentprof diff --base run1.jsonl --base run2.jsonl \\
          --new run3.jsonl --new run4.jsonl --html diff.html
    """
    if save_to:
        if base or new:
            raise AgentprofError("--save-baseline FILE takes the runs of one side as paths, not --base/--new")
        save_baseline(list(paths), save_to, skip_bad_lines)
        return
    fmt = "json" if as_json else fmt
    b, n = sides(paths, base, new)
    for flag, v in (("--fail-if-slower", slower_pct), ("--fail-if-reuse-drops", reuse_pct),
                    ("--min-abs-ms", min_abs_ms)):
        if v is not None and v < 0:
            raise AgentprofError(f"{flag} must not be negative, got {v}")
    res = run_diff(b, n, alpha, min_change_pct, correction, skip_bad_lines, min_abs_ms)
    failed = res.failures(slower_pct, reuse_pct)
    if html_out:
        out = write_html(res, failed, html_out, title)
        click.echo(f"wrote {out}", err=fmt != "text")
    if fmt == "json":
        click.echo(json.dumps(res.to_dict(failed), indent=2, default=str))
    elif fmt == "markdown":
        from agentprof.report.diff_markdown import render_markdown

        click.echo(render_markdown(res, failed), nl=False)
    else:
        from agentprof.report.diff_terminal import show_diff

        show_diff(res, failed)
    if failed:
        from agentprof.safe_text import shown

        for f in failed:
            click.echo(f"FAIL {shown(f['line'], 600)}", err=fmt != "text")
        sys.exit(1)
