"""Shared inputs of the replay tests: the InferenceX calibration and AgentX points, loaded once, and the catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.points import load_points

ROOT = Path(__file__).resolve().parents[2]
POINTS = ROOT / "data" / "inferencex" / "calibration_points.csv"
AGENTIC = ROOT / "data" / "inferencex" / "agentic_kimi_points.csv"
CAT = load_catalog()


@pytest.fixture(scope="session")
def points() -> pl.DataFrame:
    """The calibration points (tests must not change the frame; polars frames are not changed in place)."""
    return load_points(POINTS)


def devices_check_json(frame: pl.DataFrame, tmp_path: Path, capsys: Any, *args: str) -> dict[str, Any]:
    """``agentprof devices check`` on ``frame`` written as a points CSV, through the CLI; its JSON document."""
    from agentprof.cli import main

    f = tmp_path / "points.csv"
    frame.write_csv(f)
    try:
        main(["devices", "check", str(f), *args, "--json"])
    except SystemExit as e:
        assert not e.code
    return json.loads(capsys.readouterr().out)
