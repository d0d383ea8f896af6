"""``agentprof.profile``: record one agent run (a session) into one trace file.

Use it as a decorator on a sync or async entry function (each call is one run) or as a context manager
(``with agentprof.profile("fix-bug") as run:`` / ``async with``). The agent's exceptions propagate unchanged
(the run is marked failed); agentprof's own failures only warn.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agentprof.capture.failsafe import internal_error
from agentprof.capture.session import _ACTIVE, Session

F = TypeVar("F", bound=Callable[..., Any])


class Run:
    """Handle on one profiled run: where its trace goes and how the run went."""

    def __init__(self, session: Session | None, name: str) -> None:
        self._session = session
        self.name = name

    @property
    def path(self) -> Path | None:
        """The trace file (``None`` when it could not be created; see :attr:`error`)."""
        return self._session.path if self._session else None

    @property
    def session_id(self) -> str | None:
        return self._session.id if self._session else None

    @property
    def trace_id(self) -> str | None:
        if self._session is None or self._session.root is None:
            return None
        return f"{self._session.root.get_span_context().trace_id:032x}"

    @property
    def error(self) -> str | None:
        """Why no trace file could be written, if so."""
        return self._session.error if self._session else "profiling could not start"

    @property
    def spans(self) -> int:
        """Spans written so far."""
        return self._session.spans if self._session else 0

    @property
    def capture_overhead_ns(self) -> int:
        """Time agentprof spent on the agent's threads so far."""
        return self._session.overhead_ns if self._session else 0

    @property
    def capture_background_cpu_ns(self) -> int:
        """CPU agentprof's background thread spent so far (prompt fingerprints): off the agent's threads, so it
        costs the agent wall time only when no core is free for it."""
        return self._session.background_cpu_ns if self._session else 0

    def load(self) -> Any:
        """The recorded trace (:class:`agentprof.trace.Trace`; imports polars)."""
        if self.path is None:
            raise FileNotFoundError(f"no trace file was written ({self.error})")
        from agentprof.trace.files import read

        return read(self.path)

    def __repr__(self) -> str:
        return f"Run(name={self.name!r}, path={str(self.path) if self.path else None!r})"


class profile:
    """Profile an agent run: ``@agentprof.profile`` / ``@agentprof.profile(name=..., out=...)`` or
    ``with agentprof.profile("name") as run:``.

    - ``name``: run name (default: the decorated function's name, else ``agent``); also the file name prefix.
    - ``out``: folder for ``<name>-<UTC timestamp>.jsonl`` (created if missing).
    - ``capture_content``: also store prompt/response text, tool arguments and results (off: hashes only).
    - ``instrument_json``: record ``json.loads`` calls as parse spans.
    - ``instrument_subprocess``: record child processes as tool spans.
    - ``sample``: also sample every thread's stack (``True``: every 10 ms; a number: the interval in seconds),
      so reports show which functions the agent's loop and its tools spend their time in.
    """

    def __init__(self, name: str | Callable[..., Any] | None = None, out: str | os.PathLike[str] = "traces/",
                 capture_content: bool = False, instrument_json: bool = False,
                 instrument_subprocess: bool = False, sample: bool | float = False) -> None:
        from agentprof.capture.sampler import interval_of

        self._fn: Callable[..., Any] | None = None
        if callable(name):  # used bare: @agentprof.profile
            self._fn, name = name, None
        self.name = name
        self.out = out
        self.options = {"capture_content": capture_content, "instrument_json": instrument_json,
                        "instrument_subprocess": instrument_subprocess, "sample": interval_of(sample)}
        self._runs: list[tuple[Session | None, Run]] = []
        if self._fn is not None:
            self._wrapped = self._decorate(self._fn)
            functools.update_wrapper(self, self._fn)

    # --- sessions ----------------------------------------------------------------------------------------
    def _start(self, name: str) -> tuple[Session | None, Run]:
        try:
            sess: Session | None = Session(name, self.out, **self.options).start()
        except Exception as e:
            internal_error("starting the profile", e)
            sess = None
        return sess, Run(sess, name)

    @staticmethod
    def _finish(sess: Session | None, exc: BaseException | None) -> None:
        if sess is None:
            return
        try:
            sess.finish(exc)
        except Exception as e:
            internal_error("finishing the profile", e)

    # --- decorator ---------------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._fn is not None:
            return self._wrapped(*args, **kwargs)
        if len(args) == 1 and not kwargs and callable(args[0]):
            return self._decorate(args[0])
        raise TypeError("profile(...) decorates a function: use @agentprof.profile(...) above a def")

    def _decorate(self, fn: F) -> F:
        name = self.name or getattr(fn, "__name__", None) or "agent"
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_run(*args: Any, **kwargs: Any) -> Any:
                sess, _ = self._start(name)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException as e:
                    self._finish(sess, e)
                    raise
                self._finish(sess, None)
                return result

            return async_run  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            sess, _ = self._start(name)
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:
                self._finish(sess, e)
                raise
            self._finish(sess, None)
            return result

        return run  # type: ignore[return-value]

    # --- context manager ---------------------------------------------------------------------------------
    def __enter__(self) -> Run:
        sess, run = self._start(self.name or "agent")
        self._runs.append((sess, run))
        return run

    def __exit__(self, et: Any, exc: BaseException | None, tb: Any) -> None:
        if not self._runs:
            return
        active = _ACTIVE.get()  # the run entered in this context (one profile object may be entered by many tasks)
        index = next((i for i in range(len(self._runs) - 1, -1, -1) if self._runs[i][0] is active), -1)
        sess, _ = self._runs.pop(index)
        self._finish(sess, exc)

    async def __aenter__(self) -> Run:
        return self.__enter__()

    async def __aexit__(self, et: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(et, exc, tb)
