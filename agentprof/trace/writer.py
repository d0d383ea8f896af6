"""The crash-safe JSONL trace writer (no polars dependency, so capture can use it inside an agent).

Each record is one ``write`` of a full line, so a process killed at any moment leaves every completed record
readable. :mod:`agentprof.trace.files` re-exports the names defined here.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from agentprof.trace.meta import TraceMeta

FORMAT_NAME = "agentprof-trace"
FORMAT_VERSION = 1

_OPEN: weakref.WeakSet[JsonlTraceWriter] = weakref.WeakSet()
"""Writers of this process (their locks are replaced in a forked child: see :func:`_after_fork_in_child`)."""


class JsonlTraceWriter:
    """Append-only JSONL trace writer: each record is one ``write`` of a full line, flushed immediately,
    so a process killed at any moment leaves every completed record readable."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        _OPEN.add(self)

    def write(self, record: dict[str, Any]) -> None:
        self.write_line((json.dumps(record, separators=(",", ":"), default=str) + "\n").encode())

    def write_line(self, line: bytes) -> None:
        """Append one already serialized record (``line`` must end with a newline)."""
        with self._lock:
            if self._fd < 0:
                raise ValueError("trace writer is closed")
            n = os.write(self._fd, line)
            while n < len(line):  # a short write (file size limit, nearly full disk): finish or raise
                line = line[n:]
                n = os.write(self._fd, line)

    def write_meta(self, meta: TraceMeta) -> None:
        self.write({"record": "meta", "format": FORMAT_NAME, "version": FORMAT_VERSION, **meta.to_dict()})

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _after_fork_in_child() -> None:
    """A thread of the parent may have held a writer's lock at the fork: it never releases it in the child, so
    every writer gets a fresh lock there (the file descriptor is shared; each line is still one append)."""
    for w in list(_OPEN):
        w._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
