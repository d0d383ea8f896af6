"""Terminal output at 80 and 120 columns: no line wider than the terminal, no figure cut with ``…`` and none
wrapped, through the real command line (``replay``, ``analyze``, ``report``, ``devices list``); and the stacking
helper itself: every cell of a too-wide table is still shown, in as few tables as fit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agentprof.report.fit_width import Column, fitted_tables

from ..cli_support import run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "traces" / "samples"
KV = SAMPLES / "kv-cache-tester"
SESSION = SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
DURATION = re.compile(r"\b\d+ [hm] \d\d [ms]\b")


SPLIT_FIGURE = (re.compile(r"\d$"), re.compile(r"(%|×|[hmsd]\b|ms\b|µs\b|min\b|[KMGTP]i?B\b|[kMGT]?Wh?\b)"))
SPLIT_DURATION = (re.compile(r"\d [hmd]$"), re.compile(r"\d"))


def split_figures(out: str) -> list[str]:
    """Line ends that split a figure: a number at the end of a line whose unit starts the next (``1`` / ``%``),
    or a duration's first part at the end of a line and its next part starting the next (``2 h`` / ``36 m``)."""
    lines = [line.rstrip() for line in out.splitlines()]
    return [f"{a[-12:]!r} / {b.lstrip()[:12]!r}" for a, b in zip(lines, lines[1:], strict=False)
            for end, start in (SPLIT_FIGURE, SPLIT_DURATION) if end.search(a) and start.match(b.lstrip())]


def _readable(out: str, width: int) -> None:
    assert out.strip()
    wide = [line for line in out.splitlines() if len(line) > width]
    assert not wide, f"{len(wide)} line(s) wider than {width}: {wide[:3]}"
    assert "…" not in out, [line for line in out.splitlines() if "…" in line][:3]
    assert not split_figures(out), split_figures(out)[:3]


def _render(tables, width: int) -> str:
    con = Console(record=True, width=width, color_system=None)
    for t in tables:
        con.print(t)
    return con.export_text()


def test_a_table_too_wide_stacks_its_columns_and_keeps_every_cell():
    cols = [Column("system", "left", name=True)] + [Column(f"figure {i}") for i in range(9)]
    rows = [[f"system-{r}"] + [f"{r * 10 + i} h {i:02d} m" for i in range(9)] for r in range(3)]
    one = fitted_tables("wide", cols, rows, 200)
    assert len(one) == 1
    stacked = fitted_tables("wide", cols, rows, 60)
    assert len(stacked) > 1
    out = _render(stacked, 60)
    _readable(out, 60)
    for r in rows:
        for cell in r[1:]:
            assert cell in out  # whole, on one line
        assert out.count(r[0]) == len(stacked)  # the row's name heads every stacked table
    assert out.index("figure 0") < out.index("figure 8")  # in column order


def test_a_long_name_folds_and_keeps_every_character():
    name = "258c7280-ae70-4798-800f-63464d01a85d/compact-1"
    cols = [Column("session", "left", name=True)] + [Column(c) for c in ("wall", "model", "tool", "wait", "reuse")]
    out = _render(fitted_tables(None, cols, [[name, "1 h 14 m", "18 m 38 s", "18 m 29 s", "36 m 55 s", "99.5 %"]],
                                40), 40)
    _readable(out, 40)
    assert name in "".join(line.split()[0] for line in out.splitlines() if line.strip() and "─" not in line
                           and not line.startswith("session"))


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("args", [
    ("replay", str(KV), "-s", "h200+x86", "-s", "jalapeno"),
    ("analyze", str(SESSION), "--no-progress"),
    ("analyze", str(KV), "--no-progress"),
    ("devices", "list"),
    ("replay", str(KV / "trace_0121.json"), "-s", "h200+x86", "-s", "jalapeno", "--concurrency", "4"),
    ("cachesim", str(KV / "trace_0121.json"), "--model", "kimi-k2.5", "--tier", "hbm=2GiB", "--tier", "cpu=20GiB"),
], ids=["replay", "analyze-claude-code", "analyze-kv-cache-tester", "devices-list", "replay-serving", "cachesim"])
def test_commands_fit_the_terminal(capsys, monkeypatch, args, width):
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = run(capsys, *args)
    assert code == 0, err
    _readable(out, width)
    if args[0] == "replay" and "--concurrency" not in args:
        task = [line for line in out.splitlines() if line.startswith(("recorded", "h200+x86", "jalapeno"))]
        assert all(re.search(r"\d+\.\dh\s+\d\.\d\d×", line) for line in task[:3]), task  # task time and speed-up
    if args[0] == "analyze":
        wall = [line for line in out.splitlines() if line.startswith("wall ")]
        assert wall and DURATION.search(wall[0]), wall  # the wall time on one line, whole
    if args[0] == "analyze" and "claude-code" in args[1]:
        # the session table names its main session by the UUID's first 8 characters, on one line, and says so
        table = out[out.index("Sessions ("):]
        rows = [line for line in table.splitlines() if line.startswith("258c7280")]
        assert rows and all(re.match(r"258c7280\S*\s+(main|compaction|subagent)\s", r) for r in rows[:2]), rows
        assert "258c7280-ae70" not in table and "whole in --json" in table


def test_short_ids_cut_uuids_unless_two_would_read_alike():
    from agentprof.report.formats import short_ids

    ids = ["258c7280-ae70-4798-800f-63464d01a85d", "258c7280-ae70-4798-800f-63464d01a85d/compact-1", "plain"]
    assert short_ids(ids) == (["258c7280", "258c7280/compact-1", "plain"], True)
    twins = ["258c7280-ae70-4798-800f-63464d01a85d", "258c7280-0000-4798-800f-63464d01a85d"]
    assert short_ids(twins) == (twins, False)  # alike when cut: shown whole
    assert short_ids(["a", "b"]) == (["a", "b"], False)
    # agentprof's own capture writes a UUID as 32 hex digits; a longer hex run is not one
    assert short_ids(["e6da07584c9c4ea7861707e9ea5e74ee", "x" + "0" * 33]) == (["e6da0758", "x" + "0" * 33], True)


@pytest.mark.parametrize("width", [80, 120])
def test_report_summary_fits_the_terminal(capsys, monkeypatch, tmp_path, width):
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = run(capsys, "report", str(KV / "trace_0121.json"), "-o", str(tmp_path / "r.html"),
                         "--no-serving-bands", "--serving-concurrency", "1,4")
    assert code == 0, err
    _readable(out, width)
    assert "Where the time went" in out and "TTFT p99" in out


def test_replay_at_80_columns_as_a_user_runs_it():
    """The README's command in a child process with COLUMNS=80 (what a narrow terminal pane gives)."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "agentprof", "replay", str(KV), "-s", "h200+x86", "-s", "jalapeno"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    _readable(r.stdout, 80)
    assert "task ×" in r.stdout


def test_the_capture_cost_sentence_reads_at_a_glance():
    """The analysis' note on agentprof's own cost, with its longest wording (a background thread recorded): at most
    60 words, as every visible paragraph."""
    import re

    from agentprof.report.formats import fmt_capture_cost

    text = fmt_capture_cost({"s": 0.0124, "background_cpu_s": 0.263, "total_s": 0.2755, "total_share_of_wall": 0.05})
    assert "grows by between 12.4 ms" in text and "and 275.5 ms" in text
    assert len([w for w in text.split() if re.search(r"\w", w)]) <= 60, text
