"""Read JSON Lines logs and JSON documents with located errors and bounded memory.

Every importer reads through here, so the rules for bad input are the same for all formats: a bad line
raises ``TraceFormatError(path, line, reason)`` (or is skipped and counted with ``--skip-bad-lines``), a last
line cut short by a killed process is skipped with a diagnostic, a line longer than :data:`MAX_RECORD_BYTES`
is refused without being loaded (it is read past in chunks), nesting too deep for Python's JSON parser and
bytes that are not UTF-8 are errors on their line, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentprof.errors import AgentprofError, TraceFormatError
from agentprof.importers.context import ImportContext

MAX_RECORD_BYTES = int(float(os.environ.get("AGENTPROF_MAX_RECORD_MB", "64")) * (1 << 20))
"""Longest line (one record) read from a log; longer ones are refused unread (``AGENTPROF_MAX_RECORD_MB``)."""
MAX_DOCUMENT_BYTES = int(float(os.environ.get("AGENTPROF_MAX_DOCUMENT_MB", "512")) * (1 << 20))
"""Largest whole-file JSON document read (``AGENTPROF_MAX_DOCUMENT_MB``)."""
_CHUNK = 1 << 20


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes; an unreadable file is a one-line user error."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise AgentprofError(f"{path}: cannot read: {e.strerror or e}") from None


def mb(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def iter_lines(path: str | Path, limit: int = MAX_RECORD_BYTES) -> Iterator[tuple[int, bytes | None, int]]:
    """``(line_number, line, length)`` for each line, streamed; ``line`` is ``None`` for a line longer than
    ``limit`` (read past in chunks, never held whole). A line keeps its newline when it had one."""
    try:
        f = Path(path).open("rb")  # noqa: SIM115 - a generator closes it in the with below
    except OSError as e:
        raise AgentprofError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        i = 0
        while True:
            try:
                line = f.readline(limit + 1)
            except OSError as e:
                raise AgentprofError(f"{path}: cannot read: {e.strerror or e}") from None
            if not line:
                return
            i += 1
            if len(line) > limit and not line.endswith(b"\n"):
                n = len(line)
                while True:
                    chunk = f.readline(_CHUNK)
                    n += len(chunk)
                    if not chunk or chunk.endswith(b"\n"):
                        break
                yield i, None, n
                continue
            yield i, line, len(line)


def decode_error(e: Exception) -> str:
    """What was wrong with one JSON text, in a phrase."""
    if isinstance(e, RecursionError):
        return "JSON nested too deeply to read (more levels than Python's JSON parser follows)"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at column {e.start + 1})"
    if isinstance(e, json.JSONDecodeError):
        return f"not valid JSON ({e.msg} at column {e.colno})"
    return f"not valid JSON ({e})"


def iter_records(path: str | Path, ctx: ImportContext, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each JSON object line of ``path`` (``what`` names the format)."""
    p = str(path)
    seen = False
    for i, line, n in iter_lines(path):
        if line is None:
            ctx.bad(p, i, f"line is {mb(n)}, over the {mb(MAX_RECORD_BYTES)} limit for one {what} record "
                          "(AGENTPROF_MAX_RECORD_MB raises it)")
            continue
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as e:
            if not line.endswith(b"\n") and seen and not isinstance(e, RecursionError):
                ctx.note("truncated_last_line", "last line cut short (agent still writing or killed?); skipped",
                         p, i)
                continue
            if not seen and i == 1 and not ctx.skip_bad_lines:
                raise TraceFormatError(p, i, f"not a {what} file: line is {decode_error(e)}") from None
            ctx.bad(p, i, decode_error(e))
            continue
        if not isinstance(rec, dict):
            ctx.bad(p, i, f"expected a JSON object per line ({what}), got {type(rec).__name__}")
            continue
        seen = True
        ctx.where = (p, i)
        yield i, rec
    ctx.where = None  # an error after reading (from the records as a whole) has no one line
    if not seen and not ctx.skip_bad_lines:
        raise TraceFormatError(p, 1, f"empty {what} file: expected JSON object lines")


def load_json(path: str | Path, what: str) -> Any:
    """Parse a whole-file JSON document; errors name the line and what was expected."""
    p = str(path)
    try:
        size = os.stat(p).st_size
    except OSError as e:
        raise AgentprofError(f"{p}: cannot read: {e.strerror or e}") from None
    if size > MAX_DOCUMENT_BYTES:
        raise TraceFormatError(p, None, f"document is {mb(size)}, over the {mb(MAX_DOCUMENT_BYTES)} limit for one "
                               f"{what} (AGENTPROF_MAX_DOCUMENT_MB raises it)")
    raw = read_bytes(path)
    if not raw.strip():
        raise TraceFormatError(p, 1, f"empty file; expected a {what} (one JSON document)")
    doc = parse_document(raw, p, what)
    if size > MAX_RECORD_BYTES:  # a document this large may hold one string no record should (tokenizing it
        _check_strings(doc, raw, p, what)  # alone would take gigabytes): refused like an over-long line
    return doc


def _check_strings(doc: Any, raw: bytes, path: str, what: str) -> None:
    stack: list[tuple[Any, str]] = [(doc, "$")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if len(node) > MAX_RECORD_BYTES:
                at = raw.find(json.dumps(node[:64])[1:-1].encode())
                line = raw.count(b"\n", 0, at) + 1 if at >= 0 else None
                raise TraceFormatError(path, line, f"a string of {mb(len(node))} at {where}, over the "
                                       f"{mb(MAX_RECORD_BYTES)} limit for one {what} record "
                                       "(AGENTPROF_MAX_RECORD_MB raises it)")
        elif isinstance(node, dict):
            stack.extend((v, f"{where}.{k}") for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))


def parse_document(raw: bytes, path: str, what: str) -> Any:
    """``json.loads(raw)`` with every failure a located :class:`TraceFormatError`."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise TraceFormatError(path, e.lineno, f"not valid JSON ({e.msg} at column {e.colno}); "
                               f"expected a {what}") from None
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise TraceFormatError(path, line, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at column {col}); "
                               f"expected a {what}") from None
    except RecursionError:
        raise TraceFormatError(path, nesting_line(raw), f"JSON nested too deeply to read; expected a {what}") \
            from None


_TOKENS = re.compile(rb'"(?:[^"\\\n]|\\.)*"|[\[\]{}\n]')


def nesting_line(raw: bytes, limit: int = 500) -> int | None:
    """The line where ``raw``'s nesting first passes ``limit`` levels (strings skipped), or None."""
    depth, line = 0, 1
    for m in _TOKENS.finditer(raw):
        c = m.group()[:1]
        if c == b"\n":
            line += 1
        elif c in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return line
        elif c in (b"]", b"}"):
            depth -= 1
    return None


def check_text_log(path: str | Path, ctx: ImportContext, what: str) -> None:
    """Before a plain-text log (Aider's) is parsed whole: refuse a line over the record limit (the parser would
    hold it several times over), and say when bytes are not UTF-8 or the file ends mid-line (cut short)."""
    p = str(path)
    bad_utf8: int | None = None
    last = b"\n"
    for i, line, n in iter_lines(path):
        if line is None:
            raise TraceFormatError(p, i, f"line is {mb(n)}, over the {mb(MAX_RECORD_BYTES)} limit for one line of "
                                         f"a {what} (AGENTPROF_MAX_RECORD_MB raises it)")
        if bad_utf8 is None:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                bad_utf8 = i
        last = line
    if bad_utf8 is not None:
        ctx.note("not_utf8", "bytes that are not UTF-8 (first on this line) were read as U+FFFD", p, bad_utf8)
    if not last.endswith(b"\n"):
        ctx.note("truncated_last_line", f"the {what} ends mid-line (cut short, or still being written): its last "
                                        "exchange may be incomplete or missing", p)
