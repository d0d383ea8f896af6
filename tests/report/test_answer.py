"""The report's first screen (agentprof.report.answer): the same figures as the what-if panel and the headline,
each range with its plain causes, the biggest lever, in the page, its JSON and the terminal."""

from __future__ import annotations

import pytest
from rich.console import Console

from agentprof.report.answer import answer, band_causes, parallel_tools_s
from agentprof.report.payload import build_payload
from agentprof.report.stages import run_stages
from agentprof.report.terminal import report_view, show

from .report_support import SEC, T0, make_trace, span


@pytest.fixture(scope="module")
def payload(big_session):
    res = run_stages(big_session, cache=False, serving=[])  # the default systems
    return build_payload(big_session, res.analysis, res.replay, None, notes=res.notes)


def test_answer_reads_the_replay_rows(payload):
    ans, rows = payload["answer"], {r["name"]: r for r in payload["whatif"]["rows"]}
    assert [s["name"] for s in ans["systems"]] == [n for n in rows if n != "recorded"]
    for s in ans["systems"]:
        row = rows[s["name"]]
        assert s["speedup"] == row["speedup"] and s["e2e_s"] == row["e2e_s"]  # one number, not recomputed
        band = row["band"].get("speedup_vs_recorded")
        if s["band"]:
            assert s["band"] == [min(band), max(band)] and s["band_causes"].endswith("estimates")
            assert "." not in s["band_causes"].replace(" are estimates", "")  # words, not parameter names
        assert s["why_not"]
    jal = next(s for s in ans["systems"] if s["name"] == "jalapeno")
    assert "Jalapeño's" in jal["band_causes"] and "the CPU-tier size" in jal["band_causes"]
    # the split sentence carries the headline's shares; the ceiling is the headline's Amdahl bound
    hl = payload["headline"]
    assert f"model calls {hl['shares']['model_s'] * 100:.0f} %" in ans["split"]
    assert ans["ceiling"]["speedup"] == hl["max_speedup"]
    # the lever is the largest saving: here the fastest system replayed
    best = max(ans["systems"], key=lambda s: s["speedup"])
    assert ans["lever"]["kind"] == "chip" and ans["lever"]["e2e_s"] == pytest.approx(best["e2e_s"])
    assert best["name"] in ans["lever"]["text"]


def test_why_not_names_the_largest_remaining_part():
    row = {"name": "x", "e2e_s": 100.0, "model_s": 9.0, "tool_s": 20.0, "orchestration_s": 1.0, "wait_s": 70.0,
           "model_speedup": 3.0}
    assert answer({}, {"status": "ok", "rows": [{"name": "recorded", "e2e_s": 150.0}, row]})["systems"][0][
        "why_not"] == "model calls are 9 % of the task; 70 % is waiting"
    # most of the waiting is the user's turn: named as such, with its share of the replayed task
    hl = {"waits_by_reason": {"user_turn": 66.0, "approval": 4.0}}
    got = answer(hl, {"status": "ok", "rows": [{"name": "recorded", "e2e_s": 150.0}, row]})["systems"][0]["why_not"]
    assert got == "model calls are 9 % of the task; 66 % is waiting for the user"
    slower = {**row, "model_speedup": 0.8}
    got = answer(hl, {"status": "ok", "rows": [{"name": "recorded", "e2e_s": 150.0}, slower]})["systems"][0]
    assert got["why_not"] == "its model calls are slower than the recorded ones (0.80×)"


def test_a_long_start_up_is_the_lever_when_it_saves_most():
    # 2.7 s before the first span of a 5.4 s task: more than the fastest chip saves (0.9 s)
    hl = {"time": {"wall_s": 5.4, "startup_s": 2.7}}
    rows = [{"name": "recorded", "e2e_s": 5.4, "tool_s": 1.2, "orchestration_s": 2.8},
            {"name": "x", "e2e_s": 4.5, "model_s": 0.6, "tool_s": 1.2, "orchestration_s": 2.8, "model_speedup": 2.0}]
    lever = answer(hl, {"status": "ok", "rows": rows})["lever"]
    assert lever["kind"] == "startup" and lever["saved_s"] == 2.7 and lever["e2e_s"] == pytest.approx(2.7)
    assert lever["text"].startswith("starting faster (the 2.70 s before the first span")
    # a start-up shorter than the chip's saving leaves the chip the lever
    hl["time"]["startup_s"] = 0.5
    assert answer(hl, {"status": "ok", "rows": rows})["lever"]["kind"] == "chip"


def test_band_causes_in_words():
    assert band_causes(["agentic.default.cpu_tier_gib_per_instance"]) == "the CPU-tier size is an estimate"
    assert band_causes(["x.hbm_bw", "x.hbm_bytes", "agentic.default.cpu_tier_gib_per_instance"]) == \
        "x's memory bandwidth and size and the CPU-tier size are estimates"


def test_parallel_tools_counts_one_turns_tools_run_one_after_another():
    recs = [span("s", "root", None, "agent", "a", T0, T0 + 20 * SEC),
            span("s", "m1", "root", "model", "m", T0, T0 + SEC),
            # turn 1: 2 s then 3 s one after the other (side by side: 3 s, so 2 s saved) ...
            span("s", "t1", "root", "tool", "Read", T0 + SEC, T0 + 3 * SEC),
            span("s", "t2", "root", "tool", "Bash", T0 + 3 * SEC, T0 + 6 * SEC),
            span("s", "m2", "root", "model", "m", T0 + 6 * SEC, T0 + 7 * SEC),
            # ... turn 2: already side by side, nothing to save; turn 3: one tool, nothing to save
            span("s", "t3", "root", "tool", "Read", T0 + 7 * SEC, T0 + 9 * SEC),
            span("s", "t4", "root", "tool", "Grep", T0 + 7 * SEC, T0 + 8 * SEC),
            span("s", "m3", "root", "model", "m", T0 + 9 * SEC, T0 + 10 * SEC),
            span("s", "t5", "root", "tool", "Bash", T0 + 10 * SEC, T0 + 15 * SEC)]
    assert parallel_tools_s(make_trace(recs).spans) == pytest.approx(2.0)


def test_terminal_prints_the_page_answer(payload, capsys):
    show(report_view("r.html", 1000, payload), Console(width=120))
    out = capsys.readouterr().out
    ans = payload["answer"]
    assert ans["split"] in out and ans["lever"]["text"].split(":")[0] in out
    for s in ans["systems"]:
        assert s["name"] in out and f"{s['speedup']:.2f}×" in out
