"""Fixtures for the analysis tests: the shared sample traces, imported once per test session."""

from __future__ import annotations

import pytest

from agentprof.analysis import analyze
from agentprof.importers import load_any

from .analysis_helpers import SAMPLES

_CACHE: dict[str, object] = {}


def _load(name: str):
    if name not in _CACHE:
        _CACHE[name] = load_any(SAMPLES / name)
    return _CACHE[name]


@pytest.fixture(scope="session")
def kvct_trace():
    return _load("kv-cache-tester")


@pytest.fixture(scope="session")
def kvct_analysis(kvct_trace):
    return analyze(kvct_trace)


@pytest.fixture(scope="session")
def sample_trace():
    """Import one of the shared samples by folder name (cached)."""
    return _load


@pytest.fixture(scope="session")
def sample_analysis():
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = analyze(_load(name))
        return cache[name]

    return get
