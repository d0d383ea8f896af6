"""Errors agentprof reports to users: one line naming the file, the line and what was wrong."""

from __future__ import annotations


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
