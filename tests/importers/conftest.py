"""Fixtures for the importer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .importer_helpers import SAMPLES


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES
