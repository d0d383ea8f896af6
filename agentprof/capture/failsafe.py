"""Failures inside agentprof never reach the agent: they become one warning per problem, then capture
carries on (or stops recording) while the agent's own behaviour and results stay unchanged."""

from __future__ import annotations

import threading
import warnings


class CaptureWarning(RuntimeWarning):
    """agentprof could not record something; the agent ran normally but the trace may be incomplete."""


_warned: set[str] = set()
_lock = threading.Lock()


def warn_once(key: str, message: str, stacklevel: int = 3) -> None:
    """Issue ``message`` as a :class:`CaptureWarning` the first time ``key`` is seen in this process.

    Even a warnings filter set to ``error`` cannot turn this into an exception inside the agent. A warning
    from a background thread passes a ``stacklevel`` past its stack, so it is shown as one line.
    """
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    try:
        warnings.warn(f"agentprof: {message}", CaptureWarning, stacklevel=stacklevel)
    except Exception:
        pass


def internal_error(where: str, err: BaseException) -> None:
    """Report an unexpected failure inside agentprof (once per place)."""
    warn_once(f"internal:{where}", f"{where} failed ({type(err).__name__}: {err}); the agent continues, "
                                   "the trace may be incomplete")


def reset_warnings() -> None:
    """Forget which warnings were issued (tests use this to check each problem warns once)."""
    with _lock:
        _warned.clear()
