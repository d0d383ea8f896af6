"""Fixtures for the capture tests: a loopback model server and a clean warning state."""

from __future__ import annotations

import pytest

from agentprof.capture import failsafe
from agentprof.demo.model_server import ModelServer


@pytest.fixture(autouse=True)
def _fresh_warnings():
    failsafe.reset_warnings()
    yield
    failsafe.reset_warnings()


@pytest.fixture
def server():
    with ModelServer() as s:
        yield s
