"""Errors agentprof reports to users: one line naming the file, the line and what was wrong."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AgentprofError(Exception):
    """A user-facing error; the CLI prints ``str(err)`` as one line and exits with status 2."""


class TraceFormatError(AgentprofError):
    """Input that does not match the expected format, located by file and line (1-based)."""

    def __init__(self, path: str | None, line: int | None, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = path or "<input>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {reason}")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'h200+x86'?)"`` for a mistyped name: the known names it begins (``h200`` →
    ``h200+x86``) or is close to in spelling (``analyse`` → ``analyze``); ``""`` when none is near."""
    n = name.strip().lower()
    names = sorted(set(known))
    starts = [k for k in names if n and k.lower().startswith(n) and k.lower() != n]
    close = difflib.get_close_matches(n, [k.lower() for k in names], n=3, cutoff=0.6)
    found = list(dict.fromkeys(starts + [k for c in close for k in names if k.lower() == c]))[:3]
    if not found:
        return ""
    return " (did you mean " + " or ".join(repr(k) for k in found) + "?)"
