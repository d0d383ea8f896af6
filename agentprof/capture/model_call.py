"""One recorded model call: a ``chat {model}`` span from request to last byte, whatever the provider.

The provider modules (:mod:`~agentprof.capture.openai_sdk`, :mod:`~agentprof.capture.anthropic_sdk`) create
a :class:`ModelCall` when an SDK method is called, and hand it the result: a response object (usage read at
once) or a stream (observed chunk by chunk as the agent iterates it; time to first chunk measured). The
prompt is fingerprinted on a background thread meanwhile. The span ends, and its line is written, as soon as
the response is in; if the fingerprint is still being computed then (the first call of a run loads the
tokenizer), it follows as a ``{"record": "span_update"}`` line the reader merges into the span, so a process
killed meanwhile loses at most the fingerprint, never the call. Nothing here may raise into the agent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.trace import SpanKind

from agentprof import semconv as sc
from agentprof.capture import fingerprint, provider, raw_response
from agentprof.capture.failsafe import internal_error, warn_once
from agentprof.capture.plain import given
from agentprof.capture.session import Session, current, parent_context
from agentprof.capture.spans import record_error, runq_since, runq_start, set_many
from agentprof.trace.usage import normalize_usage, to_mapping

_time_ns = time.time_ns
_perf = time.perf_counter_ns
_cpu = time.thread_time_ns
"""Capture overhead of a model call on the agent's thread is counted in thread CPU time. The fingerprint thread's
CPU is counted apart (``Session.background_cpu_ns``): it runs while the agent waits for the response, and costs
the agent wall time only when no core is free for it (or while it holds the interpreter lock)."""

# request fields each API's prompt is made of (shallow-copied when the call starts)
PROMPT_FIELDS = {
    "chat": ("messages", "tools"),
    "responses": ("instructions", "input", "tools"),
    "messages": ("system", "messages", "tools"),
}
# Responses API events sent before any output exists (they do not count as the first chunk)
_RESPONSES_PREAMBLE = frozenset({"response.created", "response.in_progress", "response.queued"})
_NOT_PARSED = object()  # handle_result: no parsed result handed in

OUTER_CALL: ContextVar[bool] = ContextVar("agentprof_outer_model_call", default=False)
"""True while a wrapper library's call (LiteLLM) is being recorded: the SDK calls it makes inside are the same
model call, so :func:`begin` records nothing for them."""


def _snapshot_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [dict(v) if isinstance(v, dict) else v for v in value]
    return value


def materialize(kwargs: dict[str, Any], api: str) -> None:
    """Turn one-shot iterables among the prompt fields into lists (so both the SDK and agentprof see them)."""
    for key in PROMPT_FIELDS.get(api, ()):
        v = kwargs.get(key)
        if v is not None and not isinstance(v, (str, bytes, list, tuple, Mapping)) and hasattr(v, "__iter__") \
                and given(v) is not None:
            kwargs[key] = list(v)


def _server(client: Any) -> tuple[str | None, int | None]:
    try:
        url = client._client.base_url
        return url.host or None, url.port
    except Exception:
        return None, None


class ModelCall:
    """The span of one model call and what is learned about it until it ends."""

    def __init__(self, sess: Session, provider_name: str, api: str, request: Mapping[str, Any],
                 resource: Any = None, usage_shape: str | None = None, t_entry: int | None = None) -> None:
        t0 = _cpu() if t_entry is None else t_entry  # from the SDK wrapper's entry when it tells
        self.sess = sess
        self.api = api
        self.provider = provider_name
        self.usage_shape = usage_shape or provider_name  # whose usage convention the response follows
        model = given(request.get("model"))
        self.model = str(model) if model is not None else None
        self.stream = given(request.get("stream")) is True
        attrs: dict[str, Any] = {sc.KIND: "model", sc.SESSION_ID: sess.id, sc.OPERATION_NAME: sc.OP_CHAT,
                                 sc.PROVIDER_NAME: provider_name, sc.REQUEST_STREAM: self.stream}
        if self.model:
            attrs[sc.REQUEST_MODEL] = self.model
        host, port = _server(resource)
        if host:
            attrs[sc.SERVER_ADDRESS] = host
            if port:
                attrs[sc.SERVER_PORT] = port
        self.span = provider._tracer.start_span(sc.model_span_name(self.model), parent_context(sess),  # type: ignore[union-attr]
                                                SpanKind.CLIENT, attrs)
        self.start_ns: int = self.span.start_time
        self.end_ns: int | None = None
        self.rq0 = runq_start(sess)
        self.runq_ns = -1  # the agent thread's wait for a CPU from start to response end, where recorded
        self.exc: BaseException | None = None
        self.incomplete = False
        self.print: fingerprint.PromptPrint | None = None
        # response facts
        self.usage: dict[str, Any] | None = None
        self.response_model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: list[str] = []
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.chunks = 0
        self.output: str | None = None
        self._out_text: dict[int, list[str]] = {}
        self._out_tools: dict[Any, dict[str, Any]] = {}
        self._parts = 2  # response + fingerprint
        self._closed = False  # the span was ended (or is being ended)
        self._span_done = False  # its line is written
        self._span_had_print = False  # ... with the fingerprint in it
        self._lock = threading.Lock()
        self._ended = threading.Event()
        sess.pending.add(self)
        snapshot = {k: _snapshot_value(request.get(k)) for k in PROMPT_FIELDS[api]}
        capture = sess.capture_content
        model_name = self.model
        stream_key = (sess.id, api, model_name)
        fingerprint.submit(lambda: fingerprint.compute(api, snapshot, model_name, capture, stream_key),
                           self._fingerprinted, sess.add_background_cpu)
        self.cpu_mark = _cpu()  # where counting stopped: record() goes on from here through the span's attach
        sess.add_overhead(self.cpu_mark - t0)

    # --- the agent's side -----------------------------------------------------------------------------
    def attach(self) -> object:
        """Make this call's span current while the SDK sends the request (retries, nested spans)."""
        return otel_context.attach(otel_trace.set_span_in_context(self.span))

    @staticmethod
    def detach(token: object) -> None:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        except Exception:
            pass

    def fail(self, exc: BaseException) -> None:
        self.exc = exc
        self._response_done(_time_ns())

    def handle_result(self, result: Any, parsed: Any = _NOT_PARSED, t0: int | None = None) -> Any:
        """Record a response or start observing a stream; returns ``result`` itself (maybe instrumented).

        ``result`` may be a raw-response wrapper (:mod:`~agentprof.capture.raw_response`): then what its
        ``.parse()`` returns (``parsed``, already awaited on the async path) is read or observed instead.
        ``t0``: thread CPU time where agentprof's part began (the span's detach), when the caller read it.
        """
        if t0 is None:
            t0 = _cpu()
        end = _time_ns()
        agent_ns = 0  # parsing a raw response for the agent is the agent's cost, not agentprof's
        try:
            target = result
            kind = raw_response.kind(result)
            if kind == raw_response.LAZY:
                raw_response.follow_lazy(result, self)
                self.sess.add_overhead(_cpu() - t0)
                return result
            if kind == raw_response.READY:
                if parsed is _NOT_PARSED:
                    t1 = _cpu()
                    parsed = raw_response.parse_now(result, self.provider)
                    agent_ns = _cpu() - t1
                raw_response.follow_close(result, self)
                if parsed is raw_response.FAILED:
                    self._response_done(end, incomplete=self.stream)
                    self.sess.add_overhead(_cpu() - t0 - agent_ns)
                    return result
                target = parsed
            if self.stream:
                if _instrument_stream(target, self):
                    self.sess.add_overhead(_cpu() - t0 - agent_ns)
                    return result
                self._response_done(end, incomplete=True)  # not a stream agentprof knows: no chunks to see
            else:
                self._read_response(target)
                self._response_done(end)
        except Exception as e:
            internal_error(f"reading a {self.provider} response", e)
            self._response_done(_time_ns())
        self.sess.add_overhead(_cpu() - t0 - agent_ns)
        return result

    def lazy_parsed(self, parsed: Any) -> None:
        """The agent parsed a response whose body it read itself (``with_streaming_response``)."""
        end = _time_ns()
        if self.end_ns is not None:
            return
        try:
            if self.stream:
                if _instrument_stream(parsed, self):
                    return
            else:
                self._read_response(parsed)
        except Exception as e:
            internal_error(f"reading a {self.provider} response", e)
        self._response_done(end, incomplete=self.stream)

    def _read_response(self, obj: Any) -> None:
        usage = getattr(obj, "usage", None)
        if usage is not None:
            self.usage = to_mapping(usage)
        self.response_model = _str(getattr(obj, "model", None))
        self.response_id = _str(getattr(obj, "id", None))
        if self.api == "chat":
            for ch in getattr(obj, "choices", None) or ():
                fr = getattr(ch, "finish_reason", None)
                if fr:
                    self.finish_reasons.append(str(fr))
        elif self.api == "messages":
            sr = getattr(obj, "stop_reason", None)
            if sr:
                self.finish_reasons.append(str(sr))
        if self.sess.capture_content:
            from agentprof.capture.content import output_messages
            from agentprof.capture.plain import plain

            self.output = output_messages(self.api, plain(obj) if not isinstance(obj, Mapping) else obj)

    # --- streams ----------------------------------------------------------------------------------------
    def chunk(self, item: Any) -> None:
        """Observe one streamed chunk/event (called for every item the agent receives)."""
        now = _time_ns()
        self.chunks += 1
        self.last_ns = now
        try:
            if self.api == "chat":
                self._chat_chunk(item, now)
            elif self.api == "messages":
                self._anthropic_event(item, now)
            else:
                self._responses_event(item, now)
        except Exception as e:
            internal_error(f"reading a {self.provider} stream chunk", e)

    def _chat_chunk(self, c: Any, now: int) -> None:
        choices = getattr(c, "choices", None)
        if choices:
            if self.first_ns is None:
                self.first_ns = now
            for ch in choices:
                fr = getattr(ch, "finish_reason", None)
                if fr:
                    self.finish_reasons.append(str(fr))
                if self.sess.capture_content:
                    self._chat_delta(getattr(ch, "index", 0) or 0, getattr(ch, "delta", None))
        usage = getattr(c, "usage", None)
        if usage is not None:
            self.usage = to_mapping(usage)
        if self.response_model is None:
            self.response_model = _str(getattr(c, "model", None))
            self.response_id = _str(getattr(c, "id", None))

    def _chat_delta(self, index: int, delta: Any) -> None:
        if delta is None:
            return
        text = getattr(delta, "content", None)
        if text:
            self._out_text.setdefault(index, []).append(text)
        for tc in getattr(delta, "tool_calls", None) or ():
            slot = self._out_tools.setdefault((index, getattr(tc, "index", 0)), {"id": None, "name": None, "args": []})
            slot["id"] = slot["id"] or getattr(tc, "id", None)
            fn = getattr(tc, "function", None)
            if fn is not None:
                slot["name"] = slot["name"] or getattr(fn, "name", None)
                if getattr(fn, "arguments", None):
                    slot["args"].append(fn.arguments)

    def _anthropic_event(self, ev: Any, now: int) -> None:
        t = getattr(ev, "type", "")
        if t == "message_start":
            msg = getattr(ev, "message", None)
            self.usage = to_mapping(getattr(msg, "usage", None))
            self.response_model = _str(getattr(msg, "model", None))
            self.response_id = _str(getattr(msg, "id", None))
        elif t in ("content_block_start", "content_block_delta"):
            if self.first_ns is None:
                self.first_ns = now
            if self.sess.capture_content and t == "content_block_delta":
                d = getattr(ev, "delta", None)
                piece = getattr(d, "text", None) or getattr(d, "partial_json", None) or getattr(d, "thinking", None)
                if piece:
                    self._out_text.setdefault(getattr(ev, "index", 0) or 0, []).append(piece)
        elif t == "message_delta":
            later = {k: v for k, v in to_mapping(getattr(ev, "usage", None)).items() if v is not None}
            self.usage = {**(self.usage or {}), **later}
            sr = getattr(getattr(ev, "delta", None), "stop_reason", None)
            if sr:
                self.finish_reasons.append(str(sr))

    def _responses_event(self, ev: Any, now: int) -> None:
        t = getattr(ev, "type", "") or ""
        if self.first_ns is None and t not in _RESPONSES_PREAMBLE:
            self.first_ns = now
        if t in ("response.completed", "response.incomplete", "response.failed", "response.created"):
            r = getattr(ev, "response", None)
            if r is None:
                return
            self.response_model = _str(getattr(r, "model", None)) or self.response_model
            self.response_id = _str(getattr(r, "id", None)) or self.response_id
            if t != "response.created":
                usage = getattr(r, "usage", None)
                if usage is not None:
                    self.usage = to_mapping(usage)
                if self.sess.capture_content:
                    from agentprof.capture.content import output_messages
                    from agentprof.capture.plain import plain

                    self.output = output_messages("responses", plain(r))

    def stream_done(self, complete: bool) -> None:
        """The stream ended: read to the end (``complete``), or closed/dropped early. On the agent's thread,
        so ending and writing the span here (when the fingerprint is already in) is counted as overhead."""
        t0 = _cpu()
        if complete:
            self._response_done(_time_ns())
        else:
            self._response_done(self.last_ns or _time_ns(), incomplete=True)
        self.sess.add_overhead(_cpu() - t0)

    def stream_failed(self, exc: BaseException) -> None:
        t0 = _cpu()
        self.exc = exc
        self._response_done(_time_ns())
        self.sess.add_overhead(_cpu() - t0)

    # --- ending -----------------------------------------------------------------------------------------
    def _response_done(self, end_ns: int, incomplete: bool = False) -> None:
        with self._lock:
            if self.end_ns is not None:
                return
            self.end_ns = end_ns
            self.incomplete = self.incomplete or incomplete
        self.runq_ns = runq_since(self.sess, self.rq0)
        self._part_done()

    def _fingerprinted(self, result: fingerprint.PromptPrint | None, err: BaseException | None) -> None:
        if err is not None:
            warn_once(f"fingerprint:{type(err).__name__}", f"could not fingerprint a prompt "
                                                           f"({type(err).__name__}: {err}); the span has no hashes")
        elif result is not None:
            self.print = result
            try:
                self.sess.note_tokenizer(result.tokenizer, self.model, result.tokenizer_exact)
            except Exception as e:
                internal_error("recording the tokenizer", e)
        self._part_done()

    def _part_done(self) -> None:
        late = False
        with self._lock:
            self._parts -= 1
            if self._closed:  # the fingerprint after the span: an update line, then the call is complete
                late = self._parts == 0 and self._span_done and not self._span_had_print and self.print is not None
                done = self._parts == 0 and self._span_done
            elif self.end_ns is None:  # the fingerprint came first: wait for the response
                return
            else:
                self._closed = True
                done = None
        if done is None:
            self._end()
            return
        if late:
            self._write_print_update()
        if done:
            self._complete()

    def _complete(self) -> None:
        self.sess.pending.discard(self)
        self._ended.set()

    def close_at_session_end(self, deadline: float) -> None:
        """The session is ending: close a stream nobody finished, give the fingerprint until ``deadline``."""
        if self.end_ns is None:
            self._response_done(self.last_ns or _time_ns(), incomplete=True)
        if not self._ended.wait(max(0.0, deadline - time.monotonic())):
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            self._end()

    def _end(self) -> None:
        printed = self.print
        try:
            set_many(self.span, self._attributes(printed))
            if self.exc is not None:
                record_error(self.span, self.exc, self.sess.capture_content)
                code = getattr(self.exc, "status_code", None)
                if isinstance(code, int):
                    self.span.set_attribute(sc.HTTP_STATUS_CODE, code)
        except Exception as e:
            internal_error("recording a model call", e)
        try:
            self.span.end(end_time=self.end_ns or _time_ns())
        except Exception as e:
            internal_error("ending a model span", e)
        with self._lock:
            self._span_done = True
            self._span_had_print = printed is not None
            late = printed is None and self.print is not None  # came in while the span was being written
            done = self._parts <= 0
        if late:
            self._write_print_update()
        if done:
            self._complete()

    def _print_attributes(self, p: fingerprint.PromptPrint) -> dict[str, Any]:
        a: dict[str, Any] = {sc.PROMPT_BLOCK_HASHES: p.block_hashes, sc.PROMPT_TOKENS: p.tokens,
                             sc.PROMPT_SEGMENTS: fingerprint.dumps(p.segments)}
        if p.content:
            a.update(p.content)
        return a

    def _write_print_update(self) -> None:
        """The fingerprint of a span already written: a follow-up line the reader merges into it."""
        try:
            p = self.print
            if p is None:
                return
            ctx = self.span.get_span_context()
            self.sess.write_update(ctx.trace_id, ctx.span_id, self._print_attributes(p))
        except Exception as e:
            internal_error("recording a prompt fingerprint", e)

    def _attributes(self, p: fingerprint.PromptPrint | None = None) -> dict[str, Any]:
        a: dict[str, Any] = {}
        if self.response_model:
            a[sc.RESPONSE_MODEL] = self.response_model
        if self.response_id:
            a[sc.RESPONSE_ID] = self.response_id
        if self.finish_reasons:
            a[sc.RESPONSE_FINISH_REASONS] = self.finish_reasons
        if self.usage:
            u = normalize_usage(self.usage, self.usage_shape)
            for key, value in ((sc.USAGE_INPUT_TOKENS, u.input_tokens), (sc.USAGE_OUTPUT_TOKENS, u.output_tokens),
                               (sc.USAGE_CACHE_READ_INPUT_TOKENS, u.cache_read_tokens),
                               (sc.USAGE_CACHE_CREATION_INPUT_TOKENS, u.cache_write_tokens),
                               (sc.USAGE_REASONING_OUTPUT_TOKENS, u.reasoning_tokens)):
                if value is not None and value >= 0:  # a negative count is a diagnostic, never a number
                    a[key] = value
            for problem in u.problems:
                self.sess.diagnose("usage", f"{self.provider} usage: {problem}", self.span.get_span_context().span_id)
        if self.stream:
            a[sc.STREAM_CHUNKS] = self.chunks
            if self.first_ns is not None:
                a[sc.RESPONSE_TIME_TO_FIRST_CHUNK] = (self.first_ns - self.start_ns) / 1e9
        if self.incomplete:
            a[sc.INCOMPLETE] = True
        if self.runq_ns >= 0:
            a[sc.RUNQ_NS] = self.runq_ns
        if p is not None:
            a.update(self._print_attributes(p))
        if self.sess.capture_content:
            out = self.output or self._streamed_output()
            if out:
                a[sc.OUTPUT_MESSAGES] = out
        return a

    def _streamed_output(self) -> str | None:
        if not self._out_text and not self._out_tools:
            return None
        msgs: dict[int, dict[str, Any]] = {}
        for i, pieces in self._out_text.items():
            msgs.setdefault(i, {"role": "assistant", "parts": []})["parts"].append(
                {"type": "text", "content": "".join(pieces)})
        for (i, _), tc in self._out_tools.items():
            msgs.setdefault(i, {"role": "assistant", "parts": []})["parts"].append(
                {"type": "tool_call", "id": tc["id"], "name": tc["name"], "arguments": "".join(tc["args"])})
        if self.finish_reasons:
            for m in msgs.values():
                m["finish_reason"] = self.finish_reasons[-1]
        return fingerprint.dumps([msgs[i] for i in sorted(msgs)])


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def begin(provider_name: str, api: str, kwargs: dict[str, Any], resource: Any,
          usage_shape: str | None = None, t_entry: int | None = None) -> ModelCall | None:
    """Start recording a call when a profile is active (``None`` otherwise, or if agentprof failed).
    ``usage_shape``: the provider whose usage convention responses follow, when not ``provider_name``'s own
    (LiteLLM answers in OpenAI's shapes whatever the provider). ``t_entry``: thread CPU time at the wrapper's
    entry, so the call's overhead counts from there."""
    sess = current()
    if sess is None or OUTER_CALL.get():
        return None
    try:
        materialize(kwargs, api)
        return ModelCall(sess, provider_name, api, kwargs, resource, usage_shape, t_entry)
    except Exception as e:
        internal_error(f"starting a {provider_name} model span", e)
        return None


def record(provider_name: str, api: str, kwargs: dict[str, Any], resource: Any, send: Callable[[], Any]) -> Any:
    """``send()`` one request, recorded as a model call when a profile is active; the SDK's result (or its
    exception, unchanged) comes back to the caller."""
    call = begin(provider_name, api, kwargs, resource, t_entry=_cpu())
    if call is None:
        return send()
    token = call.attach()
    call.sess.add_overhead(_cpu() - call.cpu_mark)
    try:
        raw = send()
    except BaseException as e:
        call.detach(token)
        call.fail(e)
        raise
    t0 = _cpu()
    call.detach(token)
    return call.handle_result(raw, t0=t0)


async def record_async(provider_name: str, api: str, kwargs: dict[str, Any], resource: Any,
                       send: Callable[[], Awaitable[Any]]) -> Any:
    """:func:`record` for requests sent by awaiting ``send()``."""
    call = begin(provider_name, api, kwargs, resource, t_entry=_cpu())
    if call is None:
        return await send()
    token = call.attach()
    call.sess.add_overhead(_cpu() - call.cpu_mark)
    try:
        raw = await send()
    except BaseException as e:
        call.detach(token)
        call.fail(e)
        raise
    t0 = _cpu()
    call.detach(token)
    if raw_response.needs_await(raw):  # the agent's await of the body: not agentprof's
        call.sess.add_overhead(_cpu() - t0)
        parsed = await raw_response.parse_async(raw, provider_name)
        t0 = None
    else:
        parsed = _NOT_PARSED
    return call.handle_result(raw, parsed, t0=t0)


# --- stream instrumentation ---------------------------------------------------------------------------
def _observe(it: Iterator[Any], call: ModelCall) -> Iterator[Any]:
    spent = 0  # agentprof's time per chunk, counted as capture overhead once the stream ends
    try:
        for item in it:
            t0 = _perf()
            call.chunk(item)
            spent += _perf() - t0
            yield item
    except GeneratorExit:
        call.sess.add_overhead(spent)
        call.stream_done(complete=False)
        close = getattr(it, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass
        raise
    except BaseException as e:
        call.sess.add_overhead(spent)
        call.stream_failed(e)
        raise
    call.sess.add_overhead(spent)
    call.stream_done(complete=True)


async def _observe_async(it: AsyncIterator[Any], call: ModelCall) -> AsyncIterator[Any]:
    spent = 0
    try:
        async for item in it:
            t0 = _perf()
            call.chunk(item)
            spent += _perf() - t0
            yield item
    except GeneratorExit:
        call.sess.add_overhead(spent)
        call.stream_done(complete=False)
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:
                pass
        raise
    except BaseException as e:
        call.sess.add_overhead(spent)
        call.stream_failed(e)
        raise
    call.sess.add_overhead(spent)
    call.stream_done(complete=True)


def _sdk_stream(obj: Any) -> Any:
    """The SDK stream inside ``obj``: ``obj`` itself, or the stream another instrumentation's wrapper holds
    (OpenTelemetry's openai-v2 ``StreamWrapper.stream``, a wrapt proxy's ``__wrapped__``); None if none."""
    for _ in range(4):
        if obj is None:
            return None
        if hasattr(obj, "response") and hasattr(obj, "_iterator"):
            return obj
        inner = getattr(obj, "__wrapped__", None)
        if inner is None:
            try:
                inner = vars(obj).get("stream")  # an instance attribute only: never a property that reads
            except TypeError:
                inner = None
        obj = inner
    return None


def _instrument_stream(stream: Any, call: ModelCall) -> bool:
    """Route the SDK stream's items through ``call`` (same object, so ``isinstance`` checks still hold). When
    another instrumentation wrapped the stream, the SDK stream inside its wrapper is observed: the wrapper reads
    its items from there."""
    stream = _sdk_stream(stream)
    if stream is None:
        return False
    try:
        inner = stream._iterator
    except AttributeError:
        return False
    is_async = hasattr(inner, "__anext__")
    stream._iterator = _observe_async(inner, call) if is_async else _observe(inner, call)
    cls_close = getattr(type(stream), "close", None)
    if cls_close is not None:
        import weakref

        ref = weakref.ref(stream)
        if is_async:
            async def aclose() -> None:
                call.stream_done(complete=False)
                s = ref()
                if s is not None:
                    await cls_close(s)

            stream.close = aclose
        else:
            def close() -> None:
                call.stream_done(complete=False)
                s = ref()
                if s is not None:
                    cls_close(s)

            stream.close = close
    return True
