"""Every ``agentprof`` command: ``--help`` shows an example, and a wrong option or argument is one clear
``error: ...`` line with exit status 2 (never a usage block or a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from agentprof.cli import COMMANDS, cli, main

ROOT = Path(__file__).resolve().parents[2]
CODEX = ROOT / "traces" / "samples" / "codex"


def _commands() -> list[tuple[str, ...]]:
    """Every command path: top-level commands and the subcommands of groups."""
    ctx = click.Context(cli)
    out: list[tuple[str, ...]] = [()]
    for name in sorted(COMMANDS):
        cmd = cli.get_command(ctx, name)
        out.append((name,))
        if isinstance(cmd, click.Group):
            out.extend((name, sub) for sub in cmd.list_commands(ctx))
    return out


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    """``agentprof ARGV`` in this process through the console script's entry point: (status, stdout, stderr)."""
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("path", _commands(), ids=" ".join)
def test_help_has_an_example(path, capsys):
    code, out, err = _run([*path, "--help"], capsys)
    assert code == 0 and not err
    assert "Example" in out, out
    assert "(unavailable" not in out  # every command imports


@pytest.mark.parametrize("path", _commands(), ids=" ".join)
def test_unknown_option_is_one_line(path, capsys):
    code, out, err = _run([*path, "--no-such-option"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "Usage:" not in err


@pytest.mark.parametrize("argv, needle", [
    (["no-such-command"], "No such command 'no-such-command'"),
    (["analyze", "/no/such/trace.jsonl"], "/no/such/trace.jsonl"),
    (["import", "/no/such/folder"], "/no/such/folder"),
    (["report", "/no/such/trace.jsonl"], "/no/such/trace.jsonl"),
    (["export", str(CODEX), "--to", "nope", "-o", "x.json"], "'nope' is not one of"),
    (["export", str(CODEX), "--to", "perfetto"], "--output"),
    (["replay", str(CODEX), "--system", "tpu-v9"], "unknown system 'tpu-v9'"),
    (["cachesim", str(CODEX), "--model", "gpt-oss-120b", "--tier", "hbm=lots"], "cannot read size 'lots'"),
    (["devices", "check", "/no/such/points.csv"], "/no/such/points.csv"),
    (["run"], "Missing argument"),
    (["demo", "--system", "tpu-v9"], "unknown system 'tpu-v9'"),
    (["demo", "--serve-on", "tpu-v9"], "unknown system 'tpu-v9'"),
    (["demo", "--sample", "/no/such/trace.jsonl"], "/no/such/trace.jsonl"),
])
def test_wrong_arguments_are_one_clear_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written where the tests run
    code, out, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert list(tmp_path.iterdir()) == []  # the demo checks its arguments before it runs anything


def test_the_console_script_prints_the_same_line():
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "demo", "--no-such-option"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "error: No such option '--no-such-option' (see 'agentprof demo --help')\n"


@pytest.mark.parametrize("path", _commands(), ids=" ".join)
def test_help_fits_an_80_column_terminal(path, capsys, monkeypatch):
    # a newcomer's first screen: every line of every command's help, examples included, within 80 columns (a
    # longer line wraps mid-word in the terminal and an example no longer reads as one command)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = _run([*path, "--help"], capsys)
    long = [x for x in out.splitlines() if len(x.rstrip()) > 80]
    assert code == 0 and not long, "\n".join(long)
