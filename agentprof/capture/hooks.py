"""What a profiled session installs in the process while it runs — context propagation into threads, child
CPU accounting, the SDK instrumentation, the optional ``subprocess`` and ``json`` patches and the stack sampler —
handed to the session core (:data:`agentprof.capture.session.HOOKS`) from here, so the core imports none of them.
The capture package imports this module before anything can start a session."""

from __future__ import annotations

from typing import Any

from agentprof.capture import context, instrument, json_patch, session, subprocess_patch


def patches(sess: session.Session) -> list[Any]:
    """The SDK hooks are installed once per process; the patches below are held while the session runs."""
    instrument.ensure()
    out: list[Any] = [context.PROPAGATION, subprocess_patch.CHILD_CPU]
    if sess.instrument_subprocess:
        out.append(subprocess_patch.POPEN)
    if sess.instrument_json:
        out.append(json_patch.LOADS)
    return out


def sampler(sess: session.Session, interval: float) -> Any:
    from agentprof.capture.sampler import Sampler

    return Sampler(sess, interval).start()


session.HOOKS.patches = patches  # type: ignore[method-assign]
session.HOOKS.sampler = sampler  # type: ignore[method-assign]
