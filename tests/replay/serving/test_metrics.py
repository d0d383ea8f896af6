"""Invariants of the serving figures on every bundled sample format at 1, 4 and 50 concurrent sessions: task
times are durations bounded by the recorded wall time, tasks per hour agree with the concurrency (Little's law)
when the window is long, energy never exceeds the system's power over the window, hit shares are shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.errors import AgentprofError
from agentprof.importers import load_any
from agentprof.replay.serving import ServingConfig, simulate
from agentprof.replay.serving.capacity import plan_for
from agentprof.replay.systems import resolve

SAMPLES = Path(__file__).resolve().parents[3] / "traces" / "samples"
# small inputs of every format with token counts (kv-cache-tester: four of its nineteen sessions)
INPUTS = {
    "claude-code": [SAMPLES / "claude-code" / "session-3fe1b6bc.jsonl"],
    "codex": [SAMPLES / "codex"],
    "kv-cache-tester": sorted((SAMPLES / "kv-cache-tester").glob("*.json"))[:4],
    "mini-swe-agent": [SAMPLES / "mini-swe-agent"],
    "openhands": [SAMPLES / "openhands"],
    "tracelab": [SAMPLES / "tracelab"],
}
NO_TOKENS = ("aider", "swe-agent")  # their logs carry no token counts: the simulation says so
SYSTEM = "h200+x86"


def slowdown_bound(concurrency: int) -> float:
    """Task time / recorded wall time at most: alone, the simulated system serves a session's calls at least half
    as fast as the recorded provider did (at concurrency 1 the bundled samples range 0.4-1.1x the recorded wall),
    and ``concurrency`` sessions share it at most that many ways (each call waits at most for the others' work)."""
    return 2.0 * max(concurrency, 1)


@pytest.fixture(scope="module")
def plans():
    cat = load_catalog()
    out = {}
    for name, paths in INPUTS.items():
        plan, spec = plan_for(load_any([str(p) for p in paths]), None, ServingConfig(), cat)
        out[name] = (plan, resolve(cat.system(SYSTEM), spec, cat))
    return out


def test_every_bundled_format_is_covered() -> None:
    formats = {p.name for p in SAMPLES.iterdir() if p.is_dir()}
    assert formats == set(INPUTS) | set(NO_TOKENS)


@pytest.mark.parametrize("name", NO_TOKENS)
def test_formats_without_token_counts_get_a_clear_error(name) -> None:
    with pytest.raises(AgentprofError, match="no model call has input and output token counts"):
        plan_for(load_any([str(SAMPLES / name)]), None, ServingConfig(), load_catalog())


@pytest.mark.parametrize("concurrency", [1, 4, 50])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_serving_invariants(plans, name, concurrency) -> None:
    plan, r = plans[name]
    run = simulate(plan, r, ServingConfig(concurrency=concurrency))
    d, e = run.serving, run.engine
    # durations, not timestamps: each session's recorded wall time and simulated task time
    assert (plan.recorded_s >= 0).all() and (plan.recorded_s < 30 * 86400).all(), plan.recorded_s
    task = e.sess_end - e.sess_start
    assert np.isfinite(task).all() and (task > 0).all()
    rec = plan.recorded_s[e.sess_plan]
    assert (task <= rec * slowdown_bound(concurrency) + 1.0).all(), (task / rec).max()
    # tasks per hour come from the tasks completed in the window, and at most the concurrency is active
    w = d["window"]
    assert 0.0 <= w["start_s"] < w["end_s"] <= d["makespan_s"] + 1e-6
    assert 1 <= d["tasks_completed"] <= e.sess_end.size
    tph = d["tasks_per_hour"]
    if w["basis"].startswith("Little"):  # too few sessions at full load: the closed loop's rate, every slot busy
        assert tph == pytest.approx(min(concurrency, task.size) * 3600.0 / float(task.mean()), rel=1e-9)
    else:
        assert tph == pytest.approx(d["tasks_completed"] * 3600.0 / (w["end_s"] - w["start_s"]), rel=1e-9)
    assert tph * float(task.mean()) / 3600.0 <= concurrency * 1.1
    # energy: the power drawn over the window, shared by the tasks completed in it, never above the busy draw
    p = d["power"]
    assert p["idle_kw"] <= p["mean_kw"] <= p["busy_kw"] * (1 + 1e-9)
    hours = (w["end_s"] - w["start_s"]) / 3600.0
    assert d["energy_wh_per_task"] * d["tasks_completed"] <= p["busy_kw"] * 1000.0 * hours * (1 + 1e-9)
    assert d["energy_wh_per_task"] <= p["busy_kw"] * 1000.0 * d["makespan_s"] / 3600.0 * (1 + 1e-9)
    # hit shares are shares
    h = d["hit_share"]
    assert all(0.0 <= h[k] <= 1.0 + 1e-9 for k in ("hbm", "cpu", "disk", "total"))
    assert h["total"] == pytest.approx(h["hbm"] + h["cpu"] + h["disk"], abs=1e-9)


@pytest.mark.parametrize("name", ["codex", "kv-cache-tester", "mini-swe-agent", "openhands"])
def test_tasks_per_hour_times_task_time_is_the_concurrency_over_a_long_window(plans, name) -> None:
    # 12 sessions per slot: a full-load window (every slot busy) long against the task time, so Little's law holds
    plan, r = plans[name]
    c = 4
    run = simulate(plan, r, ServingConfig(concurrency=c, sessions=12 * c))
    d, e = run.serving, run.engine
    assert e.sess_end.size == 12 * c
    assert d["window"]["basis"].startswith("full load") and d["tasks_completed"] >= 3 * c
    mean_task = float(np.mean(e.sess_end - e.sess_start))
    assert d["tasks_per_hour"] * mean_task / 3600.0 == pytest.approx(c, rel=0.15)
