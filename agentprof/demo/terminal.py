"""What ``agentprof demo`` prints: the captured run's outcome, the headline figures of both traces side by
side, the device what-if per system with the Amdahl bound, and what is simulated versus real."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentprof.demo.run import DemoResult
from agentprof.report.fit_width import Column, fitted_tables, natural_width
from agentprof.report.formats import fmt_duration, fmt_int, fmt_pct, fmt_tokens, fmt_x
from agentprof.safe_text import console as safe_console

_FMT = {"dur": fmt_duration, "pct": fmt_pct, "int": fmt_int, "tok": fmt_tokens, "x": fmt_x}


def _diffstat(diff: str) -> str:
    files = [ln[6:] for ln in diff.splitlines() if ln.startswith("+++ b/")]
    plus = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    minus = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    return f"{', '.join(files) or 'no file'} +{plus} −{minus}"


def _span_counts(spans: pl.DataFrame) -> str:
    kinds = dict(spans.group_by("kind").len().iter_rows())
    sub = spans.filter(pl.col("name").str.starts_with("execute_tool subprocess:")).height
    return (f"{spans.height} spans: {kinds.get('model', 0)} model calls, {kinds.get('tool', 0)} tool calls "
            f"({sub} of them child processes), {kinds.get('parse', 0)} JSON parses")


def outcome_view(r: DemoResult) -> RenderableType:
    """The captured run: did the agent fix the bug, what did it change, where is the trace."""
    a = r.agent
    t = Text()
    t.append("✓ ", style="bold green")
    t.append("the demo agent fixed the planted bug: ")
    t.append(f"{a.before.failed} of {a.before.ran} tests failed before, all {a.after.ran} pass after", style="bold")
    t.append(f" ({_diffstat(a.diff)}; agent run {fmt_duration(a.wall_s)})\n")
    t.append("  trace: ")
    t.append(str(a.trace_path), style="bold")
    t.append(f"  ({_span_counts(r.captured.trace.spans)})")
    return t


def figures_view(r: DemoResult, width: int = 80) -> RenderableType:
    """The headline figures of both traces in columns (stacked under each other when ``width`` is short)."""
    cols = [Column("", "left", name=True)] + [Column(label, wrap=True)
                                              for label in (r.captured.label, r.imported.label)]
    rows = [[row["label"], *(_FMT.get(row["fmt"], fmt_int)(v) for v in row["values"])]
            for row in r.compare.get("table") or []]
    return Group(*fitted_tables("Where the time went", cols, rows, width))


def whatif_view(r: DemoResult, width: int = 80) -> RenderableType:
    """Task time per system for both traces, with the task and model-call speed-ups and the Amdahl bound: one
    table per trace, side by side when ``width`` allows."""
    per_trace: list[list[list[Any]]] = [[], []]
    for row in r.compare.get("whatif") or []:
        for k, c in enumerate(row["cells"][:2]):
            if c is None:
                per_trace[k].append([Text(str(row["name"])), "—", "", ""])
            elif c.get("error"):
                per_trace[k].append([Text(str(row["name"])),
                                     Text("not replayed: " + str(c["error"]), style="red"), "", ""])
            elif row["name"] == "recorded":
                per_trace[k].append([Text("recorded"), fmt_duration(c.get("e2e_s")), "", ""])
            else:
                per_trace[k].append([Text(str(row["name"])), fmt_duration(c.get("e2e_s")), fmt_x(c.get("speedup")),
                                     fmt_x(c.get("model_speedup"))])
    for k, tr in enumerate((r.captured, r.imported)):
        rec = getattr(tr.replay, "recorded", None)
        e2e, bound = getattr(rec, "amdahl_e2e_s", None), getattr(rec, "amdahl_bound", None)
        per_trace[k].append([Text("Amdahl bound", style="bold"), fmt_duration(e2e), fmt_x(bound), ""])
    cols = [Column("system", "left", name=True), Column("task time"), Column("task ×"), Column("calls ×")]
    tables = [t for k, tr in enumerate((r.captured, r.imported))
              for t in fitted_tables(f"Device what-if · {tr.label}", cols, per_trace[k], width)]
    note = Text("task ×: the whole task's speed-up; calls ×: its model calls'; Amdahl bound: the task with model "
                "calls taking no time", style="dim")
    if len(tables) == 2 and sum(natural_width(t) for t in tables) + 4 <= width:
        grid = Table.grid(padding=(0, 4))
        grid.add_row(*tables)
        return Group(grid, note)
    return Group(*tables, note)


def consistency_line(r: DemoResult) -> Text | None:
    """Replaying the captured run on the system its latencies came from should give back its model time."""
    rows = getattr(r.captured.replay, "systems", None) or []
    row = next((s for s in rows if s.name == r.serve_on and s.model_calls_speedup), None)
    if row is None:
        return None
    return Text(f"Check: replayed on {r.serve_on}, the system its latencies came from, the captured run's model "
                f"calls take {fmt_x(1 / row.model_calls_speedup)} their recorded time (the recorded time also holds "
                "HTTP, streaming and SDK work the device model leaves out).", style="dim")


def disclosure_view(r: DemoResult) -> Panel:
    lines = Text()
    for i, line in enumerate(r.disclosure):
        if i:
            lines.append("\n")
        head, _, rest = line.partition(": ")
        lines.append("• " + head + ": ", style="bold yellow" if head.startswith("Simulated") else "bold green")
        lines.append(rest)
    return Panel(lines, title="What is simulated, what is real", title_align="left", border_style="yellow")


def footer_view(r: DemoResult) -> Text:
    t = Text()
    size = r.report_path.stat().st_size if r.report_path.exists() else 0
    t.append("wrote ")
    t.append(str(r.report_path), style="bold")
    t.append(f" ({size / 1e6:.1f} MB, one file, opens offline: {r.report_path.resolve().as_uri()})\n")
    tm = r.timings
    t.append(f"took {fmt_duration(tm.get('total_s'))}: agent run {fmt_duration(tm.get('agent_run_s'))}, import "
             f"{fmt_duration(tm.get('import_s'))}, analysis + replay {fmt_duration(tm.get('stages_s'))}, "
             f"calibration check {fmt_duration(tm.get('calibration_s'))}, report {fmt_duration(tm.get('report_s'))}",
             style="dim")
    return t


def show_result(r: DemoResult, console: Console | None = None) -> None:
    """Print the demo's outcome and headline figures."""
    con = console or safe_console()
    width = con.width
    parts: list[RenderableType] = [outcome_view(r), figures_view(r, width), whatif_view(r, width)]
    check = consistency_line(r)
    if check is not None:
        parts.append(check)
    parts += [disclosure_view(r), footer_view(r)]
    con.print(Group(*parts))
