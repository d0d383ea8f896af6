"""Suite-wide: an empty user data folder, and collection order: tests marked ``side_env`` run last (their
environments are built in the background by scripts/test.sh while the rest of the suite runs;
tests/side_envs.py)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """A user's own ``agentprof devices fit`` (in their data folder) must not change what the tests compute: the
    suite's data folder is an empty temporary one (child processes inherit it)."""
    folder = tempfile.mkdtemp(prefix="agentprof-test-data-")
    os.environ["AGENTPROF_DATA_DIR"] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("side_env") is not None)  # stable: order kept otherwise


@pytest.fixture
def serving_catalog(tmp_path, monkeypatch):
    """Point one of ``agentprof.catalog.kvcache``'s files at a temporary copy holding ``text``:
    ``serving_catalog("SCHED_PATH", text)``. Every cached table of the module is cleared before and after."""
    from agentprof.catalog import kvcache

    def clear() -> None:
        for name in dir(kvcache):
            f = getattr(kvcache, name)
            if callable(getattr(f, "cache_clear", None)):
                f.cache_clear()

    def use(attr: str, text: str) -> None:
        path = tmp_path / f"{attr.lower()}.toml"
        path.write_text(text)
        monkeypatch.setattr(kvcache, attr, path)
        clear()

    yield use
    monkeypatch.undo()
    clear()
