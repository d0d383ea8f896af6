"""Terminal renderers: figures from the stage results appear, trace text is literal (no console markup)."""

from __future__ import annotations

import pytest
from rich.console import Console

from agentprof.report.formats import fmt_duration
from agentprof.report.slowest import slow_tools
from agentprof.report.stages import run_stages
from agentprof.report.terminal import (
    analysis_view,
    cachesim_view,
    progress_bar,
    replay_view,
    serving_view,
    slow_tools_view,
    time_split_view,
)

from .report_support import synthetic_session


def _text(renderable) -> str:
    con = Console(record=True, width=160, color_system=None)
    con.print(renderable)
    return con.export_text()


@pytest.fixture(scope="module")
def staged(big_session):
    return run_stages(big_session, systems=["h200+x86", "jalapeno"], model="gpt-oss-120b", serving_bands=False)


def test_analysis_view_shows_the_split_the_distributions_and_the_misses(staged):
    d = staged.analysis.to_dict()
    out = _text(analysis_view(d))
    t = d["time"]
    assert fmt_duration(t["wall_s"]) in out and fmt_duration(t["model_s"]) in out
    assert f"{100 * t['model_s'] / t['wall_s']:.1f} %" in out
    assert f"{100 * d['redundancy']['prefix_reuse_prev']['median']:.1f} %" in out
    assert f"Cache misses ({len(d['cache_misses'])})" in out
    first = d["cache_misses"][0]
    assert str(first["call_index"] + 1) in out


def test_replay_view_lists_each_system(staged):
    d = staged.replay.to_dict()
    out = _text(replay_view(d))
    for row in (d["recorded"], *d["systems"]):
        assert row["name"] in out and fmt_duration(row["e2e_s"]) in out
    assert f"{d['systems'][1]['speedup_vs_recorded']:.2f}×" in out
    # the replay's own model-free figure is not shown as "Amdahl bound" (that name is the analysis's)
    assert "model calls taking no time, on the replayed timeline" in out and "Amdahl bound" not in out
    assert "tool" in out and fmt_duration(d["recorded"]["tool_s"]) in out


def test_cachesim_view(big_session):
    from agentprof.analysis.cachesim import Tier, simulate

    d = simulate(big_session, "gpt-oss-120b", tiers=[Tier("hbm", 10**9), Tier("cpu", None)]).to_dict()
    out = _text(cachesim_view(d))
    assert "hbm" in out and "unlimited" in out
    assert f"{100 * d['hit_rate']:.1f} %" in out


def test_trace_text_is_not_console_markup():
    tr = synthetic_session(tool_name="[bold red]boom[/]")
    out = _text(slow_tools_view(slow_tools(tr.spans)))
    assert "[bold red]boom[/]" in out


def test_progress_bar_is_silent_off_a_terminal():
    con = Console(record=True, force_terminal=False)
    with progress_bar("work", 3, console=con) as advance:
        for _ in range(3):
            advance()
    assert con.export_text() == ""


def test_panels_fit_the_terminal_width_when_none_is_given(staged, monkeypatch):
    # the views take the terminal's width (COLUMNS here) when the caller gives none: at 30 columns both tables
    # stack as they do when given 30, not as at 160
    monkeypatch.setenv("COLUMNS", "30")
    for view, d in ((serving_view, staged.serving), (time_split_view, staged.analysis.to_dict()["time"])):
        shown = _text(view(d))  # printed on a 160-column console: the fitting is the view's
        assert shown == _text(view(d, 30)) and shown != _text(view(d, 160))
