"""``agentprof replay`` end to end on the bundled samples: what it says when a trace cannot be simulated."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.cli import main

AIDER = Path(__file__).resolve().parents[2] / "traces" / "samples" / "aider" / ".aider.llm.history"


def test_serving_simulation_without_token_counts_is_a_one_line_error(capsys):
    # aider's history logs no token counts: the one-session replay runs, the serving simulation cannot
    with pytest.raises(SystemExit) as ex:
        main(["replay", str(AIDER), "-s", "h200+x86", "--model", "gpt-oss-120b", "--concurrency", "4"])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "token counts" in lines[0]
