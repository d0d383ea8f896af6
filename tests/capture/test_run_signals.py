"""``agentprof run`` on a real pseudo-terminal: Ctrl-C reaches the program as without agentprof, signals sent
to ``agentprof run`` reach the program's process group, and the trace is finished either way."""

from __future__ import annotations

import os
import pty
import resource
import select
import signal
import sys
import textwrap
import time

import pytest

from .capture_helpers import REPO, load, of_kind

LOOP = textwrap.dedent("""
    import os, subprocess, sys, time
    tool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print("ready", os.getpid(), tool.pid, flush=True)
    if sys.argv[1:] == ["read"]:
        print("got", input().upper(), flush=True)
    while True:
        time.sleep(0.05)
""")


class Job:
    """``agentprof run`` as the foreground job of a fresh pseudo-terminal (its session leader)."""

    def __init__(self, tmp_path, *program: str) -> None:
        script = tmp_path / "loop.py"
        script.write_text(LOOP)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        argv = [sys.executable, "-m", "agentprof.cli", "run", "--out", str(tmp_path / "t"), "--", "python",
                str(script), *program]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once, as a shell starts a foreground job (default dispositions:
            for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):  # a job started with & by a
                signal.signal(s, signal.SIG_DFL)  # script inherits SIGINT and SIGQUIT ignored), without core
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # dumps (SIGQUIT's default writes one per process)
            os.chdir(REPO)
            os.execve(sys.executable, argv, env)
        self.out = b""
        self.status: int | None = None

    def read_until(self, marker: bytes, timeout: float = 60.0, after: bytes = b"") -> bytes:
        deadline = time.monotonic() + timeout

        def seen() -> bool:
            return marker in self.out.split(after, 1)[-1] if after else marker in self.out

        while not seen() and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:  # EIO: every process holding the terminal has exited
                    break
        assert seen(), self.out.decode(errors="replace")
        return self.out

    def wait(self, timeout: float) -> tuple[int | None, float]:
        """Exit status as a shell reports it (128 + n when it died of signal n; None if still running after
        ``timeout``) and the seconds it took; the raw wait status is kept in ``self.status``."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
                code = os.waitstatus_to_exitcode(status)
                return (128 - code if code < 0 else code), time.monotonic() - t0
            with_data, _, _ = select.select([self.fd], [], [], 0.02)
            if with_data:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:
                    pass
        return None, time.monotonic() - t0

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie (an orphan's zombie waits for the container's init)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def soon_gone(pid: int, limit_s: float = 30.0) -> bool:
    """Gone within ``limit_s`` (at once on a quiet machine; no speed is asserted here)."""
    deadline = time.monotonic() + limit_s
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return gone(pid)


def kill_quietly(*pids: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def started(job: Job, pids: list[int]) -> list[int]:
    """The program's and its tool's pids, once the program says it is running (also kept in ``pids``)."""
    job.read_until(b"ready")
    line = job.read_until(b"\n", after=b"ready").split(b"ready", 1)[1].split(b"\n", 1)[0]
    pids.extend(int(w) for w in line.split())
    return pids


def trace_of(tmp_path):
    (path,) = (tmp_path / "t").glob("loop-*.jsonl")
    return load(path)


def test_ctrl_c_on_the_terminal_stops_the_program_and_its_tools(tmp_path):
    job, pids = Job(tmp_path), []
    try:
        agent, tool = started(job, pids)
        os.write(job.fd, b"\x03")  # Ctrl-C, typed on the terminal
        code, took = job.wait(timeout=30.0)
        assert code == 130, job.out.decode(errors="replace")
        assert os.WIFSIGNALED(job.status) and os.WTERMSIG(job.status) == signal.SIGINT  # as the program did:
        assert b"KeyboardInterrupt" in job.out and gone(agent)  # a calling shell script stops there too
        assert soon_gone(tool)  # the tool got the same SIGINT from the terminal
    finally:
        kill_quietly(*pids)
        job.close()
    trace, rows = trace_of(tmp_path)
    (root,) = of_kind(rows, "agent")
    assert root["status"] == "error" and root["error_type"] == "KeyboardInterrupt"


def test_sigterm_to_agentprof_run_ends_the_program_and_closes_its_trace(tmp_path):
    job, pids = Job(tmp_path), []
    try:
        agent, tool = started(job, pids)
        os.kill(job.pid, signal.SIGTERM)
        code, took = job.wait(timeout=30.0)
        assert code == 128 + signal.SIGTERM
        assert gone(agent)
        assert soon_gone(tool)  # the whole process group got it, not only the program
    finally:
        kill_quietly(*pids)
        job.close()
    trace, rows = trace_of(tmp_path)
    (root,) = of_kind(rows, "agent")  # closed by agentprof run at the program's exit
    assert root["status"] == "error" and root["error_type"] == "SIGTERM"
    assert [d.kind for d in trace.diagnostics] == ["run_ended_early"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP, signal.SIGQUIT])
def test_other_signals_to_agentprof_run_are_passed_on(tmp_path, signum):
    job, pids = Job(tmp_path), []
    try:
        agent, tool = started(job, pids)
        os.kill(job.pid, signum)
        code, _ = job.wait(timeout=30.0)  # at once on a quiet machine; CI builds environments meanwhile
        assert code == (130 if signum == signal.SIGINT else 128 + signum)
        assert gone(agent)
    finally:
        kill_quietly(*pids)
        job.close()
    _, rows = trace_of(tmp_path)
    assert len(of_kind(rows, "agent")) == 1


def test_the_program_owns_the_terminal(tmp_path):
    """It reads the terminal (no SIGTTIN stop), and agentprof run gets the terminal back at the end."""
    job, pids = Job(tmp_path, "read"), []
    try:
        started(job, pids)
        os.write(job.fd, b"hello\n")
        job.read_until(b"got HELLO")
        os.write(job.fd, b"\x03")
        code, _ = job.wait(timeout=30.0)
        assert code == 130
    finally:
        kill_quietly(*pids)
        job.close()
    assert b"trace written to" in job.out  # printed after the terminal came back


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_the_program_does_not_outlive_a_killed_agentprof_run(tmp_path):
    """SIGKILL cannot be passed on: the program learns of it from Linux (parent-death signal) and ends."""
    job, pids = Job(tmp_path), []
    try:
        agent, _tool = started(job, pids)
        os.kill(job.pid, signal.SIGKILL)
        assert soon_gone(agent)
    finally:
        kill_quietly(*pids)
        job.close()
