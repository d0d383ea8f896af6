"""``agentprof diff BASE NEW``: did the agent get slower or less cache-friendly, figure by figure, tested; exit 1
on a significant regression past ``--fail-if-slower`` / ``--fail-if-reuse-drops`` (for CI)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from agentprof import safe_text
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


def run_diff(base_paths: list[str], new_paths: list[str], alpha: float, min_change_pct: float, correction: str,
             skip_bad_lines: bool) -> Any:
    """Load both sides and compare them (the ``DiffResult``)."""
    from agentprof.analysis.diff import diff
    from agentprof.importers import load_any

    for p in (*base_paths, *new_paths):
        if not Path(p).exists():
            raise AgentprofError(f"{p}: no such file or folder")
    show = sys.stderr.isatty()
    base = load_any(base_paths, skip_bad_lines=skip_bad_lines, progress=show)
    new = load_any(new_paths, skip_bad_lines=skip_bad_lines, progress=show)
    return diff(base, new, alpha=alpha, min_change=min_change_pct / 100.0, correction=correction,
                labels=(_label(base_paths), _label(new_paths)))


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
    res = run_diff([paths[0]], [paths[1]], 0.01, 5.0, "holm", skip_bad_lines)
    out = write_html(res, [], output or str(Path("reports") / "diff.html"), title)
    click.echo(f"wrote {out} ({len(res.significant)} significant change(s) of {len(res.changes)} figures)")
    if open_browser:
        webbrowser.open(out.resolve().as_uri())


@click.command("diff", context_settings=_CTX)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--base", "base", multiple=True, metavar="PATH", help="A BASE trace file or folder (repeatable).")
@click.option("--new", "new", multiple=True, metavar="PATH", help="A NEW trace file or folder (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the side-by-side page to this HTML file.")
@click.option("--fail-if-slower", "slower_pct", type=float, default=None, metavar="PCT",
              help="Exit 1 if a time figure (wall, agent-active, a bucket, a tool, TTFT) got significantly slower "
                   "by more than PCT percent, or the output rate dropped by more than PCT percent.")
@click.option("--fail-if-reuse-drops", "reuse_pct", type=float, default=None, metavar="PCT",
              help="Exit 1 if prefix reuse or the provider cache share dropped significantly by more than PCT "
                   "percentage points.")
@click.option("--alpha", type=float, default=0.01, show_default=True,
              help="Significance level after the correction for testing many figures.")
@click.option("--min-change", "min_change_pct", type=float, default=5.0, show_default=True, metavar="PCT",
              help="A significant change must also move the figure by at least this many percent.")
@click.option("--correction", type=click.Choice(["holm", "bh"]), default="holm", show_default=True,
              help="holm: family-wise error rate (any false flag); bh: Benjamini-Hochberg false discovery rate.")
@click.option("--title", default=None, help="Title of the HTML page.")
@click.option("--skip-bad-lines", is_flag=True, help="Skip unreadable records (counted) instead of stopping.")
def diff(paths: tuple[str, ...], base: tuple[str, ...], new: tuple[str, ...], as_json: bool, html_out: str | None,
         slower_pct: float | None, reuse_pct: float | None, alpha: float, min_change_pct: float, correction: str,
         title: str | None, skip_bad_lines: bool) -> None:
    """Compare two versions of an agent: what got slower or less cache-friendly, and is it significant?

    BASE and NEW are each a trace file or a folder of them (any format `agentprof analyze` reads); every
    top-level session is one run. Per figure (wall and agent-active time, model / tool / parse /
    orchestration / each wait reason, each tool, model calls and tokens per task, prefix reuse, provider
    cache share, TTFT, output rate): base, new, ratio and a Mann-Whitney U test across runs (two or more
    runs per side; 8+ recommended), else across calls and spans, corrected for the number of figures.
    Cache-miss causes found only in NEW are listed. Definitions: docs/DIFF.md.

    \b
    Examples:
      agentprof diff traces/main/ traces/pr/
      agentprof diff traces/main/ traces/pr/ --fail-if-slower 10 --fail-if-reuse-drops 5 --json
      agentprof diff --base run1.jsonl --base run2.jsonl --new run3.jsonl --new run4.jsonl --html diff.html
    """
    b, n = sides(paths, base, new)
    for flag, v in (("--fail-if-slower", slower_pct), ("--fail-if-reuse-drops", reuse_pct)):
        if v is not None and v < 0:
            raise AgentprofError(f"{flag} must not be negative, got {v}")
    res = run_diff(b, n, alpha, min_change_pct, correction, skip_bad_lines)
    failed = res.failures(slower_pct, reuse_pct)
    if html_out:
        out = write_html(res, failed, html_out, title)
        if not as_json:
            click.echo(f"wrote {out}", err=True)
    if as_json:
        click.echo(json.dumps(res.to_dict(failed), indent=2, default=str))
    else:
        from agentprof.report.diff_terminal import show_diff

        show_diff(res, failed)
    for f in failed:
        click.echo(f"FAIL {safe_text.shown(f['line'], 1000)}", err=as_json)
    if failed:
        sys.exit(1)
