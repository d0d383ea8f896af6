"""One name, one number: the Amdahl bound and the provider cache read share read the same from the report's
JSON, its page in Chromium, the terminal and the notebook views — on a real Codex session, where the replay's
own model-free re-assembly and the analysis' Amdahl bound differ by a minute."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from agentprof.report.formats import fmt_duration, fmt_pct
from agentprof.report.html import write_report
from agentprof.report.notebook import analysis_html, replay_html, trace_html
from agentprof.report.payload import build_payload
from agentprof.report.stages import run_stages
from agentprof.report.terminal import analysis_view, replay_view, report_view

from .report_support import SAMPLES


def _text(renderable) -> str:
    con = Console(record=True, width=200, color_system=None)
    con.print(renderable)
    return con.export_text()


@pytest.fixture(scope="module")
def codex():
    from agentprof.importers import load_any

    trace = load_any(SAMPLES / "codex")
    staged = run_stages(trace, systems=["h200+x86"], cache=False)
    return trace, staged, build_payload(trace, staged.analysis, staged.replay)


def test_json_has_one_amdahl_bound_and_one_cache_read_share(codex):
    trace, staged, payload = codex
    a, r = staged.analysis.to_dict(), staged.replay.to_dict()
    # Codex runs tools alongside model calls (write_stdin polls while the model streams): the replay's session
    # with model calls at zero keeps that tool time, as analyze's bound does, so the two are one quantity
    assert a["time"]["span_sum_s"] > a["time"]["wall_s"] * 1.2
    assert abs(a["time"]["amdahl_bound_s"] - r["recorded"]["amdahl_e2e_s"]) < 1e-3
    assert a["time"]["amdahl_bound_s"] > a["time"]["wall_s"] - a["time"]["model_s"] + 30  # the overlap is kept
    hl = payload["headline"]
    assert hl["amdahl_bound_s"] == payload["whatif"]["amdahl_bound_s"] == a["time"]["amdahl_bound_s"]
    assert hl["max_speedup"] == payload["whatif"]["amdahl_ratio"]
    assert hl["cache_read_share"] == a["redundancy"]["provider_cache_read_share_weighted"] is not None


def test_terminal_and_notebook_show_the_same_figures(codex, tmp_path):
    trace, staged, payload = codex
    hl = payload["headline"]
    amdahl, share = fmt_duration(hl["amdahl_bound_s"]), fmt_pct(hl["cache_read_share"])
    a = staged.analysis.to_dict()
    views = {"report": _text(report_view(str(tmp_path / "r.html"), 1, payload)), "analyze": _text(analysis_view(a))}
    for name, out in views.items():
        found = re.findall(r"Amdahl bound\s+(.+?)\s{2,}", out)
        assert found and set(found) == {amdahl}, (name, found)
    assert f"provider cache read share {share}" in views["report"]
    nb = analysis_html(a)
    assert re.findall(r"Amdahl bound</td><td[^>]*>([^<]+)<", nb) == [amdahl]
    assert "Amdahl bound" not in replay_html(staged.replay.to_dict()) + _text(replay_view(staged.replay.to_dict()))
    assert share in trace_html(trace)


@pytest.mark.browser
def test_page_shows_one_amdahl_bound_and_one_cache_read_share(codex, tmp_path, browser):
    trace, staged, _ = codex
    path = tmp_path / "codex.html"
    write_report(path, trace, staged.analysis, staged.replay)
    page = browser.open(path).page
    cards = {k: v for k, v in page.eval_on_selector_all(
        ".card", "els => els.map(e => [e.querySelector('.k').textContent, e.querySelector('.v').textContent])")}
    bound = cards["Amdahl bound"].replace("\xa0", " ")  # the page joins a figure's parts with no-break spaces
    labels = page.eval_on_selector_all("svg text", "els => els.map(e => e.textContent)")
    marks = [t for t in labels if t.startswith("Amdahl bound")]
    assert marks and all(m.startswith(f"Amdahl bound {bound} (") for m in marks), (bound, marks)
    bare = [k for k in cards if k.strip() == "Provider cache read share"]
    assert len(bare) == 1  # the other read-share figures carry their own names (mean of calls, per session)
    pct = round(100 * staged.analysis.to_dict()["redundancy"]["provider_cache_read_share_weighted"], 1)
    assert cards[bare[0]].startswith(f"{pct:.1f}") or cards[bare[0]].startswith(f"{pct:.0f}"), cards[bare[0]]
