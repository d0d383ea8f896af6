"""A thread's on-CPU time and run-queue wait from Linux ``/proc/self/task/<tid>/schedstat``.

On-CPU time alone under-reads CPU-bound work on a busy machine (a pure-Python loop that gets a third of a
core reads 33 % CPU-bound); adding the time the thread was runnable but waiting for a CPU reads it as the
100 % it is. Elsewhere (or with schedstats off) only the CPU clock is available and the wait reads 0.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any


def _gil_holding_pread() -> Any:
    """libc ``pread`` called without releasing the interpreter lock (``ctypes.PyDLL``): ``os.pread`` releases
    it, and a sampler that lets go of the lock mid-tick must wait for the agent's thread to hand it back (one
    more forced switch in the agent per read). None where libc cannot be loaded."""
    try:
        fn = ctypes.PyDLL(None, use_errno=True).pread
        fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
        fn.restype = ctypes.c_ssize_t
        return fn
    except (OSError, AttributeError):
        return None


_pread = _gil_holding_pread()


def new_buffer() -> Any:
    """A read buffer for :func:`pread_all`; one per reading thread (the lock may pass between read and copy)."""
    return ctypes.create_string_buffer(256)


def pread_all(fd: int, buf: Any) -> bytes:
    """The whole (short) content of a /proc file from offset 0, keeping the interpreter lock when possible."""
    if _pread is not None:
        n = _pread(fd, buf, 256, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), "pread failed")
        return buf.raw[:n]
    return os.pread(fd, 256, 0)


class ThreadClock:
    """(CPU ns, run-queue wait ns) of one thread, read without reopening the file (by one thread at a time)."""

    __slots__ = ("fd", "clock", "buf")

    def __init__(self, native_id: int | None, ident: int | None = None) -> None:
        self.fd = -1
        self.clock: int | None = None
        self.buf = new_buffer()
        if native_id is not None:
            try:
                self.fd = os.open(f"/proc/self/task/{native_id}/schedstat", os.O_RDONLY)
            except OSError:
                self.fd = -1
        if self.fd < 0 and ident is not None:
            try:
                self.clock = time.pthread_getcpuclockid(ident)
            except (OSError, AttributeError, ValueError):
                self.clock = None

    def read(self) -> tuple[int, int] | None:
        """Cumulative (CPU ns, run-queue wait ns); None when the thread is gone or nothing is readable."""
        if self.fd >= 0:
            try:
                cpu, wait, _ = pread_all(self.fd, self.buf).split()
                return int(cpu), int(wait)
            except (OSError, ValueError):
                return None
        if self.clock is not None:
            try:
                return time.clock_gettime_ns(self.clock), 0
            except OSError:
                return None
        return None

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


def current_thread_clock() -> ThreadClock:
    return ThreadClock(threading.get_native_id(), threading.get_ident())


class _RunqReader:
    """The calling thread's schedstat file (a :class:`ThreadClock` without its CPU-clock fallback), kept open for
    the thread's life (closed with it)."""

    __slots__ = ("clock",)

    def __init__(self) -> None:
        self.clock = ThreadClock(threading.get_native_id())

    def __del__(self) -> None:
        self.clock.close()


_local = threading.local()


def thread_runq_ns() -> int:
    """The calling thread's cumulative run-queue wait (ns), or -1 where schedstat cannot be read (not Linux,
    schedstats off, an error): spans read it at start and end to record the CPU wait they suffered."""
    r = getattr(_local, "reader", None)
    if r is None:
        r = _local.reader = _RunqReader()
    fd = r.clock.fd
    if fd < 0:
        return -1
    try:  # os.pread: lets go of the interpreter lock, which costs the agent's own thread less than ctypes
        return int(os.pread(fd, 64, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _forget_readers() -> None:
    """A forked child's threads are not the parent's: read its own files."""
    global _local
    _local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_readers)
