"""``agentprof diff`` as CI runs it, on real captured runs of a small agent (:mod:`.diff_agent`: the real openai
SDK against a loopback model server, ``@agentprof.tool`` tools): one run a side with ``run_tests`` 30 ms -> 150 ms
fails ``--fail-if-slower 20``; unchanged runs pass it, also when one side ran with busy loops on the agent's CPU
(the CPU-bound ``lint`` slowed by them is put down to the machine), while the sleeping ``run_tests`` made slower
on the loaded side is flagged; ``--format markdown`` / ``json``; a stored baseline. No timing is asserted, only
what is flagged and the exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentprof.cli import main

from .diff_agent import capture, steady_like, steady_pair

LOAD = 2  # busy loops on the agent's CPU


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ci-runs")
    capture(d / "warm", 0.03)  # the process's first run pays one-time costs (imports, first calls); not compared
    base, slow = steady_pair(d, 0.03, 0.15)  # on a machine other tests load too: a pair loaded alike
    return {"base": base, "slow": slow, "same": steady_like(base, d / "same", 0.03),
            "loaded": capture(d / "loaded", 0.03, load=LOAD), "slow_loaded": capture(d / "slow_loaded", 0.09, load=LOAD)}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _sig(doc: dict) -> set[tuple[str, str]]:
    return {(c["metric"], c["scope"]) for c in doc["changes"] if c["significant"]}


def test_one_run_a_side_a_5x_slower_tool_is_flagged_alone_and_fails_the_gate(runs, capsys):
    code, out, err = cli(capsys, "diff", str(runs["base"]), str(runs["slow"]), "--fail-if-slower", "20", "--json")
    assert code == 1
    doc = json.loads(out)
    assert _sig(doc) == {("call_s", "tool:run_tests")}
    rt = next(c for c in doc["changes"] if (c["metric"], c["scope"]) == ("call_s", "tool:run_tests"))
    assert rt["n_base"] == rt["n_new"] == 3 and rt["runs_base"] == rt["runs_new"] == 1
    assert 4.0 < rt["ratio"] < 6.0 and rt["p_adjusted"] < 0.01
    # every other tool was tested on its calls and is not flagged
    tools = [c for c in doc["changes"] if c["metric"] == "call_s" and c["scope"].startswith("tool:")]
    assert {c["scope"] for c in tools} == {"tool:run_tests", "tool:read_file", "tool:search", "tool:list_files",
                                           "tool:lint"}
    assert all(c["p_adjusted"] is not None for c in tools if c["scope"] in ("tool:read_file", "tool:search"))
    assert [(f["metric"], f["scope"], f["tested"]) for f in doc["failed"]] == [("call_s", "tool:run_tests", True)]
    assert [ln for ln in err.splitlines() if ln.startswith("FAIL ")] == ["FAIL " + doc["failed"][0]["line"]]
    # a threshold above the slowdown passes
    code, out, _ = cli(capsys, "diff", str(runs["base"]), str(runs["slow"]), "--fail-if-slower", "1000", "--json")
    assert code == 0 and json.loads(out)["failed"] == []


@pytest.mark.parametrize("pair", [("base", "same"), ("base", "loaded"), ("loaded", "base")])
def test_unchanged_runs_flag_nothing_and_pass_the_gate_also_on_a_loaded_machine(runs, capsys, pair):
    code, out, err = cli(capsys, "diff", str(runs[pair[0]]), str(runs[pair[1]]), "--fail-if-slower", "20", "--json")
    doc = json.loads(out)
    assert (code, _sig(doc), doc["failed"]) == (0, set(), []), [c for c in doc["changes"] if c["significant"]]
    assert not err.startswith("FAIL")
    assert doc["method"]["figures_tested"] >= 8  # the tools, the model's calls, TTFT, output rate, gaps, reuse
    assert doc["load"]["base_cpu_wait_s"] is not None and doc["load"]["new_cpu_wait_s"] is not None


def _change(doc: dict, metric: str, scope: str) -> dict:
    return next(c for c in doc["changes"] if (c["metric"], c["scope"]) == (metric, scope))


def test_a_sleeping_tool_made_slower_on_a_loaded_machine_is_flagged_not_put_down_to_load(runs, capsys):
    code, out, err = cli(capsys, "diff", str(runs["base"]), str(runs["slow_loaded"]), "--fail-if-slower", "20",
                         "--json")
    doc = json.loads(out)
    rt = _change(doc, "call_s", "tool:run_tests")
    # the run-wide rule would have excused it: the agent's thread waited more than half the added time more
    assert 2 * doc["load"]["new_minus_base_s"] >= rt["added_s_per_run"] > 0
    # its own calls slept and barely waited for a CPU: load explains little of it, and it is flagged
    assert 0 <= rt["load_explains_s_per_run"] < rt["added_s_per_run"] / 2 and rt["load_share"] < 0.5
    assert code == 1 and _sig(doc) == {("call_s", "tool:run_tests")}
    assert [f["scope"] for f in doc["failed"]] == ["tool:run_tests"] and "FAIL call_s [tool:run_tests]" in err
    lint = _change(doc, "call_s", "tool:lint")  # the CPU-bound tool on the same loaded side: the machine's
    assert lint["load_explained"] and not lint["significant"]


def test_a_cpu_bound_tool_slowed_by_load_alone_is_put_down_to_the_machine(runs, capsys, monkeypatch):
    code, out, _ = cli(capsys, "diff", str(runs["base"]), str(runs["loaded"]), "--fail-if-slower", "20", "--json")
    lint = _change(json.loads(out), "call_s", "tool:lint")
    assert code == 0 and lint["ratio"] > 1.1 and lint["added_s_per_run"] > 0, lint
    assert lint["load_explained"] and lint["load_share"] == 1.0 and not lint["significant"], lint
    assert lint["load_explains_s_per_run"] == lint["added_s_per_run"]
    monkeypatch.setenv("COLUMNS", "80")  # the terminal says the same, in 80 columns
    code, out, _ = cli(capsys, "diff", str(runs["base"]), str(runs["loaded"]), "--fail-if-slower", "20")
    assert code == 0 and max(len(ln) for ln in out.splitlines()) <= 80, out
    row = next((ln for ln in out.splitlines() if ln.lstrip().startswith("tool lint")), out)
    assert row.split()[-2:] == ["100%", "no"], row  # load explains all of it; tested, not significant
    code, out, _ = cli(capsys, "diff", str(runs["base"]), str(runs["loaded"]), "--format", "markdown")
    row = next(ln for ln in out.splitlines() if ln.startswith("| tool lint "))  # the pull-request comment too
    assert row.split(" | ")[5] == "100%", row


def test_markdown_names_the_changed_tool_in_a_table(runs, capsys):
    code, out, _ = cli(capsys, "diff", str(runs["base"]), str(runs["slow"]), "--fail-if-slower", "20",
                       "--format", "markdown")
    assert code == 1
    assert out.startswith("### agentprof diff: ❌ 1 failing figure(s)")
    lines = out.splitlines()
    head = lines.index("| figure | base | new | ratio | p (adj.) | load explains | tested on |")
    assert lines[head + 1] == "|---|--:|--:|--:|--:|--:|---|"
    row = lines[head + 2]
    assert row.startswith("| **tool run\\_tests** | ") and row.endswith(" | 3 vs 3 calls (1 vs 1 runs) |")
    assert lines[head + 3] == ""  # the changed figures only; every figure is in the folded table
    assert "<details><summary>All " in out
    code, out, _ = cli(capsys, "diff", str(runs["base"]), str(runs["same"]), "--format", "markdown")
    assert code == 0 and out.startswith("### agentprof diff: ✅ no significant change")


def test_a_stored_baseline_without_prompts_gates_a_new_run(runs, capsys, tmp_path):
    base = tmp_path / "ci" / "baseline.json"
    code, out, _ = cli(capsys, "diff", "--save-baseline", str(base), str(runs["base"]), str(runs["same"]))
    assert code == 0 and out.startswith(f"wrote {base}: 2 run(s)")
    text = base.read_text(encoding="utf-8")
    assert "You fix bugs" not in text and "Fix the mean" not in text and "passed" not in text  # no prompt, no output
    assert base.stat().st_size < runs["base"].stat().st_size / 4
    code, out, _ = cli(capsys, "diff", str(base), str(runs["slow"]), "--fail-if-slower", "20", "--json")
    doc = json.loads(out)
    assert code == 1 and _sig(doc) == {("call_s", "tool:run_tests")}
    rt = next(c for c in doc["changes"] if (c["metric"], c["scope"]) == ("call_s", "tool:run_tests"))
    assert rt["n_base"] == 6 and rt["runs_base"] == 2 and doc["base"]["baseline"] == "baseline.json"
    code, out, _ = cli(capsys, "diff", str(base), str(runs["loaded"]), "--fail-if-slower", "20", "--json")
    assert (code, _sig(json.loads(out))) == (0, set())


def test_bad_baseline_and_bad_arguments_give_one_error_line(runs, capsys, tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text('{"agentprof_baseline": 1, "runs": ["a"], "per_run": [{"metric": "wall_s"}]}', encoding="utf-8")
    code, _, err = cli(capsys, "diff", str(bad), str(runs["slow"]))
    assert code == 2 and err.startswith(f"error: {bad}: malformed baseline: missing entry 'scope'")
    code, _, err = cli(capsys, "diff", "--save-baseline", str(tmp_path / "b.txt"), str(runs["base"]))
    assert code == 2 and "use .json" in err and "Traceback" not in err
    code, _, err = cli(capsys, "diff", "--save-baseline", str(tmp_path / "c.json"))
    assert code == 2 and "needs the runs to store" in err
