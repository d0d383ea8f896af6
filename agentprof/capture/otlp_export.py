"""OTLP export that can never slow the agent: ended spans go into a bounded queue in O(1), and one daemon
thread of agentprof's own batches them to the exporter. Flushing waits on that thread for at most the time
given and never exports on the caller's thread (the SDK's ``BatchSpanProcessor.force_flush`` exports on the
caller's thread and can block for the exporter's whole timeout and retries, however short the flush timeout).

An endpoint that refuses, hangs or answers with errors costs the agent nothing while it runs and at most
:data:`FLUSH_CAP_S` when a profile ends (a refusal ends the wait as soon as it is seen); once an export has
failed, later flushes do not wait at all until one succeeds again. The exporter's own log lines on that thread
are kept off the agent's stderr: a profile that ended with spans not delivered gets one :class:`CaptureWarning`
naming the endpoint, the cause and how many spans the receiver lacks.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import os
import threading
import time
import weakref
from collections import deque
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agentprof.capture.failsafe import warn_once
from agentprof.capture.otlp_semconv import for_receivers

MAX_QUEUE = 20_000
"""Spans held for export at most; past that new spans are dropped (counted, one warning)."""
BATCH = 512
"""Spans per export request."""
DELAY_S = 0.25
"""How long the export thread lets spans gather before sending a partial batch."""
BACKOFF_S = (1.0, 30.0)
"""After a failed export the thread pauses (doubling from the first figure up to the second) before trying
again, so a dead endpoint does not keep it busy (it shares the interpreter with the agent)."""
DEFAULT_FLUSH_CAP_S = 0.75


def _flush_cap(env: str | None) -> float:
    try:
        v = float(env) if env else DEFAULT_FLUSH_CAP_S
    except ValueError:
        return DEFAULT_FLUSH_CAP_S
    return min(max(v, 0.0), 60.0) if v == v else DEFAULT_FLUSH_CAP_S


FLUSH_CAP_S = _flush_cap(os.environ.get("AGENTPROF_OTLP_FLUSH_S"))
"""The longest a profile's end waits for pending spans to reach the endpoint (a run exits at most this late):
0.75 s, or ``AGENTPROF_OTLP_FLUSH_S`` seconds for a receiver known to be slow but working."""
_LOGGERS = ("opentelemetry.exporter.otlp", "opentelemetry.sdk.trace.export", "urllib3.connectionpool")


class _ExportThreadLogs(logging.Filter):
    """Drops the exporter's log records emitted on agentprof's export thread, warning once instead."""

    def __init__(self, owner: BackgroundExportProcessor) -> None:
        super().__init__()
        self.owner = owner

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.current_thread() is not self.owner.thread:
            return True  # the application's own exporters log as usual
        if record.levelno >= logging.WARNING:
            self.owner.failed(_reason(record.getMessage()))
        return False


def _reason(message: str) -> str:
    """A short cause from the exporter's log message (its full text stays off the agent's stderr)."""
    low = message.lower()
    for needle, why in (("refused", "connection refused"), ("timed out", "timed out"), ("timeout", "timed out"),
                        ("code: ", None), ("transient error ", None), ("max retries", "cannot connect")):
        if needle in low:
            if why is None and needle == "code: ":
                return "HTTP " + message[low.index("code: ") + 6:].split(",")[0].strip()
            if why is None:  # older SDKs: "Transient error <HTTP reason> encountered while exporting ..."
                return "HTTP " + message[low.index(needle) + len(needle):].split(" encountered")[0].strip()[:40]
            return why
    return message.splitlines()[0][:80] if message else "error"


class BackgroundExportProcessor(SpanProcessor):
    """A span processor that queues spans for ``exporter`` and exports them on its own daemon thread."""

    def __init__(self, exporter: SpanExporter, endpoint: str = "") -> None:
        self.exporter = exporter
        self.endpoint = endpoint
        self.queue: deque[ReadableSpan] = deque()
        self.dropped = 0
        self.lost = 0
        """Spans that will not reach the endpoint: failed batches, queue overflow, left behind at a flush cap."""
        self._reported = 0
        self._inflight = 0
        self._inflight_counted = False
        self.why = ""
        self.healthy = True
        """False after a failed export until one succeeds: flushes then return at once."""
        self.exporting = False
        self._pause = 0.0
        self._cond = threading.Condition()
        self._flush_requests = 0
        self._stop = False
        self.thread = threading.Thread(target=contextvars.Context().run, args=(self._loop,),
                                       name="agentprof-otlp-export", daemon=True)
        self._filter = _ExportThreadLogs(self)
        self._filtered: list[logging.Logger] = []
        self._quiet_exporter_logs()
        self.thread.start()
        ref = weakref.ref(self)
        # at exit, tell what was lost since the first report (no waiting: each profile's end waited already)
        atexit.register(lambda: (lambda p: p.report_lost(final=True) if p is not None and not p._stop else None)(ref()))
        if hasattr(os, "register_at_fork"):  # a forked child gets its own export thread (the parent's is gone)
            os.register_at_fork(after_in_child=lambda: (lambda p: p._after_fork() if p is not None else None)(ref()))

    def _after_fork(self) -> None:
        """In a forked child: fresh lock state, nothing queued (the parent exports its own), a new thread."""
        self.queue = deque()
        self.exporting = False
        self._flush_requests = 0
        self._cond = threading.Condition()
        if not self._stop:
            self.thread = threading.Thread(target=contextvars.Context().run, args=(self._loop,),
                                           name="agentprof-otlp-export", daemon=True)
            self.thread.start()

    # --- the agent's side: O(1), never blocks on the network ------------------------------------------------
    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self._stop:
            return
        q = self.queue
        if len(q) >= MAX_QUEUE:
            self.dropped += 1
            self.lost += 1
            self.why = self.why or f"more than {MAX_QUEUE} spans waiting"
            return
        q.append(span)
        if len(q) >= BATCH:
            with self._cond:
                self._cond.notify()

    def force_flush(self, timeout_millis: int = int(FLUSH_CAP_S * 1000)) -> bool:
        """Wait up to ``timeout_millis`` for the export thread to send what is queued now; at once (False)
        when the endpoint has been failing. Never exports on this thread."""
        if not self.healthy:
            return not self.queue and not self.exporting
        deadline = time.monotonic() + max(timeout_millis, 0) / 1000
        with self._cond:
            self._flush_requests += 1
            self._cond.notify()
            while (self.queue or self.exporting) and self.healthy and not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self._flush_requests -= 1
            done = not self.queue and not self.exporting
        if not done and self.healthy:  # slow or hanging: later flushes (the next profile's end, exit) do not wait
            self.failed(f"no answer within {timeout_millis / 1000:g} s")
        return done

    def report_lost(self, final: bool = False) -> int:
        """After a flush (a profile's end): give up on what is still queued or in flight and tell the user how
        many spans the endpoint has not received: at the first profile end with losses, then once more at the
        end (``final``, the process exiting) for all lost since, so many short profiles do not each warn.
        Returns the number not yet told."""
        with self._cond:
            if self.healthy and not self.queue and not self.exporting and self.lost == self._reported:
                return 0
            left = len(self.queue)
            self.queue.clear()
            self.lost += left
            if self.exporting and not self._inflight_counted:
                self.lost += self._inflight
                self._inflight_counted = True
            n = self.lost - self._reported
            if not n or (self._reported and not final):
                return n
            again, self._reported = self._reported > 0, self.lost
        warn_once(f"otlp:lost:{self.endpoint}:{self.lost}",
                  f"OTLP export to {self.endpoint or 'the endpoint'} failed ({self.why or 'error'}): {n:,} "
                  f"{'more ' if again else ''}span{'s' if n != 1 else ''} not delivered; the agent was not slowed "
                  "and the trace file has every span", stacklevel=99)
        return n

    def shutdown(self, timeout_millis: int = 1000) -> None:
        """Flush for at most ``timeout_millis`` (not at all when failing), report what was lost, then stop the
        thread."""
        self.force_flush(min(timeout_millis, int(FLUSH_CAP_S * 1000)))
        self.report_lost(final=True)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if not self.exporting:
            try:
                self.exporter.shutdown()
            except Exception:
                pass
        for lg in self._filtered:
            lg.removeFilter(self._filter)

    # --- the export thread ------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._stop and (not self.queue or (len(self.queue) < BATCH and not self._flush_requests)):
                    self._cond.wait(DELAY_S)
                if self._stop:
                    return
                if not self.queue:
                    continue
                self.exporting = True
                batch = [self.queue.popleft() for _ in range(min(BATCH, len(self.queue)))]
                self._inflight, self._inflight_counted = len(batch), False
            ok = self._export(batch)
            with self._cond:
                self.exporting = False
                if not ok and not self._inflight_counted:
                    self.lost += len(batch)
                self._inflight, self._inflight_counted = 0, False
                if ok:
                    self.healthy, self._pause, self.why = True, 0.0, ""
                else:  # the batch is dropped (the file has it); wait before the next try
                    self._pause = min(max(self._pause * 2, BACKOFF_S[0]), BACKOFF_S[1])
                self._cond.notify_all()
                if not ok and not self._stop:
                    self._cond.wait(self._pause)

    def _export(self, batch: list[ReadableSpan]) -> bool:
        try:
            result = self.exporter.export([for_receivers(s) for s in batch])
        except Exception as e:
            self.failed(_reason(f"{type(e).__name__}: {e}"))  # older SDKs raise where newer ones log
            return False
        if result is not SpanExportResult.SUCCESS:
            self.failed("the endpoint did not accept the spans")
            return False
        return True

    def failed(self, why: str) -> None:
        """An export failed: flushes stop waiting at once (a waiting one is woken); :meth:`report_lost` tells the
        user at the profile's end."""
        with self._cond:
            if self.healthy or not self.why:  # the first cause since the last success is the one to tell
                self.why = why
            self.healthy = False
            self._cond.notify_all()

    def _quiet_exporter_logs(self) -> None:
        names = [n for n in list(logging.Logger.manager.loggerDict) if n.startswith(_LOGGERS)] + list(_LOGGERS)
        for name in dict.fromkeys(names):
            lg = logging.getLogger(name)
            lg.addFilter(self._filter)
            self._filtered.append(lg)
