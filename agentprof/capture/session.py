"""One profiled agent run: a session, its root ``invoke_agent`` span and its trace file.

The active session lives in a context variable, so it follows the agent into asyncio tasks and (through
:mod:`agentprof.capture.context`) into threads. A profile started inside another becomes a sub-session: its
spans go to its own file and to every enclosing session's file (linked by ``agentprof.session.parent_id``).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentprof import __version__
from agentprof import semconv as sc
from agentprof.capture import fork, provider
from agentprof.capture.error_type import error_type
from agentprof.capture.exporter import JsonlSpanExporter, encode_span
from agentprof.capture.failsafe import internal_error, warn_once
from agentprof.trace.meta import Diagnostic, TraceMeta
from agentprof.trace.writer import FORMAT_NAME, FORMAT_VERSION, JsonlTraceWriter

_ACTIVE: contextvars.ContextVar[Session | None] = contextvars.ContextVar("agentprof_session", default=None)
ACTIVE_SESSION = _ACTIVE
"""The context variable holding the session of this context (hot paths read it directly; see :func:`current`)."""
_process_session: Session | None = None
"""Session of ``agentprof run``: used by threads whose context carries no session."""
_live: set[Session] = set()
"""Sessions started and not yet finished in this process (their hot-path state follows pipeline changes)."""

BLOCK_SIZE = 64
fork.register()


class _Hooks:
    """What a starting session installs in the process, supplied from above (:mod:`agentprof.capture.hooks`,
    which the capture package imports first): the session core imports none of the hook modules."""

    @staticmethod
    def patches(sess: Session) -> list[Any]:
        """The reference-counted patches this session holds while it runs (acquired on start)."""
        return []

    @staticmethod
    def sampler(sess: Session, interval: float) -> Any:
        """A started stack sampler for the session (``stop()`` on finish)."""
        raise RuntimeError("no stack sampler installed")


HOOKS = _Hooks()
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def current() -> Session | None:
    """The session recording in this context (``None`` when no profile is active)."""
    s = _ACTIVE.get()
    if s is not None and s.active:
        return s
    s = _process_session
    return s if s is not None and s.active else None


def parent_context(sess: Session) -> otel_context.Context | None:
    """Context new spans of ``sess`` start from: the current one, or the session root for threads that
    reached ``sess`` only through the process-wide fallback."""
    return None if _ACTIVE.get() is sess else sess.root_context


def trace_path(out: str | os.PathLike[str], name: str, when: _dt.datetime) -> Path:
    """``<out>/<name>-<UTC timestamp>.jsonl`` (the name made file-system safe)."""
    safe = _SAFE.sub("_", name).strip("._") or "agent"
    return Path(out) / f"{safe[:80]}-{when.strftime('%Y%m%dT%H%M%SZ')}.jsonl"


def _claim(path: Path) -> Path:
    """Create ``path`` exclusively (adding ``-2``, ``-3``, … when a run in the same second took it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = path, 1
    while True:
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return candidate
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")


class Session:
    """State of one profiled run. Created and finished by :class:`agentprof.capture.profile.profile`."""

    def __init__(self, name: str, out: str | os.PathLike[str] | None = "traces/", *, path: str | None = None,
                 capture_content: bool = False, instrument_json: bool = False,
                 instrument_subprocess: bool = False, sample: float | None = None) -> None:
        self.id = uuid.uuid4().hex
        self.name = name
        self.capture_content = capture_content
        self.instrument_json = instrument_json
        self.instrument_subprocess = instrument_subprocess
        self.active = False
        self.parent: Session | None = None
        self.path: Path | None = None
        self.error: str | None = None
        self.exporter: JsonlSpanExporter | None = None
        self.sinks: tuple[JsonlSpanExporter, ...] = ()
        self.root: Any = None
        self.root_span_id = 0
        self.root_context: otel_context.Context | None = None
        self.diagnostics: list[Diagnostic] = []
        self.pending: set[Any] = set()  # model calls and subprocess spans not ended yet
        self.general_spans = 0  # spans written through write_span
        self.hot_spans = 0  # spans written by the tool-call hot path (capture.hot_tool)
        self.hot: JsonlSpanExporter | None = None
        """This session's only file while spans may be written to it directly (see :meth:`refresh_hot`)."""
        self.overhead_ns = 0
        self.background_cpu_ns = 0  # agentprof's threads of its own (the prompt fingerprint): CPU, off the agent's path
        self._lock = threading.Lock()
        self._out = out
        self._explicit_path = path
        self._tokens: tuple[Any, Any] | None = None
        self._patches: list[Any] = []
        self._root_ending = False
        self.pid = os.getpid()
        self.forks = 0  # children forked by this process while the session was live
        self.forked_child = False  # this object is a forked child's copy of the parent's session
        self.meta = TraceMeta(source_format="agentprof", block_size=BLOCK_SIZE, tool_version=__version__, name=name)
        self.exact_models: set[str] = set()
        self.inexact_models: set[str] = set()
        self.sample_interval = sample  # seconds between stack samples (None: no sampling; capture.sampler)
        self.sampler: Any = None
        self._thread_cpu0: tuple[int, int, int | None] | None = None  # (thread, CPU ns, run-queue ns) at start
        self.runq: Any = None
        """Reads the calling thread's run-queue wait (``schedstat.thread_runq_ns``) where spans record theirs:
        Linux with schedstat readable and no stack sampler (whose samples carry the wait); else None."""

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> Session:
        t0 = time.perf_counter_ns()
        outer = _ACTIVE.get()
        self.parent = outer if outer is not None and outer.active else None
        now = _dt.datetime.now(_dt.timezone.utc)
        self.meta.created = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        from agentprof.capture.fingerprint import predicted_tokenizer

        self.meta.tokenizer = predicted_tokenizer()
        self.pid = os.getpid()
        self.meta.extra.update({"session_id": self.id, "content_captured": self.capture_content, "pid": self.pid})
        self._open_file(now)
        self.sinks = ((self.exporter,) if self.exporter else ()) + (self.parent.sinks if self.parent else ())
        proc = provider.processor()
        proc.refresh_otlp()
        self._patches = HOOKS.patches(self)
        for p in self._patches:
            p.acquire()
        attrs: dict[str, Any] = {
            sc.KIND: "agent", sc.SESSION_ID: self.id, sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.AGENT_NAME: self.name, sc.SESSION_ROLE: "subagent" if self.parent else "main",
        }
        if self.parent:
            attrs[sc.PARENT_SESSION_ID] = self.parent.id
        provider.SINKS[self.id] = self.write_span
        self.root = provider.tracer().start_span(sc.agent_span_name(self.name), kind=SpanKind.INTERNAL,
                                                 attributes=attrs)
        self.root_span_id = self.root.get_span_context().span_id
        self.root_context = otel_trace.set_span_in_context(self.root)
        self.active = True
        self._tokens = (otel_context.attach(self.root_context), _ACTIVE.set(self))
        _live.add(self)
        for s in list(_live):  # this start may have turned OTLP export on or off for every session
            s.refresh_hot()
        self._thread_cpu0 = self._thread_times()
        if self.sample_interval and self.parent is None and self.exporter is not None:
            try:
                self.sampler = HOOKS.sampler(self, self.sample_interval)
            except Exception as e:
                internal_error("starting the stack sampler", e)
        self.runq = self._span_runq()
        self.add_overhead(time.perf_counter_ns() - t0)
        return self

    def _open_file(self, now: _dt.datetime) -> None:
        if self._out is None and self._explicit_path is None:
            return
        try:
            if self._explicit_path is not None:
                self.path = Path(self._explicit_path)
                self.path.parent.mkdir(parents=True, exist_ok=True)
            else:
                self.path = _claim(trace_path(self._out, self.name, now))  # type: ignore[arg-type]
            self.exporter = JsonlSpanExporter(JsonlTraceWriter(self.path))
            self.exporter.write_record({"record": "meta", "format": FORMAT_NAME, "version": FORMAT_VERSION,
                                        **self.meta.to_dict()})
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
            where = self._explicit_path or self._out
            warn_once(f"open:{where}", f"cannot create a trace file in {where} ({self.error}); "
                                       "the agent runs unprofiled to disk")
            self.exporter = None
            self.path = None

    def finish(self, exc: BaseException | None = None) -> None:
        """End the session: wait briefly for pending model spans, end the root span, write the final meta."""
        if not self.active:
            return
        if os.getpid() != self.pid:  # a forked child leaving the profile: the parent process owns the run
            self.active = False
            self.hot = None
            if self.forked_child and self.exporter is not None:
                self.exporter.write_record({"record": "fork", "pid": os.getpid(), "parent_pid": self.pid,
                                            "session_id": self.id, "spans": self.spans})
            return
        t0 = time.perf_counter_ns()
        self.hot = None
        _live.discard(self)
        try:
            deadline = time.monotonic() + 10.0
            for item in list(self.pending):
                item.close_at_session_end(deadline)
            if exc is not None and not _is_clean_exit(exc):
                self.root.set_status(Status(StatusCode.ERROR))
                self.root.set_attribute(sc.ERROR_TYPE, error_type(exc))
        except Exception as e:
            internal_error("finishing pending spans", e)
        self._reset_context()
        self._root_ending = True
        self._note_session_cpu()
        if self.sampler is not None:
            self.sampler.stop()
        try:
            self.root.end()
        except Exception as e:
            internal_error("ending the agent span", e)
        self.active = False
        provider.SINKS.pop(self.id, None)
        for p in reversed(self._patches):
            try:
                p.release()
            except Exception as e:
                internal_error("removing instrumentation", e)
        provider.processor().force_flush_otlp()
        self.add_overhead(time.perf_counter_ns() - t0)
        self._write_final_meta()

    def discard(self) -> None:
        """Finish and remove the trace file: the program this session was to record never ran."""
        path = self.path
        self.finish()
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()

    def _note_session_cpu(self) -> None:
        """Thread CPU of the thread that started and finishes the run, on the root span (``agentprof.cpu_ns``):
        with the CPU of the spans under it, what the agent's own loop used between them."""
        start, end = self._thread_cpu0, self._thread_times()
        if start is not None and end is not None and start[0] == end[0]:
            try:
                self.root.set_attribute(sc.CPU_NS, end[1] - start[1])
                if end[2] is not None and start[2] is not None:
                    self.root.set_attribute(sc.RUNQ_NS, end[2] - start[2])
            except Exception as e:
                internal_error("recording the run's CPU time", e)

    def _span_runq(self) -> Any:
        """:attr:`runq`'s reader, or None (no schedstat, or a sampler on this run or the one it is part of)."""
        top = self
        while top.parent is not None:
            top = top.parent
        if top.sampler is not None or (top is not self and top.runq is None):
            return None
        from agentprof.capture.schedstat import thread_runq_ns

        return thread_runq_ns if self._thread_cpu0 is not None and self._thread_cpu0[2] is not None else None

    @staticmethod
    def _thread_times() -> tuple[int, int, int | None]:
        """(thread ident, thread CPU ns, run-queue wait ns or None) of the calling thread."""
        from agentprof.capture.schedstat import current_thread_clock

        clock = current_thread_clock()
        got = clock.read() if clock.fd >= 0 else None
        clock.close()
        if got is not None:
            return threading.get_ident(), got[0], got[1]
        return threading.get_ident(), time.thread_time_ns(), None

    def _reset_context(self) -> None:
        if self._tokens is None:
            return
        ctx_token, var_token = self._tokens
        self._tokens = None
        try:
            _ACTIVE.reset(var_token)
            otel_context.detach(ctx_token)
        except Exception:  # finished in another context than it started in
            _ACTIVE.set(self.parent)

    def _write_final_meta(self) -> None:
        if self.exporter is None:
            return
        self.meta.capture_overhead_ns = self.overhead_ns
        self.meta.capture_background_cpu_ns = self.background_cpu_ns
        self.meta.extra["spans"] = self.spans
        if self.forks:
            self.meta.extra["forks"] = self.forks
        self.meta.extra["ended"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")
        rec = {"record": "meta", **self.meta.to_dict()}
        if self.diagnostics:
            rec["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        self.exporter.write_record(rec)
        self.exporter.writer.close()

    @property
    def spans(self) -> int:
        """Spans of this session written so far (to its own file and enclosing sessions' files)."""
        return self.general_spans + self.hot_spans

    def after_fork_in_child(self) -> None:
        """This process is a forked child: fresh lock, its own span counts, none of the parent's model calls
        to wait for (see :mod:`agentprof.capture.fork` for where its spans go)."""
        self._lock = threading.Lock()
        self.pending = set()
        self.general_spans = self.hot_spans = self.overhead_ns = self.background_cpu_ns = self.forks = 0
        self.forked_child = True

    def refresh_hot(self) -> None:
        """Let the tool-call hot path write this session's spans directly while that gives what the span
        processor would do: one file and nothing else to send spans to (no enclosing session, no OTLP), no
        content captured, a file that has not failed, and the lean start path available."""
        ex = self.exporter
        ok = (self.active and not self._root_ending and not self.capture_content and ex is not None
              and not ex.failed and self.sinks == (ex,) and provider.hot_ready())
        self.hot = ex if ok else None

    # --- writing ----------------------------------------------------------------------------------------
    def write_span(self, span: ReadableSpan) -> None:
        """Write an ended span to this session's file and the files of enclosing sessions."""
        line = encode_span(span)
        sinks = self.sinks
        if len(sinks) == 1 and not self._root_ending:  # the usual case: one file, not the root span
            sinks[0].write_line(line)
        else:
            own = self.exporter
            for sink in sinks:
                if self._root_ending and sink is own and span.parent is not None \
                        and span.context.span_id == self.root_span_id:
                    # the root of its own file (its OTel parent, an enclosing session's or the application's own
                    # span, is not in this file); enclosing sessions' files keep the real parent
                    sink.write_line(encode_span(span, detach_parent=True))
                else:
                    sink.write_line(line)
        with self._lock:
            self.general_spans += 1

    def write_update(self, trace_id: int, span_id: int, attributes: dict[str, Any]) -> None:
        """Attributes learned after a span was written (a model call's prompt fingerprint): one
        ``span_update`` line in every file the span went to; readers merge it into the span."""
        if self._root_ending:  # the session stopped waiting for it and has closed (or is closing) its files
            return
        from agentprof.capture.exporter import encode

        line = encode({"record": "span_update", "trace_id": f"{trace_id:032x}", "span_id": f"{span_id:016x}",
                       "attributes": attributes})
        for sink in self.sinks:
            sink.write_line(line)

    def note_tokenizer(self, name: str, model: str | None, exact: bool) -> None:
        """Record which tokenizer hashed the prompts (meta update written before the first hashed span)."""
        changed = name != self.meta.tokenizer
        key = model or ""
        with self._lock:
            if exact and key not in self.exact_models:
                self.exact_models.add(key)
            if not exact and key not in self.inexact_models:
                self.inexact_models.add(key)
                changed = True
            new_exact = bool(self.exact_models) and not self.inexact_models
            changed = changed or new_exact != self.meta.tokenizer_exact
            self.meta.tokenizer, self.meta.tokenizer_exact = name, new_exact
        if changed and self.exporter is not None:
            self.exporter.write_record({"record": "meta", "tokenizer": name, "tokenizer_exact": new_exact})

    def diagnose(self, kind: str, message: str, span_id: int | None = None) -> None:
        with self._lock:
            if len(self.diagnostics) < 1000:
                self.diagnostics.append(Diagnostic(kind, message, str(self.path) if self.path else None, None,
                                                   f"{span_id:016x}" if span_id else None))

    def add_overhead(self, ns: int) -> None:
        with self._lock:
            self.overhead_ns += ns

    def add_background_cpu(self, ns: int) -> None:
        """CPU time agentprof's own background thread spent for this session: it delays the agent only when
        no core is free (or while it holds the interpreter lock), so it is kept apart from the agent's path."""
        with self._lock:
            self.background_cpu_ns += ns


def _is_clean_exit(exc: BaseException) -> bool:
    return isinstance(exc, SystemExit) and exc.code in (None, 0)


def set_process_session(sess: Session | None) -> None:
    """Make ``sess`` the fallback for contexts without a session (``agentprof run``)."""
    global _process_session
    _process_session = sess
