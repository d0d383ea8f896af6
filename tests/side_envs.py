"""The side environments (lmcache, the oldest OpenTelemetry SDK, Phoenix) that scripts/test.sh builds in the
background while the suite runs: a test that needs one calls :func:`wait_for` before it looks for it, and is
ordered last (``side_env`` marker, see tests/conftest.py) so that its setup has had the suite's time to end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

WAIT_S = 1500.0
"""The longest a test waits for a setup still running (lmcache's torch download is the longest, 900 s cap)."""

side_env = pytest.mark.side_env


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for(venv: Path, limit_s: float = WAIT_S) -> None:
    """Wait while ``VENV.pending`` (written by scripts/test.sh with its setup's process id) names a live setup."""
    marker = venv.parent / (venv.name + ".pending")
    deadline = time.monotonic() + limit_s
    while marker.exists() and time.monotonic() < deadline:
        try:
            pid = int(marker.read_text().strip() or "0")
        except (OSError, ValueError):
            pid = 0
        if pid <= 0 or not _alive(pid):
            return
        time.sleep(2.0)
