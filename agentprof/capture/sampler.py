"""Opt-in stack sampler of a profiled run (``agentprof.profile(..., sample=True)``, ``agentprof run --sample``).

Every ``interval`` a tick reads every Python thread's stack (``sys._current_frames``) and its on-CPU time and run-queue wait (:mod:`agentprof.capture.schedstat`), so each sample carries the CPU the
thread used, and the time it waited for a CPU, since its previous sample: on-CPU time per frame, not just
wall. Only function names and file names are kept (no
arguments, no values). A sample taken inside an ``@agentprof.tool`` call or a recorded parse carries that
span's id, read from agentprof's own wrapper frame; the rest are attributed afterwards by time
(:mod:`agentprof.analysis.hotspots`). The tick is a ``SIGPROF`` handler on the main thread where that is safe,
else a thread's (:class:`Sampler`). Asyncio tasks are covered by the thread that runs them: a running
task's coroutine frames are that thread's stack.

Why this and not pyinstrument or py-spy: docs/PERFORMANCE.md (Capture, sampling) has the measurements.
The sampler writes ``{"record": "samples", ...}`` lines through the session's crash-safe writer about once
a second (format: docs/ARCHITECTURE.md, trace model); readers that predate it skip those records.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from agentprof.capture import exec_guard
from agentprof.capture.failsafe import internal_error
from agentprof.capture.schedstat import ThreadClock, new_buffer, pread_all
from agentprof.capture.spans import Scope  # at import, never in the signal handler (import locks)

DEFAULT_INTERVAL_S = 0.010
"""Default sampling interval (10 ms: a tick of the thread sampler makes the agent's thread hand over the
interpreter lock once, which on a busy machine costs it an OS scheduling delay; the signal sampler hands nothing
over; docs/PERFORMANCE.md)."""
MAX_DEPTH = 256
"""Frames kept per sample (the innermost ones)."""
FLUSH_EVERY_S = 1.0
CHILD_EVERY = 10
"""Child processes are looked up every this many ticks."""
FLUSH_SAMPLES = 4000
WATCH_EVERY = 10
"""In signal mode, the watchdog thread looks every this many intervals whether the timer signal still ticks."""
_OWN_THREADS = ("agentprof-",)
"""Threads agentprof itself runs (prompt fingerprinting, this sampler): not the agent's work."""

_perf = time.perf_counter_ns
_cpu = time.thread_time_ns
_time_ns = time.time_ns


def interval_of(sample: bool | float | None) -> float | None:
    """The sampling interval in seconds for a ``sample=`` option (True: the default; a number: seconds)."""
    if sample is None or sample is False:
        return None
    if sample is True:
        return DEFAULT_INTERVAL_S
    value = float(sample)
    if not 0.0001 <= value <= 10.0:
        raise ValueError(f"sampling interval must be between 0.1 ms and 10 s, got {value} s")
    return value


def _marker_codes() -> frozenset[Any]:
    """Code objects of agentprof's wrappers that hold the open tool or parse span in a local (``started`` on
    the hot path, ``scope`` on the general one)."""
    import importlib

    hot_tool, parse, tool = (importlib.import_module(f"agentprof.capture.{m}") for m in ("hot_tool", "parse", "tool"))
    codes = {parse.recorded_loads.__code__}
    for outer in (hot_tool.sync_tool, hot_tool.async_tool, tool._make):
        for const in outer.__code__.co_consts:
            if hasattr(const, "co_code") and const.co_name in ("wrapper", "general", "async_general"):
                codes.add(const)
    return frozenset(codes)


def _span_id_of(frame: Any) -> str | None:
    """The span id (hex) of the span a marker frame's scope holds, if it has started."""
    local = frame.f_locals  # agentprof's own wrapper: its locals are agentprof objects, no user values read
    for key in ("started", "scope"):
        scope = local.get(key)
        if type(scope) is Scope:
            return f"{scope.span.get_span_context().span_id:016x}"
    return None


def _thread_named(ident: int) -> Any:
    """The ``threading.Thread`` of an ident, read without taking threading's lock (a signal handler may run
    while the interrupted thread holds it)."""
    active = getattr(threading, "_active", None)
    if isinstance(active, dict):
        return active.get(ident)
    return next((t for t in threading.enumerate() if t.ident == ident), None)


def signals_usable() -> bool:
    """Whether the timer-signal sampler can be installed here: POSIX ``setitimer``, called from the main thread,
    no ``SIGPROF`` handler or ``ITIMER_PROF`` timer of the agent's (it is not replaced: the thread sampler is used)."""
    if not hasattr(signal, "setitimer") or not hasattr(signal, "SIGPROF"):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        return signal.getsignal(signal.SIGPROF) in (signal.SIG_DFL, None) and \
            signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    except (OSError, ValueError):
        return False


class Sampler:
    """Samples every thread of the process into ``sess``'s trace file until :meth:`stop`.

    Two ways to tick (docs/PERFORMANCE.md, Sampling, has the measurements that chose them):

    - ``signal`` (the default where usable, :func:`signals_usable`): ``setitimer(ITIMER_PROF)`` raises
      ``SIGPROF`` every ``interval`` of the process's CPU time, and the Python handler takes the tick on the main
      thread between two bytecodes, so no interpreter-lock handover is forced on the agent. A watchdog thread
      wakes every ``WATCH_EVERY`` intervals to write the batch and, when the signal has gone quiet (the process
      waits, or the main thread is blocked while another thread works), ticks at the interval itself until it
      ticks again. The handler takes no lock that can be held by the thread it interrupts (the batch lock is
      tried, never waited for; threads are looked up without threading's lock) and writes nothing: the
      watchdog thread writes.
    - ``thread``: a daemon thread ticks every ``interval`` (elsewhere: no ``setitimer``, started from a thread
      other than the main one, or a ``SIGPROF`` handler or profiling timer of the agent's already installed).
    """

    def __init__(self, sess: Any, interval_s: float, mode: str = "auto") -> None:
        self.sess = sess
        self.interval_s = interval_s
        self.mode = mode
        self._lock = threading.Lock()  # the batch: tried by the signal handler, taken by the watchdog/flush
        self._last_signal = 0  # perf_counter ns of the last tick the signal handler took
        self._stopped = False
        self._error: BaseException | None = None
        self._old_handler: Any = None
        self.session_thread = threading.get_ident()
        self._stop = threading.Event()
        self._markers = frozenset(id(c) for c in _marker_codes())  # ids: a code object's hash is not cached
        self._frames: dict[int, int] = {}  # id(code) -> frame id; the code objects are kept in _codes
        self._codes: list[Any] = []
        self._nodes: dict[tuple[int, int], int] = {}
        self._threads: dict[int, int] = {}
        self._clocks: dict[int, list[Any]] = {}  # ident -> [ThreadClock, last CPU ns, last run-queue wait ns]
        self._skip: set[int] = set()
        self._natives: list[int] = []  # native ids of the sampled threads (their child processes are sampled)
        self._children: dict[int, list[Any]] = {}  # pid -> [clock, last CPU, last wait, thread, node, children fd]
        self._buf = new_buffer()
        self._children_fds: dict[int, int] = {}  # native thread id -> fd of its /proc children list
        self._new_frames: list[list[Any]] = []
        self._new_nodes: list[list[int]] = []
        self._new_threads: list[list[Any]] = []
        self._reset_batch()
        self.samples = 0
        self.ticks = 0
        self.busy_ns = 0
        self.paused = False  # see pause(): benchmarks measure its cost in one session (scripts/bench_sampling.py)
        self._resume = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentprof-sampler", daemon=True)

    def start(self) -> Sampler:
        self._own = None
        if self.mode == "auto":
            self.mode = "signal" if signals_usable() else "thread"
        if self.mode == "signal":
            try:
                self._old_handler = signal.signal(signal.SIGPROF, self._on_signal)
                signal.siginterrupt(signal.SIGPROF, False)  # SA_RESTART: the agent's system calls never see EINTR
                self._last_signal = _perf()
                exec_guard.install(self.interval_s)  # an agent that exec()s must not hand our timer on
                self._arm(True)
                self._thread = threading.Thread(target=self._watch, name="agentprof-sampler", daemon=True)
                self._thread.start()
                return self
            except (OSError, ValueError) as e:  # not installable after all: the thread sampler
                internal_error("installing the SIGPROF sampler", e)
                self.mode = "thread"
        # A thread holding the GIL lets the sampler in only at the next forced switch (every 5 ms by default)
        # or when it blocks: with a long switch interval the samples would pile up at I/O calls. While
        # sampling, the switch interval is at most a fifth of the sampling interval (restored at stop).
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, max(self.interval_s / 5, 0.0002)))
        self._thread.start()
        return self

    def _reset_batch(self) -> None:
        self._t: list[int] = []
        self._th: list[int] = []
        self._st: list[int] = []
        self._cpu: list[int] = []
        self._rq: list[int] = []
        self._spans: list[list[Any]] = []

    # --- sampling ----------------------------------------------------------------------------------------
    def _run(self) -> None:
        self._own = threading.get_ident()
        last_flush = time.monotonic()
        wait = self._stop.wait
        interval = self.interval_s
        while not wait(interval):
            if self.paused:  # blocks without waking until resumed (a paused sampler costs nothing)
                self._resume.wait()
                continue
            try:
                t0 = _cpu()  # the sampler's own CPU: waits for the interpreter lock are not its cost
                with self._lock:
                    self._tick()
                self.busy_ns += _cpu() - t0
                if len(self._t) >= FLUSH_SAMPLES or time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    self._flush()
                    last_flush = time.monotonic()
            except Exception as e:  # never let the sampler take the agent down; stop sampling instead
                internal_error("sampling stacks", e)
                return

    # --- signal mode ---------------------------------------------------------------------------------------
    def _arm(self, on: bool) -> None:
        """Start or stop the profiling timer (any thread may; only the handler needs the main thread)."""
        value = self.interval_s if on else 0.0
        signal.setitimer(signal.ITIMER_PROF, value, value)

    def _on_signal(self, signum: int, frame: Any) -> None:
        """SIGPROF: one tick on the main thread, unless paused, stopped, or the batch is busy (a sample skipped)."""
        if self.paused or self._stopped or self._error is not None:
            return
        if not self._lock.acquire(False):  # the watchdog flushes or ticks: never wait in a handler
            return
        try:
            t0 = _cpu()
            self._tick(frame)
            self.busy_ns += _cpu() - t0
            self._last_signal = _perf()
        except Exception as e:  # reported and sampling stopped by the watchdog (no logging in a handler)
            self._error = e
        finally:
            self._lock.release()

    def _watch(self) -> None:
        """Signal mode's thread: writes the batch about once a second and ticks while the signal is quiet."""
        self._own = threading.get_ident()
        last_flush = time.monotonic()
        interval = self.interval_s
        quiet_ns = int(2 * interval * 1e9)
        period = interval * WATCH_EVERY
        while not self._stop.wait(period):
            if self.paused:
                self._resume.wait()
                continue
            try:
                if self._error is not None:
                    self._arm(False)
                    raise self._error
                if _perf() - self._last_signal > quiet_ns:  # no CPU use, or the main thread cannot run handlers
                    t0 = _cpu()
                    with self._lock:
                        self._tick()
                    self.busy_ns += _cpu() - t0
                    period = interval
                else:
                    period = interval * WATCH_EVERY
                if len(self._t) >= FLUSH_SAMPLES or time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    self._flush()
                    last_flush = time.monotonic()
            except Exception as e:  # never let the sampler take the agent down; stop sampling instead
                self._stopped = True
                internal_error("sampling stacks", e)
                return

    def _thread_index(self, ident: int) -> int | None:
        idx = self._threads.get(ident)
        if idx is not None or ident in self._skip:
            return idx
        thread = _thread_named(ident)
        name = thread.name if thread is not None else ""
        if ident == self._own or name.startswith(_OWN_THREADS):
            self._skip.add(ident)
            return None
        idx = self._threads[ident] = len(self._threads)
        self._new_threads.append([idx, ident, name, ident == self.session_thread])
        native = getattr(thread, "native_id", None)
        if native is not None:
            self._natives.append(native)
        clock = ThreadClock(native, ident)
        now = clock.read() or (0, 0)
        self._clocks[ident] = [clock, now[0], now[1]]
        return idx

    def _tick(self, interrupted: Any = None) -> None:
        """One sample of every thread; ``interrupted``: the frame a signal handler interrupted (the thread's
        stack without the handler's own frames)."""
        now = _time_ns()
        frames = sys._current_frames()
        if interrupted is not None:
            frames[threading.get_ident()] = interrupted
        get_frame, get_node, markers, own = self._frames.get, self._nodes.get, self._markers, _OWN_CODES
        clocks = self._clocks
        for ident, frame in frames.items():
            idx = self._thread_index(ident)
            if idx is None:
                continue
            state = clocks[ident]
            now_cpu = state[0].read()
            if now_cpu is None:
                cpu = rq = 0
            else:
                cpu, rq = now_cpu[0] - state[1], now_cpu[1] - state[2]
                state[1], state[2] = now_cpu
            if cpu <= 0 and rq <= 0 and ident != self.session_thread:
                continue  # an idle helper thread: nothing to attribute
            codes = []
            span = None
            f = frame
            while f is not None and len(codes) < MAX_DEPTH:
                code = f.f_code
                if id(code) in own:  # the signal handler's frames on the thread it interrupted: dropped
                    codes.clear()
                    span = None
                    f = f.f_back
                    continue
                if span is None and id(code) in markers:
                    span = _span_id_of(f)
                codes.append(code)
                f = f.f_back
            node = -1
            for code in reversed(codes):
                fid = get_frame(id(code))
                if fid is None:
                    fid = self._frames[id(code)] = len(self._frames)
                    self._codes.append(code)  # keeps the id from being reused
                    self._new_frames.append([fid, getattr(code, "co_qualname", code.co_name), code.co_filename])
                key = (node, fid)
                nid = get_node(key)
                if nid is None:
                    nid = self._nodes[key] = len(self._nodes)
                    self._new_nodes.append([nid, node, fid])
                node = nid
            if span is not None:
                self._spans.append([len(self._t), span])
            self._t.append(now)
            self._th.append(idx)
            self._st.append(node)
            self._cpu.append(cpu)
            self._rq.append(rq)
        del frames
        if self.ticks % CHILD_EVERY == 0:
            self._tick_children(now)
        self.ticks += 1

    def _tick_children(self, now: int) -> None:
        """Child processes of the sampled threads (and their children): CPU and run-queue wait since the last
        look, as samples of a pseudo-thread per child with one frame naming the program. A tool that waits for
        a child is CPU-bound when the child is, and only the child's wait for a CPU shows it."""
        seen: set[int] = set()
        fds = self._children_fds
        for n in self._natives:
            if n not in fds:
                try:
                    fds[n] = os.open(f"/proc/self/task/{n}/children", os.O_RDONLY)
                except OSError:
                    fds[n] = -1
        parents = [fd for fd in fds.values() if fd >= 0]
        for depth in range(2):
            found: list[int] = []
            for fd in parents:
                try:
                    found += [int(x) for x in pread_all(fd, self._buf).split()]
                except (OSError, ValueError):
                    continue
            seen.update(found)
            if depth == 0:
                parents = [self._children[pid][5] for pid in found if pid in self._children
                           and self._children[pid][5] >= 0]
        for pid in list(self._children):
            if pid not in seen:
                state = self._children.pop(pid)
                state[0].close()
                if state[5] >= 0:
                    os.close(state[5])
        for pid in seen:
            state = self._children.get(pid)
            if state is None:
                try:
                    with open(f"/proc/{pid}/comm", "rb") as fh:
                        comm = fh.read().decode("utf-8", "replace").strip()
                except OSError:
                    continue
                clock = ThreadClock(None)
                try:
                    clock.fd = os.open(f"/proc/{pid}/schedstat", os.O_RDONLY)
                except OSError:
                    continue
                idx = self._threads[-pid] = len(self._threads)  # keyed by -pid: Python thread idents are > 0
                self._new_threads.append([idx, pid, f"child {comm}", False, "child"])
                fid = self._frames.get(-pid)
                if fid is None:
                    fid = self._frames[-pid] = len(self._frames)
                    self._new_frames.append([fid, f"<child process {comm}>", comm])
                key = (-1, fid)
                nid = self._nodes.get(key)
                if nid is None:
                    nid = self._nodes[key] = len(self._nodes)
                    self._new_nodes.append([nid, -1, fid])
                try:
                    kids_fd = os.open(f"/proc/{pid}/task/{pid}/children", os.O_RDONLY)
                except OSError:
                    kids_fd = -1
                state = self._children[pid] = [clock, 0, 0, idx, nid, kids_fd]
            got = state[0].read()
            if got is None:
                continue
            cpu, rq = got[0] - state[1], got[1] - state[2]
            state[1], state[2] = got
            if cpu <= 0 and rq <= 0:
                continue
            self._t.append(now)
            self._th.append(state[3])
            self._st.append(state[4])
            self._cpu.append(cpu)
            self._rq.append(rq)

    def pause(self, paused: bool) -> None:
        """Stop taking samples (the thread sleeps until resumed) or take them again."""
        self.paused = paused
        if paused:
            self._resume.clear()
        else:
            self._resume.set()
        if self.mode == "signal" and not self._stopped:
            self._arm(not paused)
            self._last_signal = _perf()

    # --- writing -----------------------------------------------------------------------------------------
    def _flush(self) -> None:
        with self._lock:  # the batch is taken whole; the signal handler skips a tick rather than wait for it
            if not self._t and not self._new_frames:
                return
            t0 = self._t[0] if self._t else 0
            record = {"record": "samples", "session_id": self.sess.id, "interval_ns": int(self.interval_s * 1e9),
                      "frames": self._new_frames, "stacks": self._new_nodes, "threads": self._new_threads,
                      "t0": t0, "dt": [t - t0 for t in self._t], "th": self._th, "st": self._st,
                      "cpu": self._cpu, "rq": self._rq, "spans": self._spans}
            self.samples += len(self._t)
            self._new_frames, self._new_nodes, self._new_threads = [], [], []
            self._reset_batch()
        exporter = self.sess.exporter
        if exporter is not None:
            exporter.write_record(record)

    def stop(self) -> None:
        """Stop sampling and write what is left (called by the session before its final meta record)."""
        self._stop.set()
        self._resume.set()
        if self.mode == "signal":
            self._stopped = True
            self._restore_signal()
        else:
            sys.setswitchinterval(self._switch)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        try:
            self._flush()
        except Exception as e:
            internal_error("writing samples", e)
        for state in [*self._clocks.values(), *self._children.values()]:
            state[0].close()
        for fd in [*self._children_fds.values(), *(c[5] for c in self._children.values())]:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.sess.meta.extra["sampling"] = {"interval_ns": int(self.interval_s * 1e9), "samples": self.samples,
                                            "ticks": self.ticks, "sampler_cpu_ns": self.busy_ns,
                                            "mode": self.mode, "sampler": (
                                                "agentprof SIGPROF sampler (sys._current_frames)"
                                                if self.mode == "signal" else
                                                "agentprof thread sampler (sys._current_frames)")}
        self.sess.add_overhead(self.busy_ns)

    def _restore_signal(self) -> None:
        """Disarm the timer and put the previous handler back, if the handler is still ours (an agent that
        installed its own since keeps it, and its timer). From another thread the handler stays, inert."""
        try:
            exec_guard.remove()
            if signal.getsignal(signal.SIGPROF) != self._on_signal:
                if abs(signal.getitimer(signal.ITIMER_PROF)[1] - self.interval_s) < 1e-6:
                    self._arm(False)  # our timer, into the agent's handler: stopped
                return
            self._arm(False)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGPROF, self._old_handler if self._old_handler is not None else signal.SIG_DFL)
        except (OSError, ValueError) as e:
            internal_error("removing the SIGPROF sampler", e)


_OWN_CODES = frozenset(id(f.__code__) for f in (Sampler._on_signal, Sampler._tick, Sampler._flush))
"""The sampler's own functions: a thread seen inside them (the main thread in the handler) is sampled without them."""
