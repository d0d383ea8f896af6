"""Shared inputs of the replay tests: the InferenceX calibration and AgentX points, loaded once, and the catalog."""

from __future__ import annotations

from pathlib import Path

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
