"""Keep the sampler's profiling timer out of programs the agent ``exec``s.

Interval timers survive ``execve``, and a program that has not installed a ``SIGPROF`` handler is terminated by
the signal: an agent that replaced itself with ``os.exec*`` while the signal sampler ran would see its new program
killed at the first tick. While the guard is on, ``os.execv`` and ``os.execve`` (every ``os.exec*`` ends in one of
them) disarm ``ITIMER_PROF`` first and re-arm it if the exec fails. Forked children need nothing: they do not
inherit interval timers.
"""

from __future__ import annotations

import os
import signal
from typing import Any

_originals: dict[str, Any] = {}
_interval_s = 0.0


def _guarded(name: str, original: Any) -> Any:
    def exec_without_timer(*args: Any, **kwargs: Any) -> Any:
        armed = _interval_s > 0 and signal.getitimer(signal.ITIMER_PROF)[1] > 0
        if armed:
            signal.setitimer(signal.ITIMER_PROF, 0.0, 0.0)
        try:
            return original(*args, **kwargs)
        finally:  # reached only when the exec failed: the process is still this one
            if armed and _interval_s > 0:
                signal.setitimer(signal.ITIMER_PROF, _interval_s, _interval_s)

    exec_without_timer.__name__ = name
    exec_without_timer.__doc__ = original.__doc__
    exec_without_timer.__wrapped__ = original  # type: ignore[attr-defined]
    return exec_without_timer


def install(interval_s: float) -> None:
    """Guard ``os.execv``/``os.execve`` while a timer of ``interval_s`` seconds runs (idempotent)."""
    global _interval_s
    _interval_s = interval_s
    for name in ("execv", "execve"):
        if name not in _originals and hasattr(os, name):
            _originals[name] = getattr(os, name)
            setattr(os, name, _guarded(name, _originals[name]))


def remove() -> None:
    """Put the original functions back where the guards are still in place (another patch on top stays)."""
    global _interval_s
    _interval_s = 0.0
    for name, original in list(_originals.items()):
        if getattr(getattr(os, name, None), "__wrapped__", None) is original:
            setattr(os, name, original)
            del _originals[name]
