"""Child processes: their CPU time for tool spans, and (opt-in) each run as its own tool span.

- Always, while a profile is active: when a ``subprocess.Popen`` child is reaped, its CPU time (``wait4``
  resource usage, exact per child) is added to the innermost tool span of the context that waited for it.
- ``instrument_subprocess=True``: every ``Popen`` (so ``run``, ``call``, ``check_output``…) becomes an
  ``execute_tool subprocess:<program>`` span from start until it is waited for or polled as finished, with
  its return code and CPU time. Arguments are recorded only with ``capture_content=True``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

from agentprof import semconv as sc
from agentprof.capture.failsafe import internal_error
from agentprof.capture.patches import PatchGroup, RefPatch
from agentprof.capture.session import current
from agentprof.capture.spans import DetachedSpan, add_child_cpu

_SPAN = "_agentprof_span"
_CPU = "_agentprof_cpu_ns"


def program_name(args: Any, shell: bool = False) -> str:
    """The program a ``Popen`` runs, as a short name (base name of argv[0], first word of a shell command)."""
    try:
        if isinstance(args, (str, bytes, os.PathLike)):
            text = os.fsdecode(args)
            first = text.split()[0] if shell and text.split() else text
        else:
            first = os.fsdecode(list(args)[0])
        name = os.path.basename(first.rstrip("/")) or first
    except Exception:
        name = "?"
    return name[:64] or "?"


def _reaped(popen: Any, rusage: Any) -> None:
    cpu = int(round((rusage.ru_utime + rusage.ru_stime) * 1e9))
    popen.__dict__[_CPU] = cpu
    if current() is not None:
        add_child_cpu(cpu)


def _make_try_wait(original: Callable[..., Any]) -> Callable[..., Any]:
    def _try_wait(self: Any, wait_flags: int) -> Any:
        try:
            pid, sts, rusage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return original(self, wait_flags)
        if pid == self.pid:
            try:
                _reaped(self, rusage)
            except Exception as e:
                internal_error("measuring child-process CPU", e)
        return (pid, sts)

    _try_wait.__wrapped__ = original  # type: ignore[attr-defined]
    return _try_wait


def _end(popen: Any) -> None:
    span = popen.__dict__.pop(_SPAN, None)
    if span is not None:
        attrs: dict[str, Any] = {sc.SUBPROCESS_RETURNCODE: popen.returncode}
        cpu = popen.__dict__.get(_CPU)
        if cpu is not None:
            attrs[sc.CPU_NS] = cpu
        span.finish(attrs)


def _make_init(original: Callable[..., Any]) -> Callable[..., Any]:
    def __init__(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        sess = current()
        if sess is None or not sess.instrument_subprocess:
            return original(self, args, *rest, **kwargs)
        span = None
        try:
            tool = f"subprocess:{program_name(args, bool(kwargs.get('shell')))}"
            attrs: dict[str, Any] = {sc.KIND: "tool", sc.SESSION_ID: sess.id, sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                                     sc.TOOL_NAME: tool, sc.TOOL_TYPE: "extension"}
            if sess.capture_content:
                argv = [os.fsdecode(args)] if isinstance(args, (str, bytes, os.PathLike)) else \
                    [os.fsdecode(a) if isinstance(a, (str, bytes, os.PathLike)) else str(a) for a in args]
                attrs[sc.SUBPROCESS_ARGS] = json.dumps(argv, ensure_ascii=False)
            span = DetachedSpan(sess, sc.tool_span_name(tool), attrs)
        except Exception as e:
            internal_error("starting a subprocess span", e)
        try:
            original(self, args, *rest, **kwargs)
        except BaseException as e:
            if span is not None:
                span.finish(exc=e)
            raise
        if span is not None:
            self.__dict__[_SPAN] = span
            if self.returncode is not None:
                _end(self)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    return __init__


def _make_wait(original: Callable[..., Any]) -> Callable[..., Any]:
    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        rc = original(self, *args, **kwargs)
        if _SPAN in self.__dict__ and self.returncode is not None:
            _end(self)
        return rc

    wait.__wrapped__ = original  # type: ignore[attr-defined]
    return wait


def _make_poll(original: Callable[..., Any]) -> Callable[..., Any]:
    def poll(self: Any) -> Any:
        rc = original(self)
        if rc is not None and _SPAN in self.__dict__:
            _end(self)
        return rc

    poll.__wrapped__ = original  # type: ignore[attr-defined]
    return poll


class _Nothing:
    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass


CHILD_CPU: Any = RefPatch(subprocess.Popen, "_try_wait", _make_try_wait) \
    if hasattr(os, "wait4") and hasattr(subprocess.Popen, "_try_wait") else _Nothing()
POPEN = PatchGroup(
    RefPatch(subprocess.Popen, "__init__", _make_init),
    RefPatch(subprocess.Popen, "wait", _make_wait),
    RefPatch(subprocess.Popen, "poll", _make_poll),
)
