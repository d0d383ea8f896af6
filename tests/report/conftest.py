from __future__ import annotations

import pytest

from .report_support import BIG_SESSION, BIG_SESSION_SUBAGENTS, KV_FOLDER, Browser, find_chromium


@pytest.fixture(scope="package")
def browser():
    """A real headless Chromium; the tests that need it skip only when no Chromium can be found. Package scope:
    Playwright's sync API keeps an event loop marked running on this thread while it is open, which would break
    the asyncio tests of other packages that a parallel worker (pytest -n) runs after these."""
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium found: install Debian's `chromium` (scripts/test.sh does as root) or set AGENTPROF_CHROMIUM")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    b = Browser(exe)
    yield b
    b.close()


@pytest.fixture(scope="session")
def big_session():
    """The largest shared Claude Code session with its subagents, imported."""
    from agentprof.importers import load_any

    return load_any([BIG_SESSION, BIG_SESSION_SUBAGENTS])


@pytest.fixture(scope="session")
def kv_folder():
    """The shared kv-cache-tester folder, imported."""
    from agentprof.importers import load_any

    return load_any([KV_FOLDER])
