"""Charts never draw outside their plot: every SVG element of every panel stays inside its SVG in Chromium,
for sessions of 1, 5, 100 and 1,000 model calls (``scripts/report_screenshots.py`` makes the pictures)."""

from __future__ import annotations

import pytest

from agentprof.report.html import write_report
from agentprof.report.stages import run_stages

from .report_support import synthetic_session

OUTSIDE = """() => [...document.querySelectorAll('section svg')].flatMap(svg => {
  const box = svg.getBoundingClientRect(); const out = [];
  svg.querySelectorAll('rect,text,line,path,circle').forEach(el => { const b = el.getBoundingClientRect();
    if (b.width && (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1))
      out.push((svg.closest('section') || {}).id + ' ' + el.tagName + ' ' + (el.textContent || '').slice(0, 40)); });
  return out; })"""


@pytest.mark.browser
@pytest.mark.parametrize("calls", [1, 5, 100, 1000])
def test_no_chart_element_leaves_its_plot(tmp_path, browser, calls):
    trace = synthetic_session(turns=calls, subagent=False)
    # the serving panel's chart at 1,000 calls from two concurrencies instead of the default four: 16 or 50
    # copies of a session growing to 500K-token contexts take most of a minute to simulate (jalapeno at 16: 57 of
    # the sweep's 69 CPU seconds) and draw nothing new, each system's line the same two-point path as at 100 calls
    # (the four-point one is drawn at 1 and 5 calls), and without the band's two more simulations, which the
    # smaller sessions draw
    serving = [1, 4] if calls >= 1000 else None
    staged = run_stages(trace, systems=["h200+x86", "jalapeno"], model="gpt-oss-120b", serving=serving,
                        serving_bands=calls < 1000)
    path = write_report(tmp_path / f"r{calls}.html", trace, staged.analysis, staged.replay, staged.cache,
                        notes=staged.notes, cache_model=staged.cache_model, serving=staged.serving)
    opened = browser.open(path, width=1280)
    drawn = opened.page.evaluate("() => document.querySelectorAll('section svg rect').length")
    assert drawn > calls  # the charts were drawn (bars, segments), the serving panel's among them, and:
    assert opened.page.evaluate("() => document.querySelectorAll('#serving svg path').length") > 0
    assert opened.page.evaluate(OUTSIDE) == []
    assert opened.errors == []
