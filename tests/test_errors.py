"""Mistyped names get a suggestion: a command (``analyse`` → ``analyze``), a system (``-s h200`` →
``h200+x86``) and a model, each as the one ``error:`` line the CLI prints; an unrelated name gets none."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.errors import did_you_mean

from .cli_support import run

KV = Path(__file__).resolve().parents[1] / "traces" / "samples" / "kv-cache-tester" / "trace_0121.json"


def _line(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("typed,meant", [("analyse", "'analyze'"), ("anlyze", "'analyze'"),
                                         ("improt", "'import'"), ("rep", "'replay' or 'report'")])
def test_a_mistyped_command_is_suggested(capsys, typed, meant):
    line = _line(*run(capsys, typed, "x")[::2])
    assert f"No such command '{typed}'" in line and f"did you mean {meant}?" in line


def test_an_unrelated_command_gets_no_guess(capsys):
    line = _line(*run(capsys, "zzz")[::2])
    assert "No such command 'zzz'" in line and "did you mean" not in line


@pytest.mark.parametrize("typed,meant", [("h200", "h200+x86"), ("jalapeño", "jalapeno"), ("B200+VERA", None)])
def test_a_mistyped_system_is_suggested(capsys, typed, meant):
    code, out, err = run(capsys, "replay", str(KV), "-s", typed, "--json")
    if meant is None:  # case is not a typo: the system is found
        assert code == 0, err
        return
    line = _line(code, err)
    assert f"unknown system '{typed}' (did you mean '{meant}'?)" in line and "agentprof devices list" in line


def test_suggestions_prefer_the_names_a_prefix_begins():
    known = ["h100+x86", "h200+x86", "b200+x86", "b200+vera"]
    assert did_you_mean("b200", known) == " (did you mean 'b200+vera' or 'b200+x86'?)"
    assert did_you_mean("gpt-oss-12b", ["gpt-oss-120b", "deepseek-r1"]) == " (did you mean 'gpt-oss-120b'?)"
    assert did_you_mean("nothing-like-it", known) == ""
