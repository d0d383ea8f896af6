"""The flame (icicle) view of sampled stacks: its data, and the view in a real headless Chromium."""

from __future__ import annotations

import pytest

from agentprof.analysis import analyze
from agentprof.importers import load_any
from agentprof.report.flame import flame_data
from agentprof.report.html import write_report

from ..analysis import cpu_heavy_agent


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    run = cpu_heavy_agent.run(str(tmp_path_factory.mktemp("flame")), steps=4, sample=0.002)
    return load_any(run.path)


def _names(tree, frames, out):
    if tree[0] >= 0:
        out.add(frames[tree[0]][0])
    for k in tree[3]:
        _names(k, frames, out)
    return out


def test_flame_trees_per_place(sampled):
    f = flame_data(sampled)
    places = {p["where"]: p for p in f["places"]}
    assert f["places"][0]["where"] == "orchestration"
    orch = places["orchestration"]
    assert "rank_candidate_patches" in _names(orch["tree"], f["frames"], set())
    # a node's width is at least its children's
    def check(node):
        assert node[1] + 1e-5 * (1 + len(node[3])) >= sum(k[1] for k in node[3])
        assert node[2] >= 0
        for k in node[3]:
            check(k)
    for p in f["places"]:
        check(p["tree"])
        assert p["tree"][1] == pytest.approx(p["wall_s"], rel=1e-6, abs=1e-6)
    for where, p in places.items():
        if where.startswith("tool:"):  # rooted at the tool's own function, not agentprof's wrapper
            top = {f["frames"][k[0]][1] for k in p["tree"][3]}
            assert not any("/agentprof/capture/" in t for t in top), top


def test_unsampled_trace_has_no_flame(tmp_path):
    run = cpu_heavy_agent.run(str(tmp_path), steps=1, sample=False)
    assert flame_data(load_any(run.path)) is None


@pytest.mark.browser
def test_flame_view_renders_without_console_errors(sampled, browser, tmp_path):
    path = write_report(tmp_path / "flame.html", sampled, analysis=analyze(sampled))
    o = browser.open(path)
    assert o.errors == [], o.errors
    assert o.requests == [path.resolve().as_uri()], o.requests
    page = o.page
    assert page.locator("#flame").is_visible()
    bars = page.locator("#flame .flame > div")
    assert bars.count() >= 3
    assert page.locator("#flame .flame").get_by_text("rank_candidate_patches").count() >= 1
    # zoom into a bar and back out
    page.locator("#flame .flame").get_by_text("rank_candidate_patches").first.click()
    assert page.locator("#flame .flame > div").first.text_content().startswith("rank_candidate_patches")
    page.locator("#flame .flame > div").first.click()
    options = page.locator("#flame select option")
    assert options.count() >= 2
    page.locator("#flame select").select_option(index=1)
    assert page.locator("#flame .flame > div").count() >= 1
    assert o.errors == [], o.errors
    o.page.close()


@pytest.mark.browser
def test_comparison_page_draws_the_flame_view_of_its_sampled_run(sampled, browser, tmp_path):
    """On a page of several traces (the demo's), the sampled run gets its own view inside its block, the
    unsampled one none, and element ids stay unique."""
    from agentprof.report.compare import ComparePart, write_compare_report
    from agentprof.report.stages import run_stages

    from .report_support import synthetic_session

    plain = synthetic_session(turns=6, subagent=False)
    parts = []
    for label, t in (("unsampled", plain), ("sampled", sampled)):
        r = run_stages(t, ["h200+x86"], serving=[])
        parts.append(ComparePart(label, t, r.analysis, r.replay, r.cache, r.notes, r.cache_model))
    path = write_compare_report(tmp_path / "cmp.html", parts, title="two runs")
    o = browser.open(path)
    assert o.errors == [], o.errors
    page = o.page
    assert page.locator("#run0-flame").count() == 0 and page.locator("#flame").count() == 0
    view = page.locator("#run1 > #run1-flame")
    assert view.is_visible()
    assert view.locator(".flame").get_by_text("rank_candidate_patches").count() >= 1
    ids = page.evaluate("() => Array.from(document.querySelectorAll('[id]')).map(e => e.id)")
    assert len(ids) == len(set(ids))
    o.page.close()
