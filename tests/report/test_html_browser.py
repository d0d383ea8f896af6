"""Reports opened in a real headless Chromium: they render, log no errors, request nothing but the file,
keep trace text as text, stay interactive with many spans and explain what is missing."""

from __future__ import annotations

import pytest

from agentprof.report.html import write_report
from agentprof.report.results import MAX_MISSES
from agentprof.report.stages import run_stages

from .report_support import T0, make_trace, span
from .test_html import EVIL_MODEL, EVIL_TOOL, evil_trace

pytestmark = pytest.mark.browser


def _only_the_file(opened, path) -> None:
    assert opened.requests == [path.resolve().as_uri()], opened.requests
    assert opened.errors == [], opened.errors


def _canvas_has_model_blue(page) -> bool:
    """Some pixel of the timeline is the model colour (#0072b2), possibly faded (derived times) or blended."""
    return page.evaluate("""() => {
        const c = document.querySelector('#timeline canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4)
            if (d[i + 2] - d[i] > 60 && d[i + 2] > 150 && d[i + 1] > d[i]) return true;
        return false; }""")


def _point_at(page, t_us: float, row: int) -> tuple[float, float]:
    v = page.evaluate("window.agentprofTimeline.view()")
    box = page.locator("#timeline canvas").bounding_box()
    x = box["x"] + v["labelW"] + (t_us - v["v0"]) / (v["v1"] - v["v0"]) * v["plotW"]
    y = box["y"] + v["axisH"] + row * v["rowH"] + v["rowH"] / 2 - v["scrollY"]
    return x, y


@pytest.mark.parametrize("which", ["big_session", "kv_folder"])
def test_shared_trace_reports_render_offline(which, request, browser, tmp_path):
    trace = request.getfixturevalue(which)
    path = write_report(tmp_path / f"{which}.html", trace)
    o = browser.open(path)
    _only_the_file(o, path)
    page = o.page
    assert page.locator("#headline .card").count() >= 10
    assert page.locator("#timeline canvas").is_visible()
    assert _canvas_has_model_blue(page)  # model spans were drawn
    page.locator("#headline").screenshot(path=str(tmp_path / f"{which}-headline.png"))
    page.locator("#timeline").screenshot(path=str(tmp_path / f"{which}-timeline.png"))
    for part in ("headline", "timeline"):
        assert (tmp_path / f"{which}-{part}.png").stat().st_size > 5_000
    o.page.close()


def test_trace_text_is_shown_as_text(browser, tmp_path):
    path = write_report(tmp_path / "evil.html", evil_trace(), include_text=True)
    o = browser.open(path)
    _only_the_file(o, path)
    page = o.page
    assert o.dialogs == []  # no alert() ran
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    cell = page.locator("#slowest td.name", has_text=EVIL_TOOL).first
    assert cell.is_visible() and cell.inner_text().strip() == EVIL_TOOL
    # hover the tool span (5 s to 40 s): the tooltip shows the names literally
    x, y = _point_at(page, 20e6, 0)
    page.mouse.move(x, y)
    tip = page.locator(".tip")
    assert tip.is_visible()
    assert EVIL_TOOL in tip.inner_text() and "&lt;script&gt;" in tip.inner_html()
    foot = page.locator("#foot").inner_text().replace("\xa0", " ")  # agentprof's capture time, against 60 s wall
    assert "own cost while capturing: 123 ms of CPU (0.21 % of wall) on the agent's threads" in foot
    failed = page.locator("#failures").inner_text()  # the failed tool, counted with its time and error type
    assert failed.startswith("Failed: 1 tool call (") and "1 ToolError" in failed and "model" not in failed
    x, y = _point_at(page, 2e6, 0)
    page.mouse.move(x, y)
    assert EVIL_MODEL in tip.inner_text()
    assert "</script>" in tip.inner_text()  # the opted-in prompt text, as text
    assert o.dialogs == [] and o.errors == []
    o.page.close()


def test_many_spans_stay_interactive(browser, tmp_path):
    recs = [span("s", "a", None, "agent", "invoke_agent big", T0, T0 + 25_000 * 10_000_000)]
    for i in range(25_000):  # 25,000 spans: model and tool calls of a few ms, a parallel lane every 10th
        s0 = T0 + i * 10_000_000
        kind = "model" if i % 2 == 0 else "tool"
        recs.append(span("s", f"x{i}", "a", kind, f"{kind} {i % 13}", s0, s0 + 6_000_000))
        if i % 10 == 0:
            recs.append(span("s", f"y{i}", "a", "parse", "parse", s0 + 1_000_000, s0 + 12_000_000))
    trace = make_trace(recs)
    for budget, aggregated in ((50_000, False), (3_000, True)):
        path = write_report(tmp_path / f"big{budget}.html", trace, max_spans=budget)
        o = browser.open(path)
        _only_the_file(o, path)
        page = o.page
        before = page.evaluate("window.agentprofTimeline.view()")
        page.get_by_role("button", name="+", exact=True).click()
        zoomed = page.evaluate("window.agentprofTimeline.view()")
        assert zoomed["v1"] - zoomed["v0"] == pytest.approx((before["v1"] - before["v0"]) / 2, rel=1e-6)
        box = page.locator("#timeline canvas").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
        page.keyboard.down("Control")
        page.mouse.wheel(0, -300)
        page.keyboard.up("Control")
        wheeled = page.evaluate("window.agentprofTimeline.view()")
        assert wheeled["v1"] - wheeled["v0"] < zoomed["v1"] - zoomed["v0"]
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 40, steps=5)
        page.mouse.up()
        panned = page.evaluate("window.agentprofTimeline.view()")
        assert panned["v0"] > wheeled["v0"]
        assert _canvas_has_model_blue(page)
        assert ("merged" in page.locator("#timeline").inner_text()) == aggregated
        legend = page.locator("#timeline button.item", has_text="model")
        legend.click()  # hide model spans
        assert legend.get_attribute("aria-pressed") == "false" and not _canvas_has_model_blue(page)
        legend.click()
        assert _canvas_has_model_blue(page)
        assert o.errors == []
        o.page.close()


def test_missing_pieces_are_explained_on_the_page(browser, tmp_path):
    recs = [span("s", "a", None, "agent", "invoke_agent x", None, None),
            span("s", "m1", "a", "model", "chat m", None, None),
            span("s", "t1", "a", "tool", "execute_tool Bash", None, None)]
    trace = make_trace(recs)
    res = run_stages(trace)  # every stage runs on the bare trace as far as it can
    path = write_report(tmp_path / "bare.html", trace, res.analysis, res.replay, res.cache, notes=res.notes,
                        cache_model=res.cache_model)
    o = browser.open(path)
    _only_the_file(o, path)
    text = o.page.locator("#missing").inner_text()
    assert "No span has usable start and end times" in text
    assert "No model call reports provider token usage" in text
    assert "No model call carries prompt block hashes" in text
    assert "none of the 2 spans has usable start and end times" in o.page.locator("#timeline").inner_text()
    assert o.page.locator(".missing").count() >= 4  # timeline, redundancy, cache, what-if, slowest
    o.page.close()


@pytest.mark.parametrize("which", ["big_session", "kv_folder"])
def test_report_with_every_stage(which, request, browser, tmp_path):
    trace = request.getfixturevalue(which)
    res = run_stages(trace, systems=["h200+x86", "jalapeno", "rubin+vera"], model="gpt-oss-120b",
                     serving_bands=False)  # the serving panel is test_serving_panel's
    a = res.analysis.to_dict()
    path = write_report(tmp_path / f"{which}-full.html", trace, res.analysis, res.replay, res.cache,
                        cache_model=res.cache_model)
    o = browser.open(path)
    _only_the_file(o, path)
    page = o.page
    t = a["time"]
    headline = page.locator("#headline").inner_text().replace("\xa0", " ")  # figures joined by no-break spaces
    assert f"{100 * t['model_s'] / t['wall_s']:.1f} %" in headline
    # per-call chart: one line per available series, one marker per miss in the chosen session
    assert page.locator("#redundancy svg path[fill=none]").count() >= 2
    assert page.locator("#redundancy tbody tr").count() == min(len(a["cache_misses"]), MAX_MISSES)
    assert page.locator("#cache svg circle").count() >= 10 and page.locator("#cache .missing").count() == 0
    assert page.locator("#whatif svg rect").count() >= 3 * 4 - 1  # recorded + 3 systems, up to 3 parts each
    for name in ("recorded", "h200+x86", "jalapeno", "rubin+vera"):
        assert name in page.locator("#whatif").inner_text()
    if which == "kv_folder":
        assert page.locator("#corpus svg").count() >= 3
    for part in ("redundancy", "cache", "whatif"):
        page.locator(f"#{part}").screenshot(path=str(tmp_path / f"{which}-{part}.png"))
    assert o.errors == []
    o.page.close()


def test_whatif_draws_what_model_calls_wait_for(kv_folder, browser, tmp_path):
    systems = ["h200+x86", "jalapeno"]
    res = run_stages(kv_folder, systems=systems, model="gpt-oss-120b", serving_bands=False)
    rows = {s["name"]: s for s in res.replay.to_dict()["systems"]}
    path = write_report(tmp_path / "wait.html", kv_folder, res.analysis, res.replay, res.cache,
                        cache_model=res.cache_model)
    o = browser.open(path)
    _only_the_file(o, path)
    chart = o.page.locator("#whatif .waitingfor")
    assert chart.count() == 1
    text = chart.inner_text() if chart.inner_text() else o.page.locator("#whatif").inner_text()
    for name in systems:
        assert name in o.page.locator("#whatif").inner_text()
        drawn = {k for k, v in rows[name]["waiting_for"].items() if v > 0}
        kinds = o.page.evaluate("""(n) => Array.from(document.querySelectorAll('#whatif .waitingfor rect.waitpart'))
            .filter(r => r.querySelector('title') && r.querySelector('title').textContent.startsWith(n + ' ·'))
            .map(r => r.getAttribute('data-kind'))""", name)
        assert set(kinds) == drawn and drawn
    assert "What the model calls wait for" in o.page.locator("#whatif").inner_text()
    assert "band" in o.page.locator("#whatif").inner_text()  # Jalapeño's task speed-up band
    # and what it rests on: the estimates it moved, the same list as the replay's band.ranged
    o.page.evaluate("() => document.querySelectorAll('#whatif details').forEach(d => { d.open = true; })")
    items = [" ".join(t.split()) for t in o.page.locator("#whatif .wi-bands li").all_inner_texts()]
    assert [i.split(":")[0] for i in items] == systems
    for name, item in zip(systems, items, strict=True):
        ranged = rows[name]["band"]["ranged"]
        assert all(x in item for x in ranged)
        # no agentic recipe serves GPT-OSS: the deployment's estimated CPU tier moves on both systems
        assert "agentic.default.cpu_tier_gib_per_instance" in ranged
    assert rows["h200+x86"]["band"]["ranged"] == ["agentic.default.cpu_tier_gib_per_instance"]
    assert text is not None and o.errors == []
    o.page.close()
