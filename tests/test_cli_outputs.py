"""The command line's promises about outputs and options: a path that cannot be written is one ``error:``
line, option values out of range are refused, the ``-o`` suffix picks the format or is refused, and
``agentprof run`` passes a child's death by signal on as 128 + n."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_support import run

ROOT = Path(__file__).resolve().parents[1]
KV = ROOT / "traces" / "samples" / "kv-cache-tester" / "trace_0393.json"


def _one_error(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def blocker(tmp_path) -> Path:
    b = tmp_path / "a-file"
    b.write_text("a file where a folder would have to be")
    return b


@pytest.mark.parametrize("args", [
    ("import", str(KV), "-o", "{b}/out.parquet"),
    ("import", str(KV), "-o", "{b}/deeper/out.jsonl"),
    ("report", str(KV), "-o", "{b}/out.html", "--no-replay"),
    ("export", str(KV), "--to", "perfetto", "-o", "{b}/out.json"),
    ("export", str(KV), "--to", "mooncake", "-o", "{b}/out.jsonl"),
    ("export", str(KV), "--to", "otlp-json", "-o", "{b}/out.json"),
    ("devices", "fit", "--out", "{b}/fitted.toml"),
    ("demo", "--out", "{b}/reports"),
])
def test_unwritable_output_is_one_error_line(capsys, blocker, args):
    code, _, err = run(capsys, *(a.format(b=blocker) for a in args))
    line = _one_error(code, err)
    assert str(blocker) in line


def test_output_into_a_folder_is_one_error_line(capsys, tmp_path):
    (tmp_path / "x.parquet").mkdir()
    code, _, err = run(capsys, "import", str(KV), "-o", str(tmp_path / "x.parquet"))
    assert "is a directory" in _one_error(code, err)


@pytest.mark.parametrize("args,expected", [
    (("import", str(KV), "-o", "out.csv"), ".parquet or .jsonl"),
    (("report", str(KV), "-o", "out.pdf"), ".html"),
    (("export", str(KV), "--to", "perfetto", "-o", "out.parquet"), ".json"),
    (("devices", "fit", "--out", "fitted.json"), ".toml"),
])
def test_output_suffix_picks_the_format_or_is_refused(capsys, tmp_path, args, expected):
    code, _, err = run(capsys, *args)
    assert expected in _one_error(code, err)
    assert not list(Path.cwd().glob("out.csv"))


def test_output_suffix_picks_jsonl_or_parquet(capsys, tmp_path):
    for suffix in (".jsonl", ".parquet", ".JSONL"):
        out = tmp_path / f"t{suffix}"
        code, _, err = run(capsys, "import", str(KV), "-o", str(out), "--json")
        assert code == 0, err
        head = out.read_bytes()[:4]
        assert (head == b"PAR1") == (suffix == ".parquet")


@pytest.mark.parametrize("args", [
    ("analyze", str(KV), "--misses", "-5"),
    ("cachesim", str(KV), "--tp", "0"),
    ("cachesim", str(KV), "--kv-bytes", "0"),
    ("cachesim", str(KV), "--block", "-1"),
    ("export", str(KV), "--to", "mooncake", "--block", "0", "-o", "x.jsonl"),
])
def test_option_ranges_are_validated(capsys, args):
    code, _, err = run(capsys, *args)
    assert "is not in the range" in _one_error(code, err) or "range" in err


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_run_mirrors_a_signal_exit_status(tmp_path, sig):
    child = f"import os, signal; os.kill(os.getpid(), {int(sig)})"
    done = subprocess.run([sys.executable, "-m", "agentprof.cli", "run", "--out", str(tmp_path), "--",
                           "python", "-c", child], capture_output=True, text=True, timeout=120)
    assert done.returncode == 128 + int(sig), done.stderr


def test_run_passes_an_exit_code_through(tmp_path):
    done = subprocess.run([sys.executable, "-m", "agentprof.cli", "run", "--out", str(tmp_path), "--",
                           "python", "-c", "import sys; sys.exit(3)"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
