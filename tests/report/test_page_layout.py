"""The report page as a reader meets it, in a real headless Chromium at 800 and 1,400 px: no sideways scroll,
nothing cut off, no visible block of text over 60 words, and the first screen (1,400 × 900) naming every replayed
system with its speed-up — on a real Claude Code session, a real corpus and a comparison page. Nothing cut means
no box cut or scrolling sideways and none reaching past its panel's edge."""

from __future__ import annotations

import re

import pytest

from agentprof.report.compare import write_compare_report
from agentprof.report.html import write_report
from agentprof.report.stages import run_stages

from .report_support import LAYOUT_PROBE
from .test_compare import _parts

pytestmark = pytest.mark.browser
MAX_WORDS = 60


def _x(v: float) -> str:  # the page's format of a speed-up
    return f"{v:.1f}×" if v >= 10 else f"{v:.2f}×"


def _check_widths(browser, path) -> list:
    pages = []
    for width in (800, 1400):
        o = browser.open(path, width=width)
        o.page.set_viewport_size({"width": width, "height": 900})
        got = o.page.evaluate(LAYOUT_PROBE)
        assert o.errors == []
        assert got["scrollWidth"] <= width, (width, got)
        assert got["clipped"] == [] and got["spilled"] == [], (width, got["clipped"], got["spilled"])
        assert got["blocks"][0][0] <= MAX_WORDS, (width, got["blocks"][0])
        assert got["split"] == [], (width, got["split"])
        pages.append(o.page)
    return pages


def _first_screen_rows(page, selector: str) -> list[tuple[str, float]]:
    """(text, bottom edge) of each row matched, from the top of the page."""
    page.evaluate("() => window.scrollTo(0, 0)")
    return page.evaluate("""(sel) => [...document.querySelectorAll(sel)].map(r =>
        [r.innerText, r.getBoundingClientRect().bottom + window.scrollY])""", selector)


@pytest.fixture(scope="module")
def session_report(big_session, tmp_path_factory):
    """`agentprof report` on the real Claude Code session with its subagents, the default stages."""
    res = run_stages(big_session)
    path = tmp_path_factory.mktemp("layout") / "session.html"
    write_report(path, big_session, res.analysis, res.replay, res.cache, notes=res.notes,
                 cache_model=res.cache_model, serving=res.serving)
    return path, res


def test_session_report_reads_at_both_widths(browser, session_report):
    path, res = session_report
    narrow, wide = _check_widths(browser, path)
    rows = _first_screen_rows(wide, "#headline table.ans-sys tbody tr")
    systems = res.replay.to_dict()["systems"]
    assert len(rows) == len(systems) >= 3
    for (text, bottom), s in zip(rows, systems, strict=True):
        assert text.startswith(s["name"]) and _x(s["speedup_vs_recorded"]) in text
        assert bottom <= 900, (text, bottom)
    assert "Biggest lever" in wide.locator("#headline .ans-lever").inner_text()
    # the explanations are there, closed: opened, a range's plain causes and its parameter names read in full
    wide.evaluate("() => document.querySelectorAll('#headline details').forEach(d => { d.open = true; })")
    ranges = wide.locator("#headline .ans-ranges").inner_text()
    assert "are estimates" in ranges and "jalapeno.hbm_bw" in ranges
    # duration axes tick on round values: whole hours, minutes in fives, no seconds once past a minute
    ticks = wide.evaluate("() => [...document.querySelectorAll('#whatif .axis text')].map(t => t.textContent)")
    durations = [t for t in ticks if re.search(r"\d (h|m|s)$", t)]
    assert len(durations) >= 6, ticks
    for t in durations:
        assert re.fullmatch(r"\d+ s|\d+ m|\d+ h( \d+ m)?", t), t
        assert all(int(m) % 5 == 0 for m in re.findall(r"(\d+) m", t)), t
    for p in (narrow, wide):
        p.close()


def test_corpus_report_reads_at_both_widths(browser, kv_folder, tmp_path):
    res = run_stages(kv_folder, systems=["h200+x86", "jalapeno"], model="gpt-oss-120b")
    path = write_report(tmp_path / "kv.html", kv_folder, res.analysis, res.replay, res.cache, notes=res.notes,
                        cache_model=res.cache_model, serving=res.serving)
    for p in _check_widths(browser, path):
        p.close()


def test_comparison_page_reads_at_both_widths(browser, tmp_path):
    parts = _parts()
    path = write_compare_report(tmp_path / "cmp.html", parts, title="two traces", notes=["a note"])
    narrow, wide = _check_widths(browser, path)
    rows = _first_screen_rows(wide, "#compare table.cmp-whatif tbody tr")
    names = [s.name for s in parts[0].replay.systems]
    assert [t.split("\t")[0] for t, _ in rows][1:] == names  # recorded first, then every system
    for (text, bottom), s in zip(rows[1:], parts[0].replay.systems, strict=True):
        assert _x(s.speedup_vs_recorded) in text and bottom <= 900
    for p in (narrow, wide):
        p.close()
