"""Failed model and tool calls are counted, timed and grouped by error type, from captured and imported traces."""

from __future__ import annotations

import json

import pytest

import agentprof
from agentprof.analysis import analyze
from agentprof.importers import load_any

from .analysis_helpers import ROOT, SAMPLES

FIXTURES = ROOT / "tests" / "importers" / "fixtures"


def test_a_captured_tool_error_is_a_failed_tool_call(tmp_path):
    @agentprof.tool
    def flaky(i: int) -> int:
        if i % 3 == 0:
            raise TimeoutError("slow")
        return i

    with agentprof.profile("failing", out=tmp_path) as run:
        for i in range(7):
            try:
                flaky(i)
            except TimeoutError:
                pass
    f = analyze(run.load()).to_dict()["failures"]
    assert (f["model_calls"], f["tool_calls"], f["untimed"]) == (0, 3, 0)  # i = 0, 3, 6
    (g,) = f["by_error_type"]
    assert (g["kind"], g["error_type"], g["count"]) == ("tool", "TimeoutError", 3)
    assert g["time_s"] == pytest.approx(f["tool_s"], rel=1e-9)  # summed in another order
    assert 0 < f["tool_s"] < 5


def test_claude_code_api_errors_are_failed_model_calls():
    path = FIXTURES / "cc_api_errors.jsonl"
    raw = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    n_errors = sum(1 for r in raw if r.get("isApiErrorMessage"))
    f = analyze(load_any(path)).to_dict()["failures"]
    assert f["model_calls"] == n_errors > 0 and f["tool_calls"] == 0
    assert sum(g["count"] for g in f["by_error_type"]) == n_errors
    assert all(g["error_type"] not in ("", None) for g in f["by_error_type"])


@pytest.mark.parametrize("sample", ["claude-code", "mini-swe-agent"])
def test_failures_of_real_traces_are_their_error_spans(sample):
    f = analyze(load_any(SAMPLES / sample)).to_dict()["failures"]
    spans = load_any(SAMPLES / sample).spans
    expected = spans.filter((spans["status"] == "error") & spans["kind"].is_in(["model", "tool"])).height
    assert f["model_calls"] + f["tool_calls"] == expected
    assert sum(g["count"] for g in f["by_error_type"]) == expected

