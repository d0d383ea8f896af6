"""Panels from real stage results: they reshape analysis, replay and cache-sweep output without changing it."""

from __future__ import annotations

import polars as pl
import pytest

from agentprof.report.headline import trace_figures
from agentprof.report.results import cache_panel, corpus_panel, redundancy_panel, whatif_panel
from agentprof.report.stages import run_stages


@pytest.fixture(scope="module")
def staged(big_session):
    return run_stages(big_session, systems=["h200+x86", "jalapeno"], model="gpt-oss-120b", serving_bands=False)


def test_redundancy_series_follow_the_per_call_table(staged):
    a = staged.analysis
    panel = redundancy_panel(a, a.to_dict(), {})
    assert panel["status"] == "ok"
    calls = a.calls
    by_session = {s["id"]: s for s in panel["sessions"]}
    for (sid,), g in calls.group_by("session_id"):
        if sid not in by_session:
            assert g.get_column("best_reuse").drop_nulls().len() == 0
            continue
        s = by_session[sid]
        g = g.sort("call_index")
        assert s["x"] == [i + 1 for i in g.get_column("call_index").to_list()]
        want = [round(v, 4) if v is not None else None for v in g.get_column("prefix_reuse_prev").to_list()]
        assert s["reuse_prev"] == want
        assert [m["index"] for m in s.get("misses", [])] == \
            [i for i, c in enumerate(g.get_column("miss_cause").to_list()) if c]
    misses = a.to_dict()["cache_misses"]
    assert panel["n_misses"] == len(misses) == len(panel["misses"])
    for row, m in zip(panel["misses"], misses, strict=True):
        top = max(m["causes"], key=lambda c: c["score"])
        assert row["cause"] == top["cause"].replace("_", " ") and row["fix"] == top["fix"]
        assert row["call"] == m["call_index"] + 1


def test_whatif_rows_are_the_recorded_run_and_each_system(staged):
    d = staged.replay.to_dict()
    panel = whatif_panel(d)
    assert [r["name"] for r in panel["rows"]] == ["recorded", "h200+x86", "jalapeno"]
    for row, src in zip(panel["rows"], [d["recorded"], *d["systems"]], strict=True):
        assert row["e2e_s"] == pytest.approx(src["e2e_s"]) and row["model_s"] == pytest.approx(src["model_s"])
    assert panel["amdahl_bound_s"] == pytest.approx(d["recorded"]["amdahl_e2e_s"])
    assert any("replayed as" in n for n in panel["notes"])


def test_cache_curves_keep_the_sweep_points(staged):
    panel = cache_panel(staged.cache, model=staged.cache_model)
    assert panel["status"] == "ok" and panel["model"] == "gpt-oss-120b" and len(panel["tiers"]) == 2
    for curve, (_, sweep) in zip(panel["tiers"], staged.cache, strict=True):
        pts = [p for p in sweep.points if p["capacity_bytes"]]
        assert curve["capacity_bytes"] == [float(p["capacity_bytes"]) for p in pts]
        assert curve["hit_rate"] == [round(p["hit_rate"], 4) for p in pts]
        assert curve["unlimited"] == pytest.approx(sweep.unlimited_hit_rate)
    assert cache_panel(None)["status"] == "missing"


def test_corpus_view_uses_per_session_figures(kv_folder):
    res = run_stages(kv_folder, replay=False, cache=False)
    d = res.analysis.to_dict()
    panel = corpus_panel(kv_folder.spans, d, trace_figures(kv_folder.spans))
    top = [p for p in d["per_session"] if p["is_top_level"]]
    assert panel["n_sessions"] == len(top) == 19
    metrics = {m["key"]: m for m in panel["metrics"]}
    assert metrics["wall_s"]["values"] == [round(p["wall_s"], 4) for p in top]
    assert metrics["session_hit_rate"]["values"] == [round(p["session_hit_rate"], 4) for p in top]
    single = kv_folder.spans.filter(pl.col("session_id") == "trace_0001")
    assert corpus_panel(single, None, trace_figures(single)) is None  # one session: no corpus view
