"""How ``agentprof run`` supervises its program the way a shell supervises a job.

The program runs in a process group of its own. When ``agentprof run`` holds the terminal's foreground,
the program's group is given the foreground, so Ctrl-C, Ctrl-\\ and Ctrl-Z reach it (and its tools)
directly, exactly as without agentprof, and it can read the terminal. SIGINT, SIGTERM, SIGHUP and SIGQUIT
sent to ``agentprof run`` itself are passed on to the program's group. A program stopped by Ctrl-Z stops
``agentprof run`` too (the shell sees the job stopped); ``fg`` continues both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_STOPS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


def _foreground_terminal() -> int | None:
    """A descriptor of the controlling terminal when this process's group holds its foreground, else None."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _give_terminal(fd: int, pgrp: int) -> None:
    """Make ``pgrp`` the terminal's foreground group (SIGTTOU blocked: the caller may be in the background)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgrp)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _killpg(pgrp: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgrp, signum)


@contextlib.contextmanager
def _forwarding(target: list[int]) -> Iterator[Callable[[int], None]]:
    """Pass the forwarded signals on to the program's group; yields ``started(pgrp)``, which names the group
    and passes on what arrived before it existed. A signal this process ignores stays ignored, so the
    program inherits it ignored, as it would without agentprof."""
    pending: list[int] = []

    def started(pgrp: int) -> None:
        target.append(pgrp)
        while pending:
            _killpg(pgrp, pending.pop(0))

    def forward(signum: int, _frame: Any) -> None:
        if target:
            _killpg(target[0], signum)
        else:
            pending.append(signum)

    previous: dict[int, Any] = {}
    try:
        for s in FORWARDED:
            if signal.getsignal(s) is not signal.SIG_IGN:
                previous[s] = signal.signal(s, forward)
    except ValueError:  # not the main thread: signals cannot be caught here; the program still runs
        pass
    try:
        yield started
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def run_job(cmd: list[str], env: dict[str, str]) -> int:
    """Run ``cmd`` as a job of its own and return its exit code (``-n``: killed by signal n).
    ``OSError`` when it cannot be started."""
    tty = _foreground_terminal()
    own = os.getpgrp()
    group: list[int] = []
    try:
        with _forwarding(group) as started:
            proc = _start(cmd, env, tty)
            started(proc.pid)
            if tty is not None:  # the parent's half of the hand-over (the child did the same, to win any race)
                _give_terminal(tty, proc.pid)
            status = _wait(proc, tty, own)
    finally:
        if tty is not None:
            if group:
                _give_terminal(tty, own)
            os.close(tty)
    return status


def _start(cmd: list[str], env: dict[str, str], tty: int | None) -> subprocess.Popen[bytes]:
    ttou = signal.getsignal(signal.SIGTTOU)
    parent = os.getpid()
    die_with_parent = _parent_death_signal()

    def as_job() -> None:  # in the child, before exec
        os.setpgid(0, 0)
        die_with_parent()
        if os.getppid() != parent:  # agentprof run died before the line above: so does the program
            os.kill(os.getpid(), signal.SIGTERM)
        if tty is not None:  # hold the terminal's foreground
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty, os.getpgrp())
            signal.signal(signal.SIGTTOU, ttou if ttou is not None else signal.SIG_DFL)

    return subprocess.Popen(cmd, env=env, preexec_fn=as_job)


def _parent_death_signal() -> Any:
    """A call that asks Linux to send the calling process SIGTERM when ``agentprof run`` dies (even by
    SIGKILL, which cannot be forwarded), so the program never runs on unsupervised; a no-op elsewhere."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None
    PR_SET_PDEATHSIG = 1  # noqa: N806 - <sys/prctl.h>
    return lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _wait(proc: subprocess.Popen[bytes], tty: int | None, own: int) -> int:
    """Wait for the program to end; with the terminal, follow its stops and continues like a shell."""
    flags = os.WUNTRACED if tty is not None else 0
    while True:
        try:
            _, status = os.waitpid(proc.pid, flags)
        except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler of the embedding program)
            proc.returncode = 0
            return 0
        if not os.WIFSTOPPED(status):
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode
        assert tty is not None
        _stopped(proc.pid, os.WSTOPSIG(status), tty, own)


def _stopped(pgrp: int, signum: int, tty: int, own: int) -> None:
    """The program's group stopped: take the terminal back and stop this job the same way; when continued,
    give the terminal back (if the job is in the foreground again) and continue the program."""
    with contextlib.suppress(OSError):
        if signum in (signal.SIGTTIN, signal.SIGTTOU) and os.tcgetpgrp(tty) == pgrp:
            _killpg(pgrp, signal.SIGCONT)  # it touched the terminal before the hand-over finished
            return
    _give_terminal(tty, own)
    _killpg(own, signum if signum in _STOPS else signal.SIGSTOP)
    # continued (fg or bg)
    with contextlib.suppress(OSError):
        if os.tcgetpgrp(tty) == own:
            _give_terminal(tty, pgrp)
    _killpg(pgrp, signal.SIGCONT)
