"""Agent-active time (wall minus user turns, approvals and idle gaps) in every report: the terminal view, the
notebook fragment and the HTML page show the numbers the analysis computed once (``TimeSplit.shares``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from agentprof.analysis import analyze
from agentprof.importers import load_any
from agentprof.report.formats import fmt_duration, fmt_pct, fmt_x
from agentprof.report.headline import headline, trace_figures
from agentprof.report.notebook import analysis_html
from agentprof.report.terminal import analysis_view

ROLLOUT = Path(__file__).parents[1] / "importers" / "fixtures" / "codex_tracelab_0114.jsonl"


@pytest.fixture(scope="module")
def run():
    trace = load_any(ROLLOUT)
    return trace, analyze(trace)


def _expected(a) -> dict[str, str]:
    t = a.time
    sh = t.shares()
    assert t.agent_active_s < t.wall_s  # three user turns: a real difference to show
    return {"active": fmt_duration(t.agent_active_s), "model_active": fmt_pct(sh["of_agent_active"]["model"]),
            "model_wall": fmt_pct(sh["of_wall"]["model"]), "speedup_active": fmt_x(sh["of_agent_active"]["max_speedup"]),
            "user_turn": fmt_duration(t.wait_by_reason["user_turn"])}


def test_terminal_and_notebook_show_the_same_agent_active_numbers(run):
    trace, a = run
    want = _expected(a)
    d = a.to_dict()
    con = Console(record=True, width=200, color_system=None)
    con.print(analysis_view(d))
    term = con.export_text()
    nb = analysis_html(d)
    for key, text in want.items():
        assert text in term, (key, text)
        assert text.replace("×", "&#215;") in nb or text in nb, (key, text)


def test_the_html_headline_carries_the_analysis_figures_unchanged(run):
    trace, a = run
    d = a.to_dict()
    hl = headline(trace_figures(trace.spans), d)
    assert hl["agent_active_s"] == d["time"]["agent_active_s"] == a.time.agent_active_s
    assert hl["max_speedup_active"] == d["time"]["shares"]["of_agent_active"]["max_speedup"]
    assert hl["shares_active"]["model_s"] == a.time.shares()["of_agent_active"]["model"]
    assert hl["waits_by_reason"] == d["time"]["waits_by_reason"]


@pytest.mark.browser
def test_the_page_shows_an_agent_active_card(run, browser, tmp_path):
    from agentprof.report.html import write_report

    trace, a = run
    path = write_report(tmp_path / "active.html", trace, analysis=a)
    o = browser.open(path)
    assert o.errors == []
    import re

    card = o.page.locator("#headline .card").filter(has=o.page.locator(".k", has_text=re.compile("^Agent-active time$")))
    assert card.count() == 1
    assert "user turn" in card.inner_text()
    model = o.page.locator("#headline .card").filter(
        has=o.page.locator(".k", has_text=re.compile("^model share$"))).inner_text()
    assert f"{100 * a.time.shares()['of_agent_active']['model']:.1f}" in model.replace(" ", "")
    o.page.close()
