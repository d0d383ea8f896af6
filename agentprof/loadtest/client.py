"""The load engine: closed-loop sessions against an OpenAI-compatible endpoint, timed per streamed call.

``concurrency`` workers each take the next session instance when theirs ends, and send its calls in order:
wait the (capped, scaled) gap, send the synthesized prompt streaming with ``max_tokens`` as recorded, read the
stream to its end. Timing is on the client's monotonic clock: TTFT = first output token's chunk − send, E2E =
last chunk − send, TPOT = (E2E − TTFT) / (output tokens − 1). Two engines speak the protocol: ``httpx`` (the
default: the stream read line by line, only the first output and the final usage parsed) and ``sdk`` (the
official ``openai`` SDK's ``AsyncOpenAI``, which parses every chunk into its types and costs a busy client more
time per token; docs/PERFORMANCE.md has the figures). Neither retries by itself: a connection error, 429 or 5xx
before the stream starts is retried here (counted) after a back-off; anything else fails the call, and the
session goes on.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentprof.errors import AgentprofError
from agentprof.loadtest.prompts import PromptSynth
from agentprof.loadtest.workload import Workload

BACKOFF_S = (0.5, 2.0, 8.0)
"""Waits before the first, second and later retries of a call."""


@dataclass
class CallRecord:
    """One sent call as the client measured it (NaN where unknown; ``error`` set when it failed)."""

    call: int  # index into the workload's plan
    instance: int
    sent_t: float  # seconds since the run started
    ttft_s: float = float("nan")
    e2e_s: float = float("nan")
    output_tokens: int = 0
    prompt_tokens: int | None = None  # as the server's usage reports them
    cached_tokens: int | None = None
    retries: int = 0
    error: str | None = None

    @property
    def tpot_s(self) -> float:
        if self.output_tokens > 1 and np.isfinite(self.ttft_s) and np.isfinite(self.e2e_s):
            return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)
        return float("nan")


@dataclass
class SessionRecord:
    """One session instance: when it started and ended (run clock), and whether every call was answered."""

    instance: int
    start_t: float
    end_t: float = float("nan")
    failed_calls: int = 0


@dataclass
class RunRecords:
    calls: list[CallRecord] = field(default_factory=list)
    sessions: list[SessionRecord] = field(default_factory=list)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass
class Endpoint:
    """Where and how to send: base URL (``…/v1``), served model name, ``chat`` or ``responses``."""

    url: str
    model: str
    api: str = "chat"
    api_key: str = "EMPTY"
    timeout_s: float = 600.0
    retries: int = 2
    ignore_eos: bool = True
    backoff_s: tuple[float, ...] = BACKOFF_S
    client: str = "httpx"  # the engine: "httpx" (lean) or "sdk" (the openai SDK)


class HTTPStatusError(Exception):
    """The endpoint answered with an error status (its body's message kept for the error line)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status_code = status


def _status(e: BaseException) -> int | None:
    code = getattr(e, "status_code", None)
    return code if isinstance(code, int) else None


def _retryable(e: BaseException) -> bool:
    """Connection failures, timeouts, 429 and 5xx are worth another try; other errors are the request's."""
    code = _status(e)
    if code is not None:
        return code == 429 or code >= 500
    names = {c.__name__ for c in type(e).__mro__}
    return bool(names & {"APIConnectionError", "TransportError", "TimeoutException", "OSError"})


def _error_name(e: BaseException) -> str:
    code = _status(e)
    return f"HTTP {code}" if code is not None else type(e).__name__


class _Sender:
    """What both engines share: the run clock, the ``ignore_eos`` fallback and the retries."""

    def __init__(self, ep: Endpoint, start: float) -> None:
        self.ep = ep
        self.t0 = start
        self.extra: dict[str, Any] = {"ignore_eos": True} if ep.ignore_eos else {}
        self.notes: list[str] = []

    async def send(self, rec: CallRecord, prompt: str, max_tokens: int, user: str) -> None:
        while True:
            rec.sent_t = time.perf_counter() - self.t0
            try:
                await self._once(rec, prompt, max_tokens, user)
                rec.error = None
                return
            except Exception as e:  # noqa: BLE001 - any failure is a failed call, recorded by name
                if _status(e) == 400 and self.extra and "ignore_eos" in str(e):
                    self.extra = {}  # a provider API without the option: drop it, once
                    self.notes.append("the endpoint rejects ignore_eos: replies may end before max_tokens")
                    continue
                rec.error = _error_name(e)
                if not _retryable(e) or rec.retries >= self.ep.retries or np.isfinite(rec.ttft_s):
                    return
                back = self.ep.backoff_s
                await asyncio.sleep(back[min(rec.retries, len(back) - 1)])
                rec.retries += 1

    def _body(self, prompt: str, max_tokens: int, user: str) -> dict[str, Any]:
        if self.ep.api == "responses":
            return {"model": self.ep.model, "input": prompt, "max_output_tokens": max_tokens, "stream": True,
                    "user": user, **self.extra}
        return {"model": self.ep.model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}, "user": user,
                **self.extra}

    def _json(self, prompt: str, max_tokens: int, user: str) -> str:
        """The request body as JSON, the prompt spliced in as it is (synthetic words and spaces need no escaping),
        so a long prompt costs the client one copy instead of an escaping pass."""
        body = self._body("\0", max_tokens, user)
        head, _, tail = json.dumps(body).partition('"\\u0000"')
        return f'{head}"{prompt}"{tail}'

    async def _once(self, rec: CallRecord, prompt: str, max_tokens: int, user: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class HttpxSender(_Sender):
    """The lean engine (the default): one ``httpx.AsyncClient``, the stream read line by line and only the
    lines that matter parsed (the first output, the final usage), so a busy client adds little to TTFT."""

    def __init__(self, ep: Endpoint, start: float, slots: int) -> None:
        super().__init__(ep, start)
        import httpx

        self.client = httpx.AsyncClient(
            base_url=ep.url.rstrip("/") + "/", timeout=httpx.Timeout(ep.timeout_s, connect=min(ep.timeout_s, 30.0)),
            limits=httpx.Limits(max_connections=slots + 4, max_keepalive_connections=slots + 4),
            headers={"Authorization": f"Bearer {ep.api_key}"})

    async def _once(self, rec: CallRecord, prompt: str, max_tokens: int, user: str) -> None:
        rec.ttft_s = rec.e2e_s = float("nan")
        rec.output_tokens = 0
        responses = self.ep.api == "responses"
        path = "responses" if responses else "chat/completions"
        body = self._json(prompt, max_tokens, user)
        t_send = time.perf_counter()
        async with self.client.stream("POST", path, content=body,
                                      headers={"Content-Type": "application/json"}) as r:
            if r.status_code >= 400:
                text = (await r.aread()).decode(errors="replace")
                raise HTTPStatusError(r.status_code, _message(text))
            last = ""
            chunks = 0
            event = ""
            async for line in r.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                    continue
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                now = time.perf_counter()
                if responses:
                    kind, event = event or _event_type(data), ""  # an SSE event name holds for one data line
                    if kind.endswith(".delta"):
                        chunks += 1
                        if chunks == 1:
                            rec.ttft_s = now - t_send
                        rec.e2e_s = now - t_send
                    elif kind == "response.completed":
                        _usage(rec, json.loads(data).get("response", {}).get("usage"), responses)
                    continue
                if chunks == 0:
                    if _has_output(json.loads(data)):
                        chunks = 1
                        rec.ttft_s = now - t_send
                        rec.e2e_s = now - t_send
                elif '"content"' in data or '"tool_calls"' in data or '"reasoning' in data:
                    chunks += 1
                    rec.e2e_s = now - t_send
                last = data
            if not responses and last:
                _usage(rec, json.loads(last).get("usage"), responses)
        _finish(rec, chunks)

    async def close(self) -> None:
        await self.client.aclose()


_TYPE = re.compile(r'"type"\s*:\s*"([^"]+)"')


def _event_type(data: str) -> str:
    """A Responses stream event's ``type`` from its data line, for servers that send no ``event:`` lines."""
    m = _TYPE.search(data, 0, 200)
    return m.group(1) if m else ""


def _message(text: str) -> str:
    try:
        err = json.loads(text).get("error")
        return str(err.get("message") if isinstance(err, dict) else err or text)[:300]
    except (ValueError, AttributeError):
        return text[:300]


def _has_output(chunk: dict[str, Any]) -> bool:
    for c in chunk.get("choices") or []:
        d = c.get("delta") or {}
        if d.get("content") or d.get("tool_calls") or d.get("reasoning_content") or d.get("reasoning"):
            return True
    return False


def _usage(rec: CallRecord, u: Any, responses: bool) -> None:
    if not isinstance(u, dict):
        return
    details = u.get("input_tokens_details" if responses else "prompt_tokens_details") or {}
    rec.prompt_tokens = u.get("input_tokens" if responses else "prompt_tokens")
    rec.cached_tokens = int(details.get("cached_tokens") or 0)
    rec.output_tokens = int(u.get("output_tokens" if responses else "completion_tokens") or 0)


class SdkSender(_Sender):
    """The official ``openai`` SDK's ``AsyncOpenAI`` (its own retries off): every chunk parsed into its types."""

    def __init__(self, ep: Endpoint, start: float, slots: int) -> None:
        super().__init__(ep, start)
        try:
            import openai
        except ImportError:  # pragma: no cover - the test extra installs it
            raise AgentprofError("--client sdk needs the openai package: pip install 'agentprof[openai]'") from None
        self.client = openai.AsyncOpenAI(base_url=ep.url, api_key=ep.api_key, max_retries=0, timeout=ep.timeout_s)

    async def _once(self, rec: CallRecord, prompt: str, max_tokens: int, user: str) -> None:
        rec.ttft_s = rec.e2e_s = float("nan")
        rec.output_tokens = 0
        body = self._body(prompt, max_tokens, user)
        extra = {k: body.pop(k) for k in list(self.extra)}
        body.pop("stream")
        t_send = time.perf_counter()
        chunks = 0
        if self.ep.api == "responses":
            stream = await self.client.responses.create(**body, stream=True, extra_body=extra or None)
            async for ev in stream:
                now = time.perf_counter()
                kind = getattr(ev, "type", "")
                if kind.endswith(".delta"):
                    chunks += 1
                    if chunks == 1:
                        rec.ttft_s = now - t_send
                    rec.e2e_s = now - t_send
                elif kind == "response.completed" and ev.response.usage is not None:
                    _usage(rec, ev.response.usage.model_dump(), True)
        else:
            stream = await self.client.chat.completions.create(**body, stream=True, extra_body=extra or None)
            async for chunk in stream:
                now = time.perf_counter()
                if chunk.choices:
                    d = chunk.choices[0].delta
                    if d is not None and (d.content or d.tool_calls or getattr(d, "reasoning_content", None)
                                          or getattr(d, "reasoning", None)):
                        chunks += 1
                        if chunks == 1:
                            rec.ttft_s = now - t_send
                        rec.e2e_s = now - t_send
                if chunk.usage is not None:
                    _usage(rec, chunk.usage.model_dump(), False)
        _finish(rec, chunks)

    async def close(self) -> None:
        await self.client.close()


ENGINES = {"httpx": HttpxSender, "sdk": SdkSender}


def _finish(rec: CallRecord, chunks: int) -> None:
    """The end of a stream, for either engine: without a usage count the output chunks stand in for the output
    tokens, and a stream that never produced output is an error."""
    if rec.output_tokens == 0:
        rec.output_tokens = chunks
    if not np.isfinite(rec.ttft_s):
        raise _EmptyReply("the stream ended without an output token")


class _EmptyReply(Exception):
    """A stream that carried no output token (counted as a failed call)."""


async def _session(sender: _Sender, wl: Workload, synth: PromptSynth, inst: int, out: RunRecords,
                   on_call: Callable[[CallRecord], None]) -> None:
    p = wl.plan
    sess = SessionRecord(inst, time.perf_counter() - sender.t0)
    out.sessions.append(sess)
    calls = list(p.calls_of(inst))
    sent = [c for c in calls if np.isnan(p.fixed_s[c])]
    nxt = {c: (sent[k + 1] if k + 1 < len(sent) else None) for k, c in enumerate(sent)}
    for c in calls:
        if p.gap_s[c] > 0:
            await asyncio.sleep(float(p.gap_s[c]))
        if not np.isnan(p.fixed_s[c]):  # not a call the server sees: its (capped, scaled) duration passes
            await asyncio.sleep(float(p.fixed_s[c]))
            continue
        prompt = synth.prompt(c, nxt[c])
        rec = CallRecord(c, inst, 0.0)
        await sender.send(rec, prompt, max(int(p.output_tokens[c]), 1), f"agentprof-loadtest-{inst}")
        out.calls.append(rec)
        sess.failed_calls += rec.error is not None
        on_call(rec)
    sess.end_t = time.perf_counter() - sender.t0


async def run(wl: Workload, synth: PromptSynth, ep: Endpoint,
              on_call: Callable[[CallRecord], None] = lambda r: None) -> RunRecords:
    """Send every session instance of ``wl``, ``wl.concurrency`` at once, closed loop."""
    out = RunRecords()
    start = time.perf_counter()
    sender = ENGINES[ep.client](ep, start, wl.concurrency)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(wl.plan.n_sessions):
        queue.put_nowait(i)

    async def worker() -> None:
        while True:
            try:
                inst = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await _session(sender, wl, synth, inst, out, on_call)

    try:
        await asyncio.gather(*(worker() for _ in range(wl.concurrency)))
    finally:
        await sender.close()
    out.wall_s = time.perf_counter() - start
    out.notes.extend(sender.notes)
    out.calls.sort(key=lambda r: r.call)
    out.sessions.sort(key=lambda s: s.instance)
    return out
