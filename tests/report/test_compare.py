"""Several traces side by side in one page (agentprof.report.compare): the comparison data matches each
trace's own figures, labels stay text, and the page renders in a real Chromium with every trace's panels
under its own ids and nothing fetched."""

from __future__ import annotations

import json
import re

import pytest

from agentprof.report.compare import ComparePart, build_compare_payload, render_compare, write_compare_report
from agentprof.report.stages import run_stages

from .report_support import SEC, T0, make_trace, span, synthetic_session

EVIL_LABEL = '<img src=x onerror=alert(7)> "side"'


def _short_trace():
    """One session: 10 s wall, a 4 s model call, a 5 s tool call and 1 s of glue at the end."""
    recs = [span("s", "root", None, "agent", "invoke_agent short", T0, T0 + 10 * SEC),
            span("s", "m", "root", "model", "chat gpt-oss-120b", T0, T0 + 4 * SEC,
                 **{"gen_ai.usage.input_tokens": 2000, "gen_ai.usage.cache_read.input_tokens": 1500,
                    "gen_ai.usage.output_tokens": 100, "gen_ai.response.model": "gpt-oss-120b"}),
            span("s", "t", "root", "tool", "execute_tool Bash", T0 + 4 * SEC, T0 + 9 * SEC,
                 **{"gen_ai.tool.name": "Bash"})]
    return make_trace(recs, name="short")


def _parts(label_b: str = "synthetic long session"):
    a, b = _short_trace(), synthetic_session(turns=12, subagent=True)
    ra, rb = run_stages(a, ["h200+x86", "jalapeno"]), run_stages(b, ["h200+x86", "jalapeno"])
    return [ComparePart("short run", a, ra.analysis, ra.replay, ra.cache, ra.notes, ra.cache_model, "ten seconds"),
            ComparePart(label_b, b, rb.analysis, rb.replay, rb.cache, rb.notes, rb.cache_model)]


def _data(page: str) -> dict:
    m = re.search(r'<script id="agentprof-data" type="application/json">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


def test_comparison_rows_are_each_traces_own_figures():
    parts = _parts()
    d = build_compare_payload(parts, title="two traces", notes=["simulated: nothing"])
    c = d["compare"]
    assert [r["label"] for r in c["runs"]] == ["short run", "synthetic long session"]
    rows = {r["key"]: r["values"] for r in c["table"]}
    # the short trace, by construction: 10 s wall, model 4 s, tool 5 s, 1 s glue, 1 call each
    assert rows["wall_s"][0] == pytest.approx(10.0)
    assert rows["share_model"][0] == pytest.approx(0.4)
    assert rows["share_tool"][0] == pytest.approx(0.5)
    assert rows["share_orchestration"][0] == pytest.approx(0.1)
    assert rows["model_calls"][0] == 1 and rows["tool_calls"][0] == 1
    assert rows["cache_read_share"][0] == pytest.approx(1500 / 2000)
    assert rows["amdahl_bound_s"][0] == pytest.approx(6.0)  # model time removed
    # the second column is what the trace's analysis says
    t = parts[1].analysis.time
    assert rows["wall_s"][1] == pytest.approx(t.wall_s)
    assert rows["share_model"][1] == pytest.approx(t.model_s / t.wall_s)
    assert rows["model_calls"][1] == parts[1].trace.spans.filter(parts[1].trace.spans["kind"] == "model").height
    # what-if: the recorded row and each system, one cell per trace, from that trace's replay
    names = [w["name"] for w in c["whatif"]]
    assert names == ["recorded", "h200+x86", "jalapeno"]
    for w in c["whatif"][1:]:
        for cell, part in zip(w["cells"], parts, strict=True):
            row = next(s for s in part.replay.systems if s.name == w["name"])
            assert cell["e2e_s"] == pytest.approx(row.e2e_s) and cell["speedup"] == pytest.approx(row.speedup_vs_recorded)
    # and each cell's range and why-not are that trace's first screen's (one number, written once)
    for i, run in enumerate(c["runs"]):
        for a in run["payload"]["answer"]["systems"]:
            cell = next(w for w in c["whatif"] if w["name"] == a["name"])["cells"][i]
            assert cell["band"] == a["band"] and cell["why_not"] == a["why_not"] and a["why_not"]
    assert c["notes"] == ["simulated: nothing"]
    # each run carries the same payload a one-trace report would embed
    assert c["runs"][0]["payload"]["headline"]["model_calls"] == 1


def test_labels_stay_inside_the_data_block():
    page = render_compare(_parts(EVIL_LABEL), title="</title><script>alert(8)</script>")
    assert "<img src=x" not in page and "<script>alert(8)" not in page
    assert _data(page)["compare"]["runs"][1]["label"] == EVIL_LABEL


def test_needs_a_trace():
    with pytest.raises(ValueError):
        build_compare_payload([])


@pytest.mark.browser
def test_comparison_page_renders_offline(browser, tmp_path):
    path = write_compare_report(tmp_path / "cmp.html", _parts(EVIL_LABEL), title="two traces",
                                notes=["simulated: the first run's model"])
    o = browser.open(path)
    assert o.requests == [path.resolve().as_uri()], o.requests
    assert o.errors == [] and o.dialogs == [], (o.errors, o.dialogs)
    page = o.page
    ids = page.evaluate("() => Array.from(document.querySelectorAll('[id]')).map(e => e.id)")
    assert len(ids) == len(set(ids)), "element ids must be unique across the traces"
    for i in (0, 1):
        assert page.locator(f"#run{i}-headline .card").count() >= 10
        assert page.locator(f"#run{i}-timeline canvas").is_visible()
        # the task-time chart, and the chart of what the model calls wait for
        assert page.locator(f"#run{i}-whatif svg").count() == 2
        assert page.locator(f"#run{i}-whatif .waitingfor svg").count() == 1
    head = page.locator("#compare table.cmp").first.locator("thead th").all_inner_texts()
    assert head[1:] == ["short run", EVIL_LABEL]  # the label is text, not markup
    assert "simulated: the first run's model" in page.locator("#compare-notes").text_content()
    assert page.locator("#compare .cmprow .splitbar").count() == 2
    page.locator("#compare").screenshot(path=str(tmp_path / "compare.png"))
    assert (tmp_path / "compare.png").stat().st_size > 5_000
    page.close()
