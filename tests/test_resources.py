"""Input paths naming the shipped samples (``traces/samples/…``) work outside the repository, as from an
installed wheel: the bundled copy is read; other relative paths are never redirected."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import agentprof.resources as res

from .cli_support import run

ROOT = Path(__file__).resolve().parents[1]
KV = "traces/samples/kv-cache-tester"


def test_the_wheel_carries_every_sample_a_readme_command_names():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"agentprof \w+ (traces/samples/[\w./-]+)", readme))
    assert "traces/samples/kv-cache-tester" in named
    for path in named:
        assert any(path.startswith(f.rstrip("/")) for f in res.SHIPPED_FILES), path


def test_a_sample_path_reads_the_bundled_copy_outside_the_repository(capsys, tmp_path, monkeypatch):
    bundled = tmp_path / "site" / "agentprof" / "_bundled"
    dest = bundled / KV
    dest.mkdir(parents=True)
    for name in ("trace_0121.json", "trace_0180.json"):
        shutil.copy2(ROOT / KV / name, dest / name)
    (tmp_path / "checkout" / "traces").mkdir(parents=True)
    monkeypatch.setattr(res, "BUNDLED", bundled)
    monkeypatch.setattr(res, "REPO_ROOT", tmp_path / "checkout")  # no repository around
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    assert res.sample_input(KV) == dest
    code, out, err = run(capsys, "analyze", KV, "--json", "--no-progress")
    assert code == 0, err
    assert json.loads(out)["sessions"] == 2
    # a relative path outside traces/samples/ is the user's: never redirected, an error when missing
    (tmp_path / "checkout" / "traces" / "mine.jsonl").write_text("")
    assert res.sample_input("traces/mine.jsonl") == Path("traces/mine.jsonl")
    code, _, err = run(capsys, "analyze", "traces/mine.jsonl", "--no-progress")
    assert code == 2 and err.startswith("error: traces/mine.jsonl")
