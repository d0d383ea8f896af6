"""Where the data files agentprof ships with live: the repository checkout it runs from, the working folder,
or, in an installed wheel, the copies the build puts under ``agentprof/_bundled/`` (see ``setup.py``).

The calibration points (``data/inferencex/``) and the real sample sessions (``traces/samples/``) are the
repository's files; a wheel carries the ones that ``devices fit``, ``devices check --held-out-prompts``,
``agentprof demo`` and the README's replay commands (the kv-cache-tester samples) need.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
BUNDLED = PACKAGE_DIR / "_bundled"
"""Copies of repository data files inside an installed wheel, under their repository-relative paths."""

SHIPPED_FILES: tuple[str, ...] = (
    "data/inferencex/calibration_points.csv",
    "data/inferencex/official_api_points.csv",
    "data/inferencex/agentic_kimi_points.csv",
    "data/inferencex/agentic_other_points.csv",
    "data/inferencex/agentx_server_metrics.csv",
    "data/inferencex/README.md",
    "traces/samples/SOURCES.md",
    "traces/samples/codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    "traces/samples/claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
    "traces/samples/claude-code/258c7280-ae70-4798-800f-63464d01a85d/",
    "traces/samples/kv-cache-tester/",
)
"""Repository files (a trailing ``/``: a whole folder) the wheel carries; the build copies exactly these."""


def roots() -> tuple[Path, ...]:
    """Folders searched for a repository-relative data path, in order."""
    return (REPO_ROOT, Path.cwd(), BUNDLED)


def find(relative: str | Path) -> Path | None:
    """The first existing ``root / relative`` over :func:`roots`, else ``None``."""
    for root in roots():
        p = root / relative
        if p.exists():
            return p
    return None


def shipped(path: str | Path) -> Path:
    """``path`` as given when it exists; a relative path that does not exist here but names a shipped file
    (the commands' defaults, e.g. ``data/inferencex/calibration_points.csv``) resolves to its shipped copy."""
    p = Path(path)
    if p.exists() or p.is_absolute():
        return p
    found = find(p)
    return found if found is not None else p


SAMPLES = "traces/samples"


def sample_input(path: str | os.PathLike[str]) -> Path:
    """An input path as given when it exists; a relative ``traces/samples/…`` path that does not exist here (an
    installed wheel, run outside the repository) names the bundled copy of that sample when there is one."""
    p = Path(path)
    if p.exists() or p.is_absolute() or not p.as_posix().startswith(SAMPLES):
        return p
    found = find(p)
    return found if found is not None else p


def user_data_dir() -> Path:
    """Where agentprof keeps what a user makes (the terms ``devices fit`` writes), never inside the installed
    package: ``$AGENTPROF_DATA_DIR``, else the platform's per-user data folder — ``$XDG_DATA_HOME/agentprof`` or
    ``~/.local/share/agentprof`` (Linux and other Unix), ``~/Library/Application Support/agentprof`` (macOS),
    ``%LOCALAPPDATA%\\agentprof`` (Windows)."""
    given = os.environ.get("AGENTPROF_DATA_DIR")
    if given:
        return Path(given).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "agentprof"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "agentprof"
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share") / "agentprof"
