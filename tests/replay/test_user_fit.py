"""``agentprof devices fit`` writes to the user's data folder (or ``--out``), never into the installed package;
while that file exists the device model reads it and says so (replay notes, ``devices list``, ``devices
check``); deleting it goes back to the shipped fit."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from agentprof.replay.calibration import FITTED_PATH, user_fitted_path
from agentprof.resources import user_data_dir

from ..cli_support import run

ROOT = Path(__file__).resolve().parents[2]
KV = ROOT / "traces" / "samples" / "kv-cache-tester" / "trace_0121.json"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "data home" / "agentprof"
    monkeypatch.setenv("AGENTPROF_DATA_DIR", str(folder))
    return folder


def test_the_data_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("AGENTPROF_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert user_data_dir() == tmp_path / "xdg" / "agentprof"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/not/allowed")  # the XDG spec ignores a relative path
    assert user_data_dir().is_absolute()


def test_fit_goes_to_the_user_folder_and_is_used_until_deleted(capsys, tmp_path, data_dir):
    src = ROOT / "data" / "inferencex" / "calibration_points.csv"
    lines = src.read_text().splitlines()
    small = tmp_path / "pts.csv"
    small.write_text("\n".join([lines[0], *[x for x in lines[1:] if ",mi300x," in x]]) + "\n")
    shipped = _sha(FITTED_PATH)

    code, out, err = run(capsys, "devices", "fit", "--points", str(small), "--skip-levels")
    assert code == 0, err
    mine = data_dir / "fitted.toml"
    assert user_fitted_path() == mine and mine.is_file()
    assert str(mine) in out and "instead of the shipped one" in out
    assert _sha(FITTED_PATH) == shipped  # the installed package's file is untouched

    code, out, err = run(capsys, "replay", str(KV), "-s", "mi300x+x86", "--json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any(str(mine) in n and "your own fit" in n for n in notes), notes
    code, out, _ = run(capsys, "devices", "list")
    assert code == 0 and "your own fit" in out
    code, out, _ = run(capsys, "devices", "check", str(small), "--json")
    assert code == 0 and json.loads(out)["mode"] == f"your fit {mine}"

    mine.unlink()
    code, out, err = run(capsys, "replay", str(KV), "-s", "mi300x+x86", "--json")
    assert code == 0, err
    assert not any("your own fit" in n for n in json.loads(out)["notes"])
