"""The serving panel (TTFT p99 and tasks/hour against concurrency per system) in a real headless Chromium and
in the terminal view."""

from __future__ import annotations

import pytest

from agentprof.report.html import write_report
from agentprof.report.payload import build_payload
from agentprof.report.stages import run_stages
from agentprof.report.terminal import serving_view, show

SYSTEMS = ["h100+x86", "rubin+vera"]
CONC = [1, 4, 32]


@pytest.fixture(scope="module")
def stages(kv_folder):
    # the benchmark deployment (HBM only) under tensor-parallel attention: H100 is slow at 32 sessions there, so
    # the levers show (H200, with the driver-reported 150.75e9 B of HBM, holds them)
    return run_stages(kv_folder, systems=SYSTEMS, cache=False, serving=CONC, serving_levers=True,
                      deployment="benchmark", attention="tp", serving_bands=True)


@pytest.mark.browser
def test_serving_panel_draws_both_charts(browser, kv_folder, stages, tmp_path):
    path = write_report(tmp_path / "serving.html", kv_folder, stages.analysis, stages.replay, None,
                        notes=stages.notes, serving=stages.serving)
    o = browser.open(path)
    assert o.requests == [path.resolve().as_uri()] and o.errors == []
    page = o.page
    sec = page.locator("#serving")
    assert sec.locator(".missing").count() == 0
    # one dot per system and concurrency in each chart
    assert sec.locator(".sv-ttft circle.sv-dot").count() == len(SYSTEMS) * len(CONC)
    assert sec.locator(".sv-tph circle.sv-dot").count() == len(SYSTEMS) * len(CONC)
    assert sec.locator(".sv-table tbody tr").count() == len(SYSTEMS)
    text = sec.inner_text()
    for name in SYSTEMS:
        assert name in text
    # the explanations sit behind disclosures (closed: the first read stays short); opened, they read in full
    assert sec.locator("details.sv-why").count() == len(SYSTEMS)
    assert page.evaluate("() => [...document.querySelectorAll('#serving details')].every(d => !d.open)")
    page.evaluate("() => document.querySelectorAll('#serving details').forEach(d => { d.open = true; })")
    text = sec.inner_text()
    why_text = " ".join(" ".join(sec.locator(".sv-why").all_inner_texts()).split())
    assert "calls in flight" in why_text and "Deployment: benchmark settings" in why_text
    assert "(benchmark deployment)" in stages.serving["cache"] and stages.serving["cache"] in text
    assert {d["deployment"]["name"] for s in stages.replay.systems for d in s.deployments} == {"benchmark"}
    # H100 at 32 sessions is slow (TTFT p50 >= 10 s): the why names the levers, each simulated once, with the
    # figures the payload holds
    slow = next(r for r in stages.serving["systems"] if r["system"] == "h100+x86")
    assert slow["ttft_p50_s"][-1] >= 10.0 and "What would change it: --kv-dtype fp8: TTFT p50" in slow["why"]
    lever = slow["why"].split("What would change it: ", 1)[1].split(";", 1)[0]
    assert lever in why_text
    # and as a table: one row per lever tried, in the payload's order, with its simulated TTFT p50
    tried = slow["levers"]["tried"]
    table = sec.locator("table.sv-levers")
    assert table.count() == sum(1 for r in stages.serving["systems"] if (r.get("levers") or {}).get("tried"))
    rows = table.first.locator("tbody tr")
    assert f"h100+x86 at {CONC[-1]} sessions" in table.first.locator("caption").inner_text()
    assert rows.count() == len(tried)
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(len(tried))] == [t["flag"] for t in tried]
    fp8 = next(i for i, t in enumerate(tried) if t["flag"] == "--kv-dtype fp8")
    assert rows.nth(fp8).locator("td").nth(1).get_attribute("title") == f"{tried[fp8]['ttft_p50_s']:.3f} s"
    hold = slow["levers"]["hold_kv"]
    assert f"takes {hold['instances']} instance(s) of {hold['accelerators_per_instance']}" in table.first.locator("tfoot").inner_text()
    # the dots carry the numbers the payload holds
    sv = stages.serving
    first = sv["systems"][0]
    title = sec.locator(".sv-tph circle.sv-dot").first.locator("title").text_content()
    assert title.startswith(f"{first['system']} at 1: tasks / hour")
    assert f"{first['tasks_per_hour'][0]:.1f}" in title
    # Rubin rests on ranged estimates: its band at the largest concurrency, fast end no slower than the slow one,
    # drawn as one dashed bar per chart and listed; H100 (catalogued without ranges) has none
    rubin = next(r for r in sv["systems"] if r["system"] == "rubin+vera")
    band = rubin["band"]
    assert band["concurrency"] == CONC[-1] and "rubin.hbm_bw" in band["ranged"]
    assert "agentic.default.cpu_tier_gib_per_instance" not in band["ranged"]  # the benchmark deployment has no tier
    assert band["serving_ttft_p50_s"][0] <= band["serving_ttft_p50_s"][1]
    # each moved number with its evidence class, and one short line per system on the calls beyond the window
    assert band["evidence"]["rubin.hbm_bw"] == "vendor" and "rubin.hbm_bw [vendor]" in text
    beyond = sec.locator(".sv-beyond")
    assert beyond.count() == sum(1 for r in sv["systems"] if r.get("beyond"))
    assert beyond.count() and "--overflow compact" in beyond.first.inner_text()
    assert all(r["beyond_context"]["policy"] == "compact" for r in sv["systems"])
    assert band["serving_tasks_per_hour"][0] >= band["serving_tasks_per_hour"][1]
    assert slow.get("band") is None
    assert sec.locator(".sv-ttft line.sv-band").count() == 1 and sec.locator(".sv-tph line.sv-band").count() == 1
    item = " ".join(sec.locator(".sv-bands li").inner_text().split())
    assert item.startswith(f"rubin+vera at {CONC[-1]} sessions: TTFT p50") and "rubin.hbm_bw" in item
    bar = sec.locator(".sv-tph line.sv-band").locator("title").text_content()
    def chart_fmt(v: float) -> str:  # the tasks/hour axis's format
        return f"{v:.0f}" if v >= 10 else f"{v:.1f}"

    assert bar.endswith(f"{chart_fmt(min(band['serving_tasks_per_hour']))} – "
                        f"{chart_fmt(max(band['serving_tasks_per_hour']))}")
    sec.screenshot(path=str(tmp_path / "serving.png"))
    o.page.close()


@pytest.mark.browser
def test_serving_panel_says_why_it_is_missing(browser, kv_folder, tmp_path):
    res = run_stages(kv_folder, systems=SYSTEMS, analysis=False, cache=False, serving=[])
    path = write_report(tmp_path / "no-serving.html", kv_folder, None, res.replay, None, notes=res.notes,
                        serving=res.serving)
    o = browser.open(path)
    assert "--serving-concurrency none" in o.page.locator("#serving .missing").inner_text()
    assert o.errors == []
    o.page.close()


def test_terminal_serving_view(kv_folder, stages, capsys):
    payload = build_payload(kv_folder, serving=stages.serving)
    assert payload["serving"]["status"] == "ok"
    from rich.console import Console

    show(serving_view(payload["serving"]), Console(width=200))
    out = capsys.readouterr().out
    assert "TTFT p99 ·" in out and "tasks/hour by concurrency" in out
    for name in SYSTEMS:
        assert name in out
    assert f"{stages.serving['systems'][0]['tasks_per_hour'][0]:.1f}/h" in out
    # the band, the same numbers as the page's (one name, one number)
    band = next(r for r in stages.serving["systems"] if r["system"] == "rubin+vera")["band"]
    tph = band["serving_tasks_per_hour"]
    assert f"rubin+vera band at {CONC[-1]}" in out and f"tasks/hour {min(tph):.1f}–{max(tph):.1f}" in out
