"""InferenceX points through the serving simulation (``devices check --simulate``)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from agentprof.cli import main
from agentprof.replay.points import load_points
from agentprof.replay.serving.benchpoint import benchmark_plan

from .conftest import ROOT

POINTS = ROOT / "data" / "inferencex" / "calibration_points.csv"
AGENTIC = ROOT / "data" / "inferencex" / "agentic_kimi_points.csv"


@pytest.fixture(scope="module")
def points():
    return load_points(str(POINTS))


def test_benchmark_plan_is_closed_loop_fixed_lengths_without_reuse() -> None:
    p = benchmark_plan(conc=4, isl=1000, osl=200, per_client=3)
    assert p.n_sessions == 4 and p.n_calls == 12 and p.node_ids.size == 0
    assert (p.input_tokens >= 800).all() and (p.input_tokens <= 1000).all()
    assert abs(p.input_tokens.mean() - 900) < 50 and (p.gap_s == 0).all()
    shared = benchmark_plan(conc=2, isl=6400, osl=10, per_client=2, shared_fraction=0.5, spread=0.0)
    first = shared.node_ids[shared.node_offsets[0]:shared.node_offsets[1]]
    second = shared.node_ids[shared.node_offsets[1]:shared.node_offsets[2]]
    assert (first[:50] == second[:50]).all() and not set(first[50:]) & set(second[50:])


def test_one_client_reproduces_the_cost_model(resolved) -> None:
    # one client, fixed lengths: no interference and no queue, so the simulation is the cost model's call
    from agentprof.replay.costmodel import call_times
    from agentprof.replay.serving.benchpoint import simulate_point

    r = resolved("b200+x86")
    ttft, tpot, e2e = simulate_point(r.dep, r.params, 1, 8000, 500, 8192, spread=0.0)
    want = call_times(r.dep, r.params, [8000.0], [0.0], [500.0], 1)
    assert ttft == pytest.approx(float(want.ttft_s[0]), rel=1e-3)
    # the step time is tabulated over context and interpolated: within 0.5 %
    assert tpot == pytest.approx(float(want.decode_s[0]) / 499, rel=5e-3)
    assert e2e == pytest.approx(float(want.total_s[0]), rel=5e-3)


def test_devices_check_simulate_json(points, tmp_path: Path, capsys) -> None:
    sub = points.filter(pl.col("conc").is_in([4, 64]) & ~pl.col("disagg").fill_null(False)).head(10)
    f = tmp_path / "points.csv"
    sub.write_csv(f)
    try:
        main(["devices", "check", str(f), "--simulate", "--json"])
    except SystemExit as e:
        assert not e.code
    d = json.loads(capsys.readouterr().out)
    assert d["mode"].startswith("simulated") and d["covered"] == d["points"] == 10
    assert d["simulated_only"]["points"] == 10 and "conc_ge_64" in d
    assert d["tpot"]["median_ape"] < 0.15 and d["e2e"]["median_ape"] < 0.15


def test_agentic_points_simulate(capsys) -> None:
    try:
        main(["devices", "check", str(AGENTIC), "--simulate"])
    except SystemExit as e:
        assert not e.code
    d = json.loads(capsys.readouterr().out)
    assert d["points"] >= 60 and d["healthy"]["points"] >= 20
    assert d["healthy_conc_le_8"]["median_ape_ttft"] < 0.5
