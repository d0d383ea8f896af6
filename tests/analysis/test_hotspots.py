"""Stack samples attributed to spans and gaps, hotspots and measured CPU-bound shares (analysis.hotspots)."""

from __future__ import annotations

import dataclasses
import json
import re

import polars as pl
import pytest

from agentprof.analysis import analyze
from agentprof.analysis.hotspots import profile
from agentprof.analysis.tools import tool_figures, tool_spans
from agentprof.importers import load_any

from . import cpu_heavy_agent


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    out = tmp_path_factory.mktemp("sampled")
    # a loop long enough (~0.8 s) that a tenth of a second blocked on a busy machine (the main thread waits on pool
    # threads that wait for a CPU) cannot pull its CPU-bound share under the bound tested below
    run = cpu_heavy_agent.run(str(out), sample=0.002, work=1_500_000)
    return run.path, load_any(run.path)


def test_named_loop_function_is_top_orchestration_hotspot_and_cpu_bound(sampled):
    _, trace = sampled
    a = analyze(trace)
    d = a.to_dict()
    orch = [h for h in d["hotspots"] if h["where"] == "orchestration"]
    assert orch, d["hotspots"][:5]
    assert orch[0]["frame"] == "rank_candidate_patches"
    assert orch[0]["file"].endswith("cpu_heavy_agent.py")
    assert orch[0]["samples"] >= 5 and orch[0]["self_s"] <= orch[0]["total_s"]
    # the function runs outside every span: most sampled orchestration time is in it
    assert orch[0]["self_s"] > 0.5 * sum(h["self_s"] for h in orch)
    cb = d["cpu_bound"]
    assert cb["sampled"] is True
    assert cb["orchestration_cpu_share"] >= 0.8, cb
    assert d["time"]["orchestration_cpu_s"] == pytest.approx(cb["orchestration_cpu_s"])
    assert 0 < d["time"]["orchestration_cpu_s"] <= d["time"]["wall_s"]


def test_tool_samples_carry_their_span_on_any_thread_and_task(sampled):
    _, trace = sampled
    prof = profile(trace)
    a = prof.attributed
    where = set(a.where.tolist())
    assert {"orchestration"} <= where
    # the thread-pool tool ran on a worker thread: its samples (if any) are attributed to its own span
    names = trace.spans.get_column("name").to_list()
    for i in range(len(a.samples)):
        r = int(a.span_row[i])
        if a.samples.span_id[i] is not None:
            assert r >= 0 and names[r].startswith(("execute_tool", "tool_result"))
    tools = {t["tool"]: t for t in prof.tools}
    assert set(tools) == {"read_file", "count_tokens", "fetch"}
    # read_file sleeps: far from CPU-bound; the loop function is
    assert tools["read_file"]["cpu_bound_share"] < 0.5
    assert all(0 <= t["cpu_bound_share"] <= 1 for t in tools.values())


def test_hotspot_rows_have_the_documented_keys_and_places(sampled):
    _, trace = sampled
    hs = analyze(trace).to_dict()["hotspots"]
    assert hs and all(set(h) >= {"frame", "file", "where", "samples", "self_s", "total_s"} for h in hs)
    assert all(h["where"] in ("orchestration", "parse") or h["where"].startswith("tool:") for h in hs)
    assert [h["self_s"] for h in hs] == sorted((h["self_s"] for h in hs), reverse=True)


def test_tool_places_name_tools_by_the_analysis_rule(sampled):
    # a recorded gen_ai.tool.name wins over the span name: count_tokens' spans recorded as "tokenize"
    _, trace = sampled
    attrs = pl.col("attributes").str.replace('"gen_ai.tool.name": "count_tokens"', '"gen_ai.tool.name": "tokenize"',
                                             literal=True)
    renamed = dataclasses.replace(trace, spans=trace.spans.with_columns(attrs))
    names = {t["name"] for t in tool_figures(tool_spans(renamed.spans))}
    assert names == {"read_file", "fetch", "tokenize"}
    prof = profile(renamed)
    assert {t["tool"] for t in prof.tools} == names
    places = {w.removeprefix("tool:") for w in prof.attributed.where.tolist() if w.startswith("tool:")}
    places |= {w.removeprefix("tool:") for w in prof.units.get_column("where").to_list() if w.startswith("tool:")}
    assert places and places <= names


def test_units_cover_gaps_with_top_frames(sampled):
    _, trace = sampled
    units = profile(trace).units
    gaps = units.filter(units["gap"].is_not_null())
    assert gaps.height >= 3
    top = [f for fs in gaps.get_column("top_frames").to_list() for f in fs[:1]]
    assert any(f.startswith("rank_candidate_patches") for f in top)
    assert (gaps.get_column("wall_s") > 0).all()
    rows = analyze(trace).to_dict()["cpu_bound"]["units"]
    assert rows and {"span_id", "gap", "where", "wall_s", "cpu_s", "samples", "top_frames"} <= set(rows[0])
    assert any(r["gap"] is not None for r in rows) and any(r["where"].startswith("tool:") for r in rows)


def test_samples_stay_in_the_jsonl_and_older_readers_skip_them(sampled):
    path, trace = sampled
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    sample_recs = [r for r in recs if r["record"] == "samples"]
    assert sample_recs and sum(len(r["dt"]) for r in sample_recs) == len(trace.samples)
    text = path.read_text()
    assert "1_000_003" not in text and "score" not in text  # names and files only, no values or source
    # a reader that knows only meta and span records keeps every span
    spans = [r for r in recs if r["record"] == "span"]
    assert len(spans) == trace.spans.height


def test_unsampled_capture_still_measures_orchestration_cpu(tmp_path):
    run = cpu_heavy_agent.run(str(tmp_path), steps=3, sample=False)
    trace = load_any(run.path)
    assert trace.samples is None
    d = analyze(trace).to_dict()
    assert d["hotspots"] == [] and d["cpu_bound"]["sampled"] is False
    assert d["time"]["orchestration_cpu_s"] > 0
    assert d["cpu_bound"]["orchestration_cpu_share"] >= 0.5


def test_imported_traces_have_no_cpu_figures():
    from pathlib import Path

    sample = next(Path("traces/samples").rglob("*.jsonl"))
    d = analyze(load_any(sample)).to_dict()
    assert d["time"]["orchestration_cpu_s"] is None and d["hotspots"] == []


def _analyze_at(columns: int, path, capsys, monkeypatch) -> str:
    """What ``agentprof analyze PATH`` prints on a terminal ``columns`` wide."""
    from agentprof.cli import main

    monkeypatch.setenv("COLUMNS", str(columns))
    try:
        main(["analyze", str(path)])
    except SystemExit as e:
        assert not e.code
    return capsys.readouterr().out


def test_terminal_shows_cpu_bound_shares_and_top_functions(sampled, capsys, monkeypatch):
    out = _analyze_at(220, sampled[0], capsys, monkeypatch)
    assert "CPU-bound" in out and "Hotspots: top" in out
    lines = [ln for ln in out.splitlines() if "rank_candidate_patches" in ln]
    assert lines and "orchestration" in lines[0]
    assert "read_file" in out and "count_tokens" in out


def test_hotspots_fit_80_columns_with_whole_names_and_short_files(sampled, capsys, monkeypatch):
    """An 80-column terminal: one table whose rows hold each function's name whole, its file (from the working
    directory, an installed package's folder or the standard library's) on the line under it."""
    from pathlib import Path

    monkeypatch.chdir(Path(cpu_heavy_agent.__file__).resolve().parents[2])
    out = _analyze_at(80, sampled[0], capsys, monkeypatch).splitlines()
    assert all(len(ln) <= 80 for ln in out)
    start = next(i for i, ln in enumerate(out) if ln.startswith("Hotspots: top"))
    table = out[start:next(i for i, ln in enumerate(out) if i > start and ln.startswith("self: sampled"))]
    assert sum(ln.lstrip().startswith("function / file") for ln in table) == 1, "\n".join(out)  # not stacked
    row = next(i for i, ln in enumerate(table) if ln.split() and ln.split()[0] == "rank_candidate_patches")
    assert "orchestration" in table[row]
    # the lines under it up to the next row hold its file (folded when the column is narrower than the path)
    figure = re.compile(r"\d (?:ms|µs|s)\b")
    under = []
    for ln in table[row + 1:]:
        if figure.search(ln):
            break
        under.append(ln.split()[0] if ln.split() else "")
    assert "".join(under) == "tests/analysis/cpu_heavy_agent.py"
