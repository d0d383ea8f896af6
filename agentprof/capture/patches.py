"""Reference-counted monkey patches: installed while at least one profile that needs them is active.

Each patch restores the original only if nobody replaced the patched attribute in the meantime (otherwise
the wrapper stays in place; it passes calls straight through when no profile is active).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

ALL: weakref.WeakSet[RefPatch] = weakref.WeakSet()
"""Every patch of this process (a forked child replaces their locks: :mod:`agentprof.capture.fork`)."""


class RefPatch:
    """Replace ``owner.attr`` with ``make(original)`` while :meth:`acquire` count is above zero."""

    def __init__(self, owner: Any, attr: str, make: Callable[[Any], Any]) -> None:
        self.owner = owner
        self.attr = attr
        self.make = make
        self.count = 0
        self.original: Any = None
        self.wrapper: Any = None
        self._lock = threading.Lock()
        ALL.add(self)

    def acquire(self) -> None:
        with self._lock:
            self.count += 1
            if self.count > 1:
                return
            current = getattr(self.owner, self.attr, None)
            if current is None:
                return
            if self.wrapper is not None and current is self.wrapper:
                return  # left in place by an earlier release
            self.original = current
            self.wrapper = self.make(current)
            setattr(self.owner, self.attr, self.wrapper)

    def release(self) -> None:
        with self._lock:
            if self.count == 0:
                return
            self.count -= 1
            if self.count or self.wrapper is None:
                return
            if getattr(self.owner, self.attr, None) is self.wrapper:
                setattr(self.owner, self.attr, self.original)
                self.wrapper = None


class PatchGroup:
    """Several patches acquired and released together."""

    def __init__(self, *patches: RefPatch) -> None:
        self.patches = patches

    def acquire(self) -> None:
        for p in self.patches:
            p.acquire()

    def release(self) -> None:
        for p in reversed(self.patches):
            p.release()
