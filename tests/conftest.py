"""Suite-wide collection order: tests marked ``side_env`` run last (their environments are built in the
background by scripts/test.sh while the rest of the suite runs; tests/side_envs.py)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("side_env") is not None)  # stable: order kept otherwise
