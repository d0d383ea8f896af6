"""``agentprof run``: profile an unmodified Python program for its whole life, as one session.

The command runs as a child process with a ``sitecustomize`` bootstrap on its ``PYTHONPATH`` (so
``python script.py``, ``python -m package`` and any interpreter flags behave exactly as without agentprof).
The bootstrap starts a process-wide profile before the program's first line and finishes it at interpreter
exit; the parent reserves the trace path, waits, and passes the program's exit status through.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from agentprof.errors import AgentprofError

ENV_CONFIG = "AGENTPROF_RUN_CONFIG"
BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


def command_line(argv: list[str]) -> list[str]:
    """The child's command: a bare ``python``/``python3`` means agentprof's interpreter; a lone ``*.py``
    script runs with it."""
    if not argv:
        raise AgentprofError("nothing to run: give a command after --, e.g. agentprof run -- python agent.py")
    first = argv[0]
    if _PYTHON.match(first):
        return [sys.executable, *argv[1:]]
    if first.endswith(".py"):
        return [sys.executable, *argv]
    return list(argv)


_VALUE_OPTIONS = ("-W", "-X", "--check-hash-based-pycs")
"""Interpreter options whose value is the next argument (``-W ignore``), not the script."""


def default_name(argv: list[str]) -> str:
    """Run name from the command: the script's stem, the ``-m`` module, else the program's name. Values of
    interpreter options (``-W ignore``, ``-X dev``) are skipped."""
    is_python = bool(argv) and (_PYTHON.match(Path(argv[0]).name) is not None or argv[0] == sys.executable)
    args = argv[1:] if is_python else argv
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "-m" and i + 1 < len(args):
            return args[i + 1].rsplit(".", 1)[-1]
        if a.startswith("-m") and len(a) > 2:
            return a[2:].rsplit(".", 1)[-1]
        if a == "-c" or (a.startswith("-c") and not a.startswith("--")):
            return "python-c"
        if is_python and a in _VALUE_OPTIONS:
            skip = True
            continue
        if a == "-":
            return "python-stdin"
        if not a.startswith("-"):
            return Path(a).stem or "agent"
    return Path(argv[0]).stem if argv else "agent"


def run_command(argv: list[str], out: str = "traces/", name: str | None = None, capture_content: bool = False,
                instrument_subprocess: bool = False, instrument_json: bool = False,
                sample: float | None = None, warn: Callable[[str], None] | None = None) -> RunResult:
    """Run ``argv`` profiled; return its exit status, the trace path (``None`` if nothing was recorded) and the
    signal that ended it, if one did.

    A recording set-up that fails (the trace file cannot be created, a sampling interval out of range) runs
    the program unprofiled after one warning through ``warn`` (default: a line on stderr), as ``profile`` does.
    """
    from agentprof.capture.job_control import run_job
    from agentprof.capture.run_trace import settle
    from agentprof.capture.session import _claim, trace_path

    cmd = command_line(argv)
    run_name = name or default_name(argv)
    env = dict(os.environ)
    path: Path | None = None
    try:
        interval = interval_of(sample)
        path = _claim(trace_path(out, run_name, _dt.datetime.now(_dt.timezone.utc)))
    except (OSError, ValueError) as e:
        reason = f"{out}: cannot create the trace file there ({e.strerror or e})" if isinstance(e, OSError) else str(e)
        (warn or _stderr_warning)(f"agentprof: {reason}; the program runs unprofiled")
    if path is not None:
        env[ENV_CONFIG] = json.dumps({"path": str(path.resolve()), "name": run_name,
                                      "capture_content": capture_content,
                                      "instrument_subprocess": instrument_subprocess,
                                      "instrument_json": instrument_json, "sample": interval})
        env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP_DIR), *[p for p in [env.get("PYTHONPATH")] if p]])
    try:
        code = run_job(cmd, env)
    except OSError as e:
        if path is not None:
            path.unlink(missing_ok=True)
        raise CommandFailedToStart(cmd[0], e) from None
    rc = 128 - code if code < 0 else code  # killed by signal n: what a shell reports (128 + n), not 256 - n
    return RunResult(rc, settle(path, code) if path is not None else None, -code if code < 0 else None)


class RunResult(NamedTuple):
    """How an ``agentprof run`` ended: ``status`` as a shell reports it, the trace, the signal that ended it."""

    status: int
    path: Path | None
    signal: int | None


def interval_of(sample: float | None) -> float | None:
    """The stack-sampling interval in seconds (``ValueError`` outside 0.1 ms to 10 s)."""
    from agentprof.capture.sampler import interval_of as checked

    return None if sample is None else checked(float(sample))


def _stderr_warning(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


class CommandFailedToStart(AgentprofError):
    """The command could not be started; ``exit_code`` is the shell's: 127 not found, 126 not executable."""

    def __init__(self, program: str, error: OSError) -> None:
        super().__init__(f"cannot run {program!r}: {error.strerror or error}")
        self.exit_code = 127 if isinstance(error, FileNotFoundError) else 126


# --- in the child ------------------------------------------------------------------------------------------
_state: dict[str, Any] = {}


def start_process_profile(config: str) -> None:
    """Called by the bootstrap: profile this process until interpreter exit.

    The run's agent span is announced in the file (a ``run_root`` record) only once the program's own code
    starts, so ``agentprof run`` can close it if the program is killed, and a program that never ran (a missing
    script or module, a syntax error) leaves no trace file.
    """
    from agentprof.capture import provider
    from agentprof.capture.session import Session, set_process_session

    cfg = json.loads(config)
    sess = Session(cfg.get("name") or "agent", None, path=cfg["path"],
                   capture_content=bool(cfg.get("capture_content")),
                   instrument_json=bool(cfg.get("instrument_json")),
                   instrument_subprocess=bool(cfg.get("instrument_subprocess")),
                   sample=cfg.get("sample") or None).start()
    set_process_session(sess)
    _state["session"] = sess
    previous_hook = sys.excepthook

    def excepthook(et: Any, exc: BaseException, tb: Any) -> None:
        _state["exception"] = exc
        previous_hook(et, exc, tb)

    sys.excepthook = excepthook
    sys.setprofile(_on_program_start)

    def finish() -> None:
        set_process_session(None)
        if sys.getprofile() is _on_program_start:
            sys.setprofile(None)
        if not _state.get("started"):
            sess.discard()
        else:
            sess.finish(_state.get("exception"))
        provider.shutdown()

    atexit.register(finish)


def _on_program_start(frame: Any, event: str, _arg: Any) -> None:
    """Profile hook on the main thread until the first line of ``__main__`` runs (then removed)."""
    if event != "call" or frame.f_code.co_name != "<module>" or frame.f_globals.get("__name__") != "__main__":
        return
    sys.setprofile(None)
    _state["started"] = True
    from agentprof.capture.run_trace import announce_root

    try:
        announce_root(_state["session"])
    except Exception as e:
        from agentprof.capture.failsafe import internal_error

        internal_error("recording the run's start", e)
