"""Carry the active profile (its session and current span) into threads.

asyncio tasks copy context variables by themselves. Threads do not, so while a profile is active agentprof
makes ``ThreadPoolExecutor.submit`` (and so ``map`` and ``loop.run_in_executor``) run each work item in a
copy of the submitting context, and ``threading.Thread.start`` run the thread in a copy of the starting
context: tool calls made there nest under the span that was current when the work was handed over. For
other thread pools, hand work over through :func:`wrap`.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from agentprof.capture.patches import PatchGroup, RefPatch
from agentprof.capture.session import _ACTIVE

T = TypeVar("T")

_copy_context = contextvars.copy_context
_POOL_WORKER = getattr(getattr(concurrent.futures, "thread", None), "_worker", None)


def wrap(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` bound to the current context: wherever it runs later, its spans nest under the span that is
    current now (each call runs in its own copy, so the wrapper may run in several threads at once)."""
    ctx = _copy_context()

    @functools.wraps(fn)
    def run_in_context(*args: Any, **kwargs: Any) -> T:
        return ctx.copy().run(fn, *args, **kwargs)

    return run_in_context


def _make_submit(original: Callable[..., Any]) -> Callable[..., Any]:
    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if _ACTIVE.get() is not None:
            return original(self, _copy_context().run, fn, *args, **kwargs)
        return original(self, fn, *args, **kwargs)

    submit.__wrapped__ = original  # type: ignore[attr-defined]
    return submit


def _make_start(original: Callable[..., Any]) -> Callable[..., Any]:
    def start(self: threading.Thread) -> None:
        if _ACTIVE.get() is not None and (_POOL_WORKER is None or getattr(self, "_target", None) is not _POOL_WORKER):
            ctx = _copy_context()
            inner = self.run

            def run() -> None:
                try:
                    ctx.run(inner)
                finally:
                    self.__dict__.pop("run", None)  # drop the thread -> run -> thread cycle

            self.run = run  # type: ignore[method-assign]
        original(self)

    start.__wrapped__ = original  # type: ignore[attr-defined]
    return start


PROPAGATION = PatchGroup(
    RefPatch(concurrent.futures.ThreadPoolExecutor, "submit", _make_submit),
    RefPatch(threading.Thread, "start", _make_start),
)
"""Installed while any profile is active (see :class:`agentprof.capture.session.Session`)."""
