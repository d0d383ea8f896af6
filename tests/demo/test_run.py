"""``agentprof demo`` end to end (agentprof.demo.run): the real loopback server and openai SDK, the unmodified
demo agent under agentprof.profile, the bundled real session imported, both analyzed and replayed, and one
self-contained report with the two side by side. Expected figures are counted from the scripted plan, the
server's own log and independent imports of the raw files; no timing is asserted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import polars as pl
import pytest
from rich.console import Console

from agentprof.analysis import analyze
from agentprof.demo import agent
from agentprof.demo.agent_run import TASK
from agentprof.demo.run import CAPTURED_LABEL, run_demo
from agentprof.demo.sample_repo import FILES
from agentprof.demo.samples import SAMPLES, sample_paths
from agentprof.demo.script import PLAN
from agentprof.demo.terminal import show_result
from agentprof.importers import load_any
from agentprof.replay import replay
from agentprof.report.formats import fmt_duration
from agentprof.trace import read

TOOL_NAMES = set(agent.TOOLS)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    base = tmp_path_factory.mktemp("demo")
    steps: list[str] = []
    result = run_demo(out_dir=base / "reports", traces_dir=base / "traces", repo_dir=base / "repo",
                      step=steps.append)
    return result, base, steps


@pytest.fixture(scope="module")
def spans(demo):
    result, _, _ = demo
    return read(result.agent.trace_path).spans


def _dur_sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort("start_ns")


def test_the_agent_fixed_the_planted_bug(demo):
    result, base, _ = demo
    a = result.agent
    assert a.before.ran == a.after.ran > 0 and a.before.failed >= 1  # the fresh copy had the bug
    assert a.after.passed
    # independently of the demo: the repository the agent left behind passes its own tests
    proc = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests"], cwd=base / "repo",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    changed = [rel for rel, text in FILES.items() if (base / "repo" / rel).read_text(encoding="utf-8") != text]
    assert changed == ["calc/stats.py"]
    assert a.answer == PLAN[-1].text  # the loop ended on the model's final, tool-free answer
    assert result.agent.trace_path.parent == base / "traces"


def test_one_streamed_model_call_per_plan_turn_with_the_servers_figures(demo, spans):
    result, _, _ = demo
    calls = _dur_sorted(spans.filter(pl.col("kind") == "model"))
    served = result.agent.served
    assert calls.height == len(PLAN) == len(served)
    assert set(calls["name"]) == {"chat gpt-oss-120b"}
    assert calls["input_tokens"].to_list() == [c.prompt_tokens for c in served]
    assert calls["cache_read_tokens"].to_list() == [c.cached_tokens for c in served]
    assert calls["output_tokens"].to_list() == [c.output_tokens for c in served]
    assert calls["stream"].to_list() == [True] * len(PLAN)
    assert calls["ttft_s"].is_not_null().all() and (calls["ttft_s"] > 0).all()
    assert served[0].cached_tokens == 0 and all(c.cached_tokens > 0 for c in served[1:])  # the prefix repeats


def test_tools_json_parses_and_child_processes_nest_under_the_right_spans(spans):
    root = spans.filter(pl.col("kind") == "agent")
    assert root.height == 1 and root["name"][0] == "invoke_agent demo-agent" and root["parent_id"][0] is None
    root_id = root["span_id"][0]
    assert spans["session_id"].n_unique() == 1
    names = spans["name"].to_list()
    tools = spans.filter(pl.col("name").str.strip_prefix("execute_tool ").is_in(list(TOOL_NAMES)))
    expected = Counter(name for turn in PLAN for name, _ in turn.tool_calls)
    assert Counter(n.removeprefix("execute_tool ") for n in tools["name"]) == expected
    assert set(tools["parent_id"]) == {root_id}  # run in the agent's thread pool, nested under the agent
    parses = spans.filter(pl.col("kind") == "parse")
    assert parses.height == sum(expected.values()) and set(parses["name"]) == {"json.loads"}
    assert set(parses["parent_id"]) == {root_id}
    # every tool call and argument parse happens between its turn's model call and the next one
    calls = _dur_sorted(spans.filter(pl.col("kind") == "model"))
    for i, turn in enumerate(PLAN):
        lo = calls["end_ns"][i]
        hi = calls["start_ns"][i + 1] if i + 1 < calls.height else root["end_ns"][0]
        inside = tools.filter((pl.col("start_ns") >= lo) & (pl.col("end_ns") <= hi))
        assert sorted(n.removeprefix("execute_tool ") for n in inside["name"]) == sorted(n for n, _ in turn.tool_calls)
        assert parses.filter((pl.col("start_ns") >= lo) & (pl.col("end_ns") <= hi)).height == len(turn.tool_calls)
    # the test runs: one child process each, nested under its run_tests span
    runs = tools.filter(pl.col("name") == "execute_tool run_tests")
    subs = spans.filter(pl.col("name").str.starts_with("execute_tool subprocess:")
                        & pl.col("parent_id").is_in(runs["span_id"].to_list()))
    assert sorted(subs["parent_id"].to_list()) == sorted(runs["span_id"].to_list())
    assert all(n.removeprefix("execute_tool subprocess:").startswith("python") for n in subs["name"])
    # children lie inside their parents
    ends = dict(zip(spans["span_id"], zip(spans["start_ns"], spans["end_ns"], strict=True), strict=True))
    for sid, parent, s, e in spans.select("span_id", "parent_id", "start_ns", "end_ns").iter_rows():
        if parent is not None:
            ps, pe = ends[parent]
            assert ps <= s <= e <= pe, (sid, names)


def test_no_prompt_or_tool_text_is_stored(demo):
    raw = demo[0].agent.trace_path.read_bytes()
    for text in (TASK, agent.SYSTEM_PROMPT.splitlines()[0], PLAN[2].text, "BUG (planted for the demo)",
                 "tests/test_stats.py"):
        assert text.encode() not in raw, text


def _payload(html: str) -> dict:
    m = re.search(r'<script id="agentprof-data" type="application/json">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def test_report_is_one_offline_file_with_both_traces(demo):
    result, base, _ = demo
    path = base / "reports" / "demo.html"
    assert result.report_path == path and path.is_file()
    html = path.read_text(encoding="utf-8")
    assert "default-src 'none'" in html and "<link" not in html.lower()
    assert not re.search(r"""\b(?:src|href)\s*=\s*["'](?!#|data:)""", html)
    d = _payload(html)
    runs = d["compare"]["runs"]
    assert [r["label"] for r in runs] == [CAPTURED_LABEL, SAMPLES["codex"].label]
    assert runs[0]["payload"]["meta"]["sources"] == [result.agent.trace_path.name]
    assert runs[1]["payload"]["meta"]["sources"] == [p.name for p in sample_paths(SAMPLES["codex"])]
    assert [w["name"] for w in d["compare"]["whatif"]] == ["recorded", "h200+x86", "jalapeno", "rubin+vera"]
    notes = " ".join(d["compare"]["notes"])
    assert "Simulated" in notes and "Real" in notes and "127.0.0.1" in notes


def test_captured_columns_are_the_captured_traces_figures(demo, spans):
    result, _, _ = demo
    rows = {r["key"]: r["values"] for r in result.compare["table"]}
    assert rows["model_calls"][0] == spans.filter(pl.col("kind") == "model").height
    assert rows["tool_calls"][0] == spans.filter(pl.col("kind") == "tool").height
    assert rows["input_tokens"][0] == sum(c.prompt_tokens for c in result.agent.served)
    cached = sum(c.cached_tokens for c in result.agent.served)
    assert rows["cache_read_share"][0] == pytest.approx(cached / rows["input_tokens"][0])


def test_imported_columns_match_the_importer_and_stages(demo):
    result, _, _ = demo
    trace = load_any(sample_paths(SAMPLES["codex"]))
    a = analyze(trace).to_dict()
    rows = {r["key"]: r["values"] for r in result.compare["table"]}
    assert rows["model_calls"][1] == a["model_calls"] == trace.spans.filter(pl.col("kind") == "model").height
    assert rows["wall_s"][1] == pytest.approx(a["time"]["wall_s"])
    for kind in ("model", "tool", "orchestration", "wait"):
        assert rows[f"share_{kind}"][1] == pytest.approx(a["time"][f"{kind}_s"] / a["time"]["wall_s"])
    assert rows["amdahl_bound_s"][1] == pytest.approx(a["time"]["amdahl_bound_s"])
    assert rows["prefix_reuse_median"][1] == pytest.approx(a["redundancy"]["prefix_reuse_prev"]["median"])
    r = replay(trace, result.systems)
    for w in result.compare["whatif"][1:]:
        row = next(s for s in r.systems if s.name == w["name"])
        assert w["cells"][1]["e2e_s"] == pytest.approx(row.e2e_s)
        assert w["cells"][1]["speedup"] == pytest.approx(row.speedup_vs_recorded)


def test_terminal_shows_figures_what_if_and_what_is_simulated(demo):
    result, _, steps = demo
    con = Console(record=True, width=200)
    show_result(result, con)
    out = con.export_text()
    for needle in ("fixed the planted bug", str(result.agent.trace_path), "Where the time went", "Device what-if",
                   "Amdahl bound", "h200+x86", "jalapeno", "rubin+vera", "Simulated:", "Real:", "InferenceX",
                   str(result.report_path), "captured demo run", "real Codex CLI"):
        assert needle in out, needle
    cal = result.calibration
    assert cal is not None and cal.covered > 0
    # the error quoted is the held-out one where the model is weakest: prompts longer than any it was fitted on
    from agentprof.replay.calibration import DEFAULT_POINTS
    from agentprof.resources import find

    assert cal.prompt_tokens[0] > pl.read_csv(find(DEFAULT_POINTS), infer_schema_length=100000)["isl"].max()
    said = next(p for p in result.disclosure if "every device what-if" in p)
    assert f"On {cal.covered:,} official InferenceX points with {cal.prompt_tokens[0]:,}-token prompts" in said
    assert f"median error TTFT {cal.median['ttft'] * 100:.0f} %" in said and f"{cal.off_5x} off by over 5×" in said
    for paragraph in result.disclosure:  # what is simulated and what is real, each readable at a glance
        assert len([w for w in paragraph.split() if re.search(r"\w", w)]) <= 60, paragraph
    assert steps and "127.0.0.1" in steps[0]
    narrow = Console(record=True, width=80)
    show_result(result, narrow)
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    for w in result.compare["whatif"][1:]:  # each system's task time and speed-up whole, on its row
        c = w["cells"][1]
        assert any(line.startswith(w["name"]) and fmt_duration(c["e2e_s"]) in line and f"{c['speedup']:.2f}×" in line
                   for line in text.splitlines()), w["name"]
