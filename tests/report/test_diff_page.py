"""The ``agentprof diff`` page in a real headless Chromium: it renders BASE and NEW side by side with the
tested changes, requests nothing but the file, logs no errors, keeps trace text (tool names) as text and never
breaks a line inside a figure."""

from __future__ import annotations

import pytest

from agentprof.analysis.diff import diff
from agentprof.cli import main
from agentprof.report.diff_page import render_diff_page, write_diff_page

from .report_support import LAYOUT_PROBE, SEC, T0, make_trace, span

EVIL = '<img src=x onerror=alert(1)>run</script>'


def runs(n: int, tool_s: float, prefix: str, tool_wait_s: float = 0.0):
    """``n`` runs: a 1 s model call, then the evil-named tool for ``tool_s`` (+1 ms per run), waiting
    ``tool_wait_s`` of it for a CPU, then ``ls``; the run's thread waited 0.1 s more than that for a CPU."""
    recs = []
    rq = "agentprof.runq_ns"
    for i in range(n):
        s, t = f"{prefix}{i}", T0 + i * 100 * SEC
        m = SEC + i * 10_000_000
        tt = int(tool_s * SEC) + i * 1_000_000
        recs += [span(s, f"{s}root", None, "agent", "invoke_agent a", t, t + m + tt + SEC // 10, trace_id=s,
                      **{rq: int((tool_wait_s + 0.1) * SEC)}),
                 span(s, f"{s}m", f"{s}root", "model", "chat x", t, t + m, trace_id=s,
                      **{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10, rq: 0}),
                 span(s, f"{s}t", f"{s}root", "tool", f"execute_tool {EVIL}", t + m, t + m + tt, trace_id=s,
                      **{"gen_ai.tool.name": EVIL, rq: int(tool_wait_s * SEC)}),
                 span(s, f"{s}l", f"{s}root", "tool", "execute_tool ls", t + m + tt, t + m + tt + SEC // 20,
                      trace_id=s, **{"gen_ai.tool.name": "ls", rq: 0})]
    return make_trace(recs)


@pytest.fixture(scope="module")
def result():
    res = diff(runs(8, 1.0, "b"), runs(8, 4.0, "n", tool_wait_s=0.5))
    return res, res.failures(slower_pct=10)


def test_page_is_one_escaped_file(result):
    res, failed = result
    text = render_diff_page(res, failed)
    assert EVIL not in text and "\\u003cimg" in text  # the name travels escaped inside the JSON
    assert "Content-Security-Policy" in text and "default-src 'none'" in text


@pytest.mark.browser
def test_diff_page_renders_side_by_side_offline(browser, result, tmp_path):
    res, failed = result
    path = write_diff_page(tmp_path / "diff.html", res, failed)
    o = browser.open(path)
    assert o.requests == [path.resolve().as_uri()], o.requests
    assert o.errors == [] and o.dialogs == []
    page = o.page
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.locator(".card.side-base").inner_text().count("8 run(s)") == 1
    rows = page.locator("#changes tbody tr")
    assert rows.count() == len(res.changes)
    sig = page.locator("#changes tbody tr.sig")
    assert sig.count() == len(res.significant) > 0
    evil_row = page.locator(f'#changes tr[data-metric="tool_time_s"][data-scope="tool:{EVIL}"]')
    assert evil_row.get_attribute("class") == "sig worse"
    assert evil_row.locator("td.name").inner_text() == f"tool:{EVIL}"
    # the per-call evidence: the tool's calls, one per run, tested across calls with runs as blocks
    evil_calls = page.locator(f'#changes tr[data-metric="call_s"][data-scope="tool:{EVIL}"]')
    assert evil_calls.get_attribute("class") == "sig worse"
    assert evil_calls.locator("td").first.inner_text() == f"tool {EVIL}"
    assert "8 vs 8 calls (8 vs 8 runs)" in evil_calls.inner_text()
    assert page.locator('#changes tr[data-metric="tool_time_s"][data-scope="tool:ls"] td.flag').inner_text() == "no"
    # how much of the change load explains: 2 x the tool's 0.5 s more wait of its 3 s more a run
    assert evil_row.locator("td.load").inner_text().replace("\xa0", " ") == "33% (1.00 s a run)"
    assert res.change("tool_time_s", f"tool:{EVIL}").load_share == pytest.approx(1 / 3)
    fails = page.locator("#failed li")
    assert fails.count() == len(failed) > 0
    # side by side: a BASE bar and a NEW bar per figure, the NEW tool bar about four times as wide
    pair = page.locator("#pairs .pair.sig.worse", has_text=EVIL).first
    wb = pair.locator(".bar.base").bounding_box()["width"]
    wn = pair.locator(".bar.new").bounding_box()["width"]
    assert 3.0 < wn / wb < 5.0
    assert page.evaluate(LAYOUT_PROBE)["split"] == []  # no line may break inside a figure
    page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
    assert (tmp_path / "diff.png").stat().st_size > 10_000
    page.close()


def test_report_diff_writes_the_page(tmp_path, capsys):
    from agentprof.trace.files import write as write_trace

    b, n = tmp_path / "base.parquet", tmp_path / "new.parquet"
    write_trace(runs(8, 1.0, "b"), b)
    write_trace(runs(8, 4.0, "n"), n)
    main(["report", "--diff", str(b), str(n), "-o", str(tmp_path / "d.html")])
    assert "significant change(s)" in capsys.readouterr().out
    assert "agentprof diff" in (tmp_path / "d.html").read_text(encoding="utf-8")
