"""The trace file of one ``agentprof run``, from both sides of the process boundary.

In the program: once its own code starts, the run's agent span is announced (a ``run_root`` record), since a
program killed by a signal never ends that span itself. In ``agentprof run``, after the program exits:
a finished file is kept as it is; a program that was killed (or called ``os._exit``) has its agent span closed
at its exit with a diagnostic saying so; a file whose program never started is removed, so it never counts
as a session.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from agentprof import semconv as sc

ROOT_RECORD = "run_root"
"""Key of the meta record holding the agent span as it started (readers drop it from the metadata)."""
_TAIL = 1 << 16
_HEAD_LINES = 64


def announce_root(sess: Any) -> None:
    """Write the session's agent span as it started (ids, name, start, attributes) as a meta record."""
    from agentprof.capture.exporter import span_record

    if sess.exporter is None:
        return
    rec = span_record(sess.root)
    rec.pop("end_ns", None)
    sess.exporter.write_record({"record": "meta", ROOT_RECORD: rec})


def settle(path: Path, code: int) -> Path | None:
    """Finish ``path`` after the program ended with ``code`` (negative: killed by that signal); ``None``
    when no trace is left (nothing recorded, or the program never started)."""
    end_ns = time.time_ns()
    try:
        size = path.stat().st_size
    except OSError:
        return None  # removed by the program itself: it never started
    if size == 0:  # not a Python program (or one started without the bootstrap)
        path.unlink(missing_ok=True)
        return None
    try:
        if _finished(path, size):
            return path
        root = _root(path)
        if root is None:
            path.unlink(missing_ok=True)
            return None
        _close(path, root, code, end_ns)
    except OSError:
        pass  # the file stays as the program left it; it loads with every span that ended
    return path


def _finished(path: Path, size: int) -> bool:
    """The program's profile wrote its final meta record (the last line, with ``ended``)."""
    with path.open("rb") as f:
        pos = size
        f.seek(size - 1)
        if f.read(1) != b"\n":
            return False
        tail = b""
        while pos > 0 and b"\n" not in tail[:-1]:  # back to the line before the last, however long the last is
            step = min(_TAIL, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
    last = tail[:-1].rsplit(b"\n", 1)[-1]
    if b'"ended"' not in last:
        return False
    try:
        rec = json.loads(last)
    except ValueError:
        return False
    return isinstance(rec, dict) and rec.get("record") == "meta" and "ended" in rec


def _root(path: Path) -> dict[str, Any] | None:
    """The announced agent span, from the first lines of the file (None: the program never started)."""
    with path.open("rb") as f:
        for _, line in zip(range(_HEAD_LINES), f, strict=False):
            if ROOT_RECORD.encode() not in line:
                continue
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and isinstance(rec.get(ROOT_RECORD), dict):
                    return rec[ROOT_RECORD]
    return None


def _drop_cut_line(path: Path) -> bool:
    """Truncate a last line that has no newline (the kill cut it short); a reader would skip it anyway."""
    with path.open("rb+") as f:
        end = f.seek(0, os.SEEK_END)
        pos = end
        while pos > 0:
            step = min(_TAIL, pos)
            f.seek(pos - step)
            chunk = f.read(step)
            if pos == end and chunk.endswith(b"\n"):
                return False
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                f.truncate(pos - step + nl + 1)
                return True
            pos -= step
        f.truncate(0)
        return True


def _close(path: Path, root: dict[str, Any], code: int, end_ns: int) -> None:
    """Append the agent span ended at the program's exit and a final meta record with a diagnostic."""
    cut = _drop_cut_line(path)
    how = signal.Signals(-code).name if code < 0 and -code in signal.valid_signals() else f"exit status {code}"
    attrs = dict(root.get("attributes") or {})
    span = {**root, "record": "span", "end_ns": max(end_ns, int(root.get("start_ns") or 0)),
            "status": "ok" if code == 0 else "error", "error_type": None if code == 0 else how,
            "attributes": attrs}
    if code != 0:
        attrs[sc.ERROR_TYPE] = how
    message = (f"the program ended ({how}) without finishing its profile; the agent span ends at its exit"
               + ("; its last line, cut short, was removed" if cut else ""))
    ended = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    meta = {"record": "meta", "ended": ended,
            "diagnostics": [{"kind": "run_ended_early", "message": message, "path": str(path)}]}
    with path.open("ab") as f:
        f.write((json.dumps(span, separators=(",", ":")) + "\n" + json.dumps(meta, separators=(",", ":")) + "\n")
                .encode("ascii", "backslashreplace"))
