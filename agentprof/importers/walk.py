"""Turn the paths a user gives (files and folders, recursively) into import groups: which files, in which
format, belong together (a Claude Code session and its sub-agent files; an OpenHands per-call folder)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from agentprof.errors import AgentprofError, TraceFormatError
from agentprof.importers.context import ImportContext
from agentprof.importers.detect import FORMATS, UNKNOWN, sniff
from agentprof.resources import sample_input

_TRACE_SUFFIXES = (".jsonl", ".json", ".traj", ".parquet", ".history", ".ndjson")


def _walk(root: Path, skipped: list[tuple[str, str]]) -> list[Path]:
    """Trace-named regular files under ``root``; FIFOs, devices, sockets and broken or looping links are left
    out (reading a FIFO would wait forever) and listed in ``skipped`` with the reason."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "node_modules")
        for name in sorted(filenames):
            if name.endswith(_TRACE_SUFFIXES):
                f = Path(dirpath) / name
                problem = not_a_file(f)
                if problem:
                    skipped.append((str(f), problem))
                else:
                    out.append(f)
    return out


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a trace file or folder (``None`` when it can)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link loop"
        if e.errno == errno.ENOENT:
            return "a broken symbolic link" if os.path.islink(path) else "no such file or folder"
        return e.strerror or str(e)
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO, not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a file"
    return "not a regular file"


def expand(paths: Iterable[str | os.PathLike[str]], fmt: str, ctx: ImportContext) -> list[tuple[str, Path]]:
    """``(format, file)`` for every input file, in a deterministic order; folders are searched recursively.

    A file named on the command line that is not of the format asked for (``fmt`` other than ``auto``) is an
    error; in folders, files of other formats are skipped and counted.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise AgentprofError(f"unknown format {fmt!r} (expected auto or one of {', '.join(FORMATS)})")
    found: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    skipped: list[tuple[str, str]] = []
    for given in paths:
        p = sample_input(Path(given).expanduser())
        problem = not_a_file(p)
        if problem is not None:
            raise AgentprofError(f"{p}: {problem}")
        if p.is_dir():
            files = _walk(p, skipped)
            explicit = False
        else:
            files = [p]
            explicit = True
        for f in files:
            key = f.resolve()
            if key in seen:
                continue
            seen.add(key)
            det = sniff(f)
            detected = det.format
            if fmt == "auto":
                if detected == UNKNOWN:
                    if explicit:
                        raise TraceFormatError(str(f), None, "cannot tell which agent wrote this file "
                                               f"({det.reason}; known: {', '.join(FORMATS)}); if it is one of "
                                               "them, convert it with 'agentprof import FILE --from FORMAT -o "
                                               "OUT.parquet'")
                    skipped.append((str(f), f"unknown format: {det.reason}"))
                    continue
                found.append((detected, f))
            elif detected == fmt or (explicit and detected == UNKNOWN):
                found.append((fmt, f))
            elif explicit:
                raise TraceFormatError(str(f), 1, f"not a {fmt} file (it looks like {detected}); "
                                       "use --from auto or the right --from")
            else:
                skipped.append((str(f), f"{detected} file, not {fmt}" if detected != UNKNOWN else
                                f"unknown format: {det.reason}"))
                continue
            if det.skipped and detected != UNKNOWN:
                kinds = sorted(set(det.skipped))
                ctx.note("leading_records_skipped", f"format recognized at line {det.line} after "
                         f"{len(det.skipped)} leading record(s) of no known trace format ({', '.join(kinds[:4])})",
                         str(f), det.line)
            ctx.file_formats.append((str(f), found[-1][0]))
    for path, reason in skipped:
        ctx.note("skipped_files", f"skipped: {reason}", path)
    if not found:
        shown = "; ".join(f"{p_}: {r}" for p_, r in skipped[:5]) + (f"; and {len(skipped) - 5} more"
                                                                   if len(skipped) > 5 else "")
        raise AgentprofError("no trace files found in " + ", ".join(str(p) for p in paths) +
                             (f" (looking for {fmt})" if fmt != "auto" else "") +
                             (f"; skipped {len(skipped)} file(s): {shown}" if skipped else ""))
    return found


def group(found: list[tuple[str, Path]]) -> list[tuple[str, list[Path]]]:
    """Import groups in a deterministic order: per format, the files that make one import unit."""
    from agentprof.importers import claude_code

    by_fmt: dict[str, list[Path]] = {}
    for fmt, f in found:
        by_fmt.setdefault(fmt, []).append(f)
    groups: list[tuple[str, list[Path]]] = []
    for fmt in FORMATS:
        files = sorted(by_fmt.get(fmt, []), key=str)
        if not files:
            continue
        if fmt == "kv-cache-tester":
            groups.append((fmt, files))
        elif fmt == "claude-code":
            groups.extend((fmt, g) for g in claude_code.group(files))
        elif fmt == "openhands":
            by_dir: dict[Path, list[Path]] = {}
            for f in files:
                by_dir.setdefault(f.parent, []).append(f)
            groups.extend((fmt, by_dir[d]) for d in sorted(by_dir, key=str))
        else:
            groups.extend((fmt, [f]) for f in files)
    return groups
