"""Read JSON Lines logs record by record with located errors: bad lines raise (or are skipped and counted),
a last line cut short by a killed process is skipped with a diagnostic, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentprof.errors import AgentprofError, TraceFormatError
from agentprof.importers.context import ImportContext


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes; an unreadable file is a one-line user error."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise AgentprofError(f"{path}: cannot read: {e.strerror or e}") from None


def iter_records(path: str | Path, ctx: ImportContext, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each JSON object line of ``path`` (``what`` names the format)."""
    p = str(path)
    raw = read_bytes(path)
    lines = raw.split(b"\n")
    ends_clean = raw.endswith(b"\n") or not raw
    if lines and lines[-1] == b"":
        lines.pop()
    n = len(lines)
    seen = False
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            if i == n and not ends_clean and seen:
                ctx.note("truncated_last_line", "last line cut short (agent still writing or killed?); skipped",
                         p, i)
                continue
            if not seen and i == 1 and not ctx.skip_bad_lines:
                raise TraceFormatError(p, i, f"not a {what} file: line is not JSON ({e})") from None
            ctx.bad(p, i, f"not valid JSON ({e})")
            continue
        if not isinstance(rec, dict):
            ctx.bad(p, i, f"expected a JSON object per line ({what}), got {type(rec).__name__}")
            continue
        seen = True
        yield i, rec
    if not seen and not ctx.skip_bad_lines:
        raise TraceFormatError(p, None, f"empty {what} file")


def load_json(path: str | Path, what: str) -> Any:
    """Parse a whole-file JSON document; errors name the line and column."""
    raw = read_bytes(path)
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise TraceFormatError(str(path), e.lineno, f"not valid JSON ({e.msg} at column {e.colno}); "
                               f"expected a {what} file") from None
    except UnicodeDecodeError as e:
        raise TraceFormatError(str(path), None, f"not UTF-8 text ({e}); expected a {what} file") from None
