"""Running the ``agentprof`` command line in-process, as the CLI tests do."""

from __future__ import annotations

from typing import Any

from agentprof.cli import main


def run(capsys: Any, *args: str) -> tuple[int, str, str]:
    """``agentprof ARGS…`` in this process: (exit status, stdout, stderr)."""
    code = 0
    try:
        main(list(args))
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err
