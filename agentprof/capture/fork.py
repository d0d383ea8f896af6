"""Fork safety: what a child made by ``os.fork`` (``multiprocessing``'s ``fork`` start method, pools, xdist)
inherits from agentprof is made usable again in the child, at fork time and never per span.

A thread of the parent may hold one of agentprof's locks (a trace writer's, a session's, the warning set's) at
the moment another thread forks; only the forking thread exists in the child, so that lock would never be
released there and the child's first span would hang. The child therefore gets fresh locks, a fresh
fingerprint worker (the parent's thread does not exist in it) and sessions that no longer wait for the
parent's model calls.

The rule for a forked child's spans (docs/CAPTURE.md, "Forked processes"): they go to the file of the
session that was active when it forked, the parent's, as appended lines (one ``write`` each, so lines of the
two processes never interleave), under the same root span, so one run stays one trace. The parent's final
meta counts the spans its own process wrote (``spans``) and the children it forked (``forks``); a child that
leaves the profile (its ``with profile`` block or interpreter exit) appends a ``{"record": "fork"}`` line
with its pid and its own span count, and readers add those up (``TraceMeta.extra["fork_spans"]``).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any


def _loaded(name: str) -> Any:
    """A module of agentprof's capture package if this process imported it (a fork handler imports nothing:
    another thread may have held an import lock at the fork)."""
    return sys.modules.get(f"agentprof.capture.{name}")


def _after_in_child() -> None:
    failsafe, provider, instrument = _loaded("failsafe"), _loaded("provider"), _loaded("instrument")
    patches, fingerprint, session = _loaded("patches"), _loaded("fingerprint"), _loaded("session")
    for module in (failsafe, provider, instrument):
        if module is not None:
            module._lock = threading.Lock()
    if patches is not None:
        for p in list(patches.ALL):
            p._lock = threading.Lock()
    if fingerprint is not None:
        fingerprint.after_fork_in_child()
    if session is not None:
        for s in list(session._live):
            s.after_fork_in_child()


def _after_in_parent() -> None:
    session = _loaded("session")
    if session is not None:
        for s in list(session._live):
            s.forks += 1


_registered = False


def register() -> None:
    """Install the handlers once per process (idempotent; a no-op where ``os.fork`` does not exist)."""
    global _registered
    if _registered or not hasattr(os, "register_at_fork"):
        return
    _registered = True
    os.register_at_fork(after_in_child=_after_in_child, after_in_parent=_after_in_parent)
