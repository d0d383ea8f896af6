"""agentprof.analysis.baseline: a stored side compares like the trace it came from, and a file that is not a
baseline gives one clear error."""

from __future__ import annotations

import json

import pytest

from agentprof.analysis import baseline
from agentprof.analysis.diff import compare, figures
from agentprof.errors import AgentprofError

from .test_diff import _loaded_run, runs_trace


def test_a_stored_side_compares_like_its_trace(tmp_path):
    side = figures(runs_trace(3, 1.0), "BASE", "main")
    new = figures(runs_trace(3, 3.0, prefix="n"), "NEW", "pr")
    path = baseline.save(side, tmp_path / "b.json")
    assert baseline.is_baseline(path) and not baseline.is_baseline(tmp_path)
    stored = baseline.load(path)
    assert stored.analysis is None and stored.runs == side.runs and stored.info["label"] == "b.json"
    direct, again = compare(side, new), compare(stored, new)
    assert [c.key for c in again.changes] == [c.key for c in direct.changes]
    for a, b in zip(direct.changes, again.changes, strict=True):
        assert (a.significant, a.n_base, a.runs_base) == (b.significant, b.n_base, b.runs_base)
        assert b.base == pytest.approx(a.base, rel=1e-5) if a.base is not None else b.base is None
        assert b.p == pytest.approx(a.p, rel=1e-3, abs=1e-12) if a.p is not None else b.p is None
    assert ("call_s", "tool:grep") in {c.key for c in again.significant}


def test_a_stored_side_keeps_its_spans_waits_for_a_cpu(tmp_path):
    side = figures(_loaded_run("b", 0.100, runq_s=0.05, tool_runq_s=0.0), "BASE", "main")
    new = figures(_loaded_run("n", 0.130, runq_s=0.55, tool_runq_s=0.01), "NEW", "pr")
    stored = baseline.load(baseline.save(side, tmp_path / "b.json"))
    direct, again = (compare(s, new).change("call_s", "tool:grep") for s in (side, stored))
    assert direct.load_s == pytest.approx(again.load_s) == pytest.approx(0.06)  # 2 x 3 x 10 ms more
    # a baseline stored with the run's wait alone (before groups were kept): the tool's share is unknown
    old = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
    old["per_run"] = [e for e in old["per_run"] if e["metric"] != "cpu_wait_s" or e["scope"] == "task"]
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    assert compare(baseline.load(tmp_path / "old.json"), new).change("call_s", "tool:grep").load_s is None


@pytest.mark.parametrize(("text", "expected"), [
    ("{not json", "line 1: not JSON"),
    ('{"something": 1}', "not an agentprof baseline of version 1"),
    ('{"agentprof_baseline": 1, "runs": [], "per_run": [], "samples": []}', "the baseline has no runs"),
    ('{"agentprof_baseline": 1, "runs": ["a"], "per_run": [], "samples": [{"metric": "call_s", "scope": "gap", '
     '"values": [0.1], "runs": [3]}]}', "samples[0].runs: expected one run index (0 to 0) per value"),
    ('{"agentprof_baseline": 1, "runs": ["a"], "per_run": [{"metric": "wall_s", "scope": "task", '
     '"values": ["x"]}], "samples": []}', "per_run[0].values: expected numbers or null"),
])
def test_a_file_that_is_not_a_baseline_says_what_is_wrong(tmp_path, text, expected):
    p = tmp_path / "b.json"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(AgentprofError) as e:
        baseline.load(p)
    assert str(e.value).startswith(str(p)) and expected in str(e.value)


def test_numbers_are_kept_to_six_digits_and_missing_values_as_null(tmp_path):
    side = figures(runs_trace(2, 1.0 / 3), "BASE")
    doc = baseline.to_dict(side)
    assert next(iter(doc)) == baseline.MARK
    vals = next(e["values"] for e in doc["samples"] if e["scope"] == "tool:grep")
    assert all(len(repr(v).replace(".", "").lstrip("0")) <= 7 for v in vals)
    json.dumps(doc, allow_nan=False)  # no NaN: missing values are null
