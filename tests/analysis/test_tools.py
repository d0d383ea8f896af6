"""Per-tool figures (``analysis.tools``): on a real Claude Code session each tool's count, summed time, p50 and
p95 match the spans themselves; ``analyze --json`` and the terminal carry them; the report's slowest-tools table
shows the same numbers; untimed and failed calls are counted."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from agentprof.analysis import analyze
from agentprof.analysis.tools import tools
from agentprof.importers import load_any
from agentprof.report.formats import fmt_duration
from agentprof.report.slowest import slow_tools

from ..cli_support import run
from .analysis_helpers import SAMPLES, TraceBuilder

SESSION = SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


@pytest.fixture(scope="module")
def session_json() -> dict:
    from agentprof.analysis.analyzer import dumps

    return json.loads(dumps(analyze(load_any([SESSION]))))


def test_analyze_json_names_each_tool_with_its_figures(session_json):
    figs = {t["name"]: t for t in session_json["tools"]}
    assert {"Bash", "Read"} <= figs.keys()
    spans = load_any([SESSION]).spans.filter(pl.col("kind") == "tool")
    for name in ("Bash", "Read"):
        mine = spans.filter(pl.col("name") == f"execute_tool {name}")
        d = ((mine.get_column("end_ns") - mine.get_column("start_ns")) / 1e9).drop_nulls().to_numpy()
        t = figs[name]
        assert t["count"] == mine.height > 0
        assert t["total_s"] == pytest.approx(d.sum())
        assert t["p50_s"] == pytest.approx(np.median(d)) and t["p95_s"] == pytest.approx(np.quantile(d, 0.95))
        assert t["p50_s"] <= t["p95_s"] <= t["max_s"]
        assert t["errors"] == int((mine.get_column("status") == "error").sum())
    totals = [t["total_s"] for t in session_json["tools"]]
    assert totals == sorted(totals, reverse=True)


def test_report_slowest_tools_are_the_analysis_figures(session_json):
    shown = {r["tool"]: r for r in slow_tools(load_any([SESSION]).spans)}
    for t in session_json["tools"]:
        r = shown[t["name"]]
        assert (r["calls"], r["errors"]) == (t["count"], t["errors"])
        assert r["total_s"] == pytest.approx(t["total_s"]) and r["median_s"] == pytest.approx(t["p50_s"])


def test_untimed_and_failed_calls_are_counted():
    b = TraceBuilder()
    b.session("s", 0, 10)
    b.span("s", "tool", 1, 2, name="execute_tool Bash")
    b.span("s", "tool", 2, 5, name="execute_tool Bash", **{"error.type": "tool_error"})
    b.span("s", "tool", 5, None, name="execute_tool Bash")
    b.span("s", "tool", 6, 6.5, name="execute_tool Read")
    tr = b.trace()
    tr.spans = tr.spans.with_columns(
        pl.when(pl.col("attributes").str.contains("tool_error")).then(pl.lit("error")).otherwise(pl.col("status"))
        .alias("status"))
    bash, read = tools(tr.spans)
    assert bash["name"] == "Bash" and (bash["count"], bash["untimed"], bash["errors"]) == (3, 1, 1)
    assert bash["total_s"] == pytest.approx(4.0) and bash["p50_s"] == pytest.approx(2.0)
    assert read["name"] == "Read" and read["count"] == 1 and read["p95_s"] == pytest.approx(0.5)


def test_analyze_terminal_lists_tools_by_total_time(capsys, session_json, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "analyze", str(SESSION), "--no-progress", "--misses", "0")
    assert code == 0
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Tools by total time"))
    rows = [line.split()[0] for line in lines[head + 3: head + 3 + len(session_json["tools"])]]
    assert rows == [t["name"] for t in session_json["tools"]][:len(rows)]
    bash = next(line for line in lines[head:] if line.startswith("Bash "))
    assert fmt_duration(next(t for t in session_json["tools"] if t["name"] == "Bash")["total_s"]) in bash
