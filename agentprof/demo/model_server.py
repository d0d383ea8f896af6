"""A model server on loopback that speaks the OpenAI and Anthropic HTTP APIs, for demos and tests.

Endpoints: OpenAI chat completions (``POST /v1/chat/completions``, JSON or SSE with a final usage chunk when
``stream_options.include_usage``), the OpenAI Responses API (``POST /v1/responses``, JSON or SSE events) and
Anthropic messages (``POST /v1/messages``, JSON or the SSE event stream). What the "model" answers comes from
a pluggable *script* (the parsed request in, text and/or tool calls out); how long it takes from a pluggable
*latency model* (time to first token and time per output token), so a device model can drive it later.

Token counts come from a simple deterministic word-piece count. Prompt caching is simulated: a request's
cached tokens are its longest common prefix with earlier requests (same API and model), rounded down to
``cache_block`` tokens, and reported in each provider's own convention: OpenAI ``cached_tokens`` is part of
``prompt_tokens``; Anthropic ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` come *in addition
to* ``input_tokens`` (and only for requests that carry a ``cache_control`` marker, as with the real API).
Every served call is logged in :attr:`ModelServer.log` with the figures it reported.

    with ModelServer(script=my_script) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test")
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --- what a script returns --------------------------------------------------------------------------------


@dataclass
class ToolCall:
    """A tool call the model makes (``arguments`` as a dict or a JSON string)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    """A model answer: text and/or tool calls; ``reasoning_tokens`` are billed as (hidden) output."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_tokens: int = 0


@dataclass
class ErrorReply:
    """An API error with the provider's error body (e.g. 400 invalid request, 429 rate limit)."""

    status: int = 400
    message: str = "bad request"
    type: str = "invalid_request_error"


@dataclass
class RawReply:
    """Send this body as-is (for testing clients against odd or broken responses)."""

    body: Any
    status: int = 200


@dataclass
class Latency:
    """Seconds before the first output token, and per further output token."""

    ttft_s: float = 0.0
    per_token_s: float = 0.0


@dataclass
class ModelRequest:
    """A parsed request as the script and latency model see it."""

    api: str  # "chat", "responses" or "messages"
    model: str
    body: dict[str, Any]
    stream: bool
    messages: list[tuple[str, str]]  # (role, text) in order, tool results with role "tool"
    tool_names: list[str]

    @property
    def last_user_text(self) -> str:
        return next((t for r, t in reversed(self.messages) if r == "user"), "")

    @property
    def tool_results(self) -> list[str]:
        return [t for r, t in self.messages if r == "tool"]

    @property
    def turn(self) -> int:
        """Number of assistant turns already in the conversation."""
        return sum(1 for r, _ in self.messages if r == "assistant")


Script = Callable[[ModelRequest], "Reply | ErrorReply | RawReply | str"]
LatencyModel = Callable[[ModelRequest, int, int, int], Latency]
"""``(request, prompt_tokens, cached_tokens, output_tokens) -> Latency``."""


@dataclass
class ServedCall:
    """What the server did for one request (figures in the provider's own convention are in ``usage``)."""

    api: str
    model: str
    stream: bool
    prompt_tokens: int  # all input tokens, cached included
    cached_tokens: int  # read from the simulated cache
    cache_write_tokens: int  # written to it (Anthropic with cache_control only)
    output_tokens: int
    reasoning_tokens: int
    usage: dict[str, Any]  # exactly as reported to the client
    latency: Latency
    status: int = 200
    max_tokens: int | None = None  # the output cap the request asked for (any API's name for it)
    first_byte_s: float | None = None  # measured by the server: request headers read -> first token written


def requested_max_tokens(body: Mapping[str, Any]) -> int | None:
    """The request's output cap under any of the APIs' names for it, or None."""
    for key in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        v = body.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def default_script(req: ModelRequest) -> Reply:
    """Answer with a short text that names the last user message's length."""
    return Reply(text=f"Done. Your message had {len(req.last_user_text)} characters.")


def no_latency(req: ModelRequest, prompt_tokens: int, cached_tokens: int, output_tokens: int) -> Latency:
    return Latency()


# --- tokens and caching -----------------------------------------------------------------------------------

_PIECE = re.compile(r"\s?[A-Za-z]{1,6}|\s?\d{1,3}|\s?[^\sA-Za-z\d]|\s+")


def count_pieces(text: str) -> list[str]:
    """Word pieces standing in for tokens (about 4 characters each for English, deterministic)."""
    return _PIECE.findall(text)


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _has_cache_control(obj: Any) -> bool:
    if isinstance(obj, Mapping):
        return "cache_control" in obj or any(_has_cache_control(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_cache_control(v) for v in obj)
    return False


def _strip_cache_control(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _strip_cache_control(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_strip_cache_control(v) for v in obj]
    return obj


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(p) for p in content)
    if isinstance(content, Mapping):
        for key in ("text", "content", "output", "arguments", "input"):
            if key in content:
                v = content[key]
                return v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return json.dumps(content, sort_keys=True)


def parse_request(api: str, body: dict[str, Any]) -> ModelRequest:
    messages: list[tuple[str, str]] = []
    if api == "chat":
        for m in body.get("messages") or []:
            text = _text(m.get("content"))
            for tc in m.get("tool_calls") or []:
                text += f"\n[call {tc.get('function', {}).get('name')}] {tc.get('function', {}).get('arguments')}"
            messages.append((m.get("role", "user"), text))
        tools = [t.get("function", t).get("name", "") for t in body.get("tools") or []]
    elif api == "messages":
        if body.get("system"):
            messages.append(("system", _text(body["system"])))
        for m in body.get("messages") or []:
            content = m.get("content")
            if isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") == "tool_result"
                                                 for p in content):
                for p in content:
                    if isinstance(p, Mapping) and p.get("type") == "tool_result":
                        messages.append(("tool", _text(p.get("content"))))
                    else:
                        messages.append((m.get("role", "user"), _text(p)))
            else:
                messages.append((m.get("role", "user"), _text(content)))
        tools = [t.get("name", "") for t in body.get("tools") or []]
    else:
        if body.get("instructions"):
            messages.append(("system", _text(body["instructions"])))
        inp = body.get("input")
        if isinstance(inp, str):
            messages.append(("user", inp))
        for item in inp if isinstance(inp, list) else []:
            t = item.get("type", "message")
            if t == "message":
                messages.append((item.get("role", "user"), _text(item.get("content"))))
            elif t.endswith("_output"):
                messages.append(("tool", _text(item.get("output"))))
            else:
                messages.append(("assistant", _text(item)))
        tools = [t.get("name", "") for t in body.get("tools") or []]
    return ModelRequest(api, str(body.get("model", "")), body, bool(body.get("stream")), messages, tools)


def prompt_pieces(api: str, body: dict[str, Any]) -> list[str]:
    """The prompt as the simulated model reads it: tool definitions, system, then messages, in order."""
    body = _strip_cache_control(body)
    parts = []
    if body.get("tools"):
        parts.append("tools: " + json.dumps(body["tools"], sort_keys=True))
    if api == "messages" and body.get("system"):
        parts.append("system: " + json.dumps(body["system"], sort_keys=True))
    if api == "responses":
        if body.get("instructions"):
            parts.append("system: " + json.dumps(body["instructions"], sort_keys=True))
        inp = body.get("input")
        items = [{"role": "user", "content": inp}] if isinstance(inp, str) else inp or []
        parts.extend(json.dumps(i, sort_keys=True) for i in items)
    else:
        parts.extend(json.dumps(m, sort_keys=True) for m in body.get("messages") or [])
    return count_pieces("\n".join(parts))


class PromptCache:
    """Longest-common-prefix prompt cache per (API, model), in whole ``block``-token blocks."""

    def __init__(self, block: int = 16, min_tokens: int = 0, capacity: int = 256) -> None:
        self.block = max(1, block)
        self.min_tokens = min_tokens
        self.capacity = capacity
        self._seen: dict[tuple[str, str], list[list[str]]] = {}
        self._lock = threading.Lock()

    def lookup_and_store(self, key: tuple[str, str], pieces: list[str]) -> int:
        with self._lock:
            seen = self._seen.setdefault(key, [])
            best = max((_common_prefix(p, pieces) for p in seen), default=0)
            seen.append(pieces)
            del seen[:-self.capacity]
        cached = best // self.block * self.block
        return cached if cached >= self.min_tokens else 0


# --- the server -------------------------------------------------------------------------------------------

_ids = itertools.count(1)


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


class _Server(ThreadingHTTPServer):
    """A thread per request, named as agentprof's own threads are: the server stands in for a remote endpoint,
    so the stack sampler leaves its threads out of the agent's profile, as it would a server elsewhere."""

    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                             name="agentprof-model-server-request", daemon=True)
        t.start()


STOP_POLL_S = 0.05
"""How often the serving loop checks for :meth:`ModelServer.stop` (a stop waits up to this long)."""


class ModelServer:
    """Serve scripted model answers on ``127.0.0.1`` (ephemeral port); use as a context manager."""

    handler: type[BaseHTTPRequestHandler]  # the request handler class (a subclass may add routes); set below

    def __init__(self, script: Script | None = None, latency: LatencyModel | None = None, cache_block: int = 16,
                 min_cached_tokens: int = 0, host: str = "127.0.0.1", port: int = 0,
                 absolute_pacing: bool = False) -> None:
        self.script = script or default_script
        self.latency = latency or no_latency
        # absolute_pacing: stream token k at (start + ttft + k * per_token) instead of sleeping a full interval
        # after each write, so the server's own work does not add to the latency model's times
        self.absolute_pacing = absolute_pacing
        self.cache = PromptCache(cache_block, min_cached_tokens)
        self.log: list[ServedCall] = []
        self._log_lock = threading.Lock()
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> ModelServer:
        server = self

        class Handler(self.handler):  # type: ignore[name-defined,misc]
            owner = server

        self._httpd = _Server((self._host, self._port), Handler)
        # the loop looks for a shutdown every STOP_POLL_S (socketserver's default 0.5 s made every stop wait ~0.4 s)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(STOP_POLL_S,),
                                        name="agentprof-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """Root URL (the Anthropic SDK's ``base_url``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``base_url`` for the OpenAI SDK (``…/v1``)."""
        return f"{self.base_url}/v1"

    # serving
    def cached_tokens(self, api: str, req: ModelRequest, pieces: list[str]) -> int:
        """Prompt tokens the simulated cache serves for this request (a subclass may keep another cache)."""
        return self.cache.lookup_and_store((api, req.model), pieces)

    def answer(self, api: str, body: dict[str, Any]) -> tuple[ModelRequest, Any, ServedCall | None]:
        """Run the script for one request and work out its token figures."""
        req = parse_request(api, body)
        reply = self.script(req)
        if isinstance(reply, str):
            reply = Reply(text=reply)
        if not isinstance(reply, Reply):
            return req, reply, None
        pieces = prompt_pieces(api, body)
        prompt = len(pieces)
        cached = self.cached_tokens(api, req, pieces)
        write = 0
        if api == "messages":
            if _has_cache_control(body):
                write = max(0, prompt // self.cache.block * self.cache.block - cached)
            else:
                cached = 0
        out_text = reply.text + "".join(tc.name + tc.arguments_json() for tc in reply.tool_calls)
        output = len(count_pieces(out_text)) + reply.reasoning_tokens
        lat = self.latency(req, prompt, cached, output)
        if api == "chat":
            usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": output,
                                     "total_tokens": prompt + output,
                                     "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                                     "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens}}
        elif api == "responses":
            usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                     "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
                     "total_tokens": prompt + output}
        else:
            usage = {"input_tokens": prompt - cached - write, "cache_creation_input_tokens": write,
                     "cache_read_input_tokens": cached, "output_tokens": output}
        served = ServedCall(api, req.model, req.stream, prompt, cached, write, output, reply.reasoning_tokens,
                            usage, lat, max_tokens=requested_max_tokens(body))
        with self._log_lock:
            self.log.append(served)
        return req, reply, served


class _Handler(BaseHTTPRequestHandler):
    owner: ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        t0 = time.perf_counter()
        path = self.path.split("?", 1)[0].rstrip("/")
        api = "chat" if path.endswith("/chat/completions") else "responses" if path.endswith("/responses") \
            else "messages" if path.endswith("/messages") else None
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if api is None:
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(api, ErrorReply(400, "request body is not JSON"))
            return
        req, reply, served = self.owner.answer(api, body)
        if isinstance(reply, RawReply):
            self._json(reply.status, reply.body)
            return
        if isinstance(reply, ErrorReply):
            self._error(api, reply)
            return
        assert served is not None
        build = {"chat": _ChatWire, "responses": _ResponsesWire, "messages": _AnthropicWire}[api](req, reply, served)
        if req.stream:
            self._stream(build.events(), served, t0)
        else:
            time.sleep(served.latency.ttft_s + served.latency.per_token_s * max(0, served.output_tokens - 1))
            served.first_byte_s = time.perf_counter() - t0
            self._json(200, build.body())

    def _json(self, status: int, body: Any) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, api: str, err: ErrorReply) -> None:
        if api == "messages":
            self._json(err.status, {"type": "error", "error": {"type": err.type, "message": err.message}})
        else:
            self._json(err.status, {"error": {"message": err.message, "type": err.type, "code": None, "param": None}})

    def _stream(self, events: Iterator[tuple[str, bytes]], served: ServedCall, t0: float) -> None:
        latency = served.latency
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        first = True
        due = time.perf_counter()
        for phase, chunk in events:
            if phase == "token":
                if self.owner.absolute_pacing:
                    due += latency.ttft_s if first else latency.per_token_s
                    time.sleep(max(0.0, due - time.perf_counter()))
                else:
                    time.sleep(latency.ttft_s if first else latency.per_token_s)
                first = False
            self.wfile.write(chunk)
            self.wfile.flush()
            if phase == "token" and served.first_byte_s is None:
                served.first_byte_s = time.perf_counter() - t0


ModelServer.handler = _Handler


# --- wire formats -----------------------------------------------------------------------------------------
# ``events()`` yields (phase, bytes): "head" events go out at once, each "token" event waits for the
# latency model (time to first token before the first, time per token before each later one).


class _Wire:
    def __init__(self, req: ModelRequest, reply: Reply, served: ServedCall) -> None:
        self.req, self.reply, self.served = req, reply, served
        self.id = next(_ids)
        self.created = int(time.time())
        self.calls = [(tc, tc.id or f"call_{self.id}_{i}") for i, tc in enumerate(reply.tool_calls)]


class _ChatWire(_Wire):
    def body(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.reply.text or None, "refusal": None}
        if self.calls:
            msg["tool_calls"] = [{"id": cid, "type": "function",
                                  "function": {"name": tc.name, "arguments": tc.arguments_json()}}
                                 for tc, cid in self.calls]
        return {"id": f"chatcmpl-{self.id}", "object": "chat.completion", "created": self.created,
                "model": self.req.model, "choices": [{"index": 0, "message": msg, "logprobs": None,
                                                      "finish_reason": self._finish()}],
                "usage": self.served.usage}

    def _finish(self) -> str:
        return "tool_calls" if self.calls else "stop"

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, usage: Any = None,
               choices: bool = True) -> bytes:
        body: dict[str, Any] = {"id": f"chatcmpl-{self.id}", "object": "chat.completion.chunk",
                                "created": self.created, "model": self.req.model,
                                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
                                if choices else []}
        if self._include_usage():
            body["usage"] = usage
        return _sse(None, body)

    def _include_usage(self) -> bool:
        opts = self.req.body.get("stream_options") or {}
        return bool(opts.get("include_usage"))

    def events(self) -> Iterator[tuple[str, bytes]]:
        pieces = count_pieces(self.reply.text)
        yield "token", self._chunk({"role": "assistant", "content": pieces[0] if pieces else ""})
        for p in pieces[1:]:
            yield "token", self._chunk({"content": p})
        for i, (tc, cid) in enumerate(self.calls):
            yield "token", self._chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                                        "function": {"name": tc.name, "arguments": ""}}]})
            for p in count_pieces(tc.arguments_json()):
                yield "token", self._chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
        yield "head", self._chunk({}, finish=self._finish())
        if self._include_usage():
            yield "head", self._chunk({}, usage=self.served.usage, choices=False)
        yield "head", _sse(None, "[DONE]")


class _ResponsesWire(_Wire):
    def _items(self, done: bool) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if self.reply.text or not self.calls:
            items.append({"type": "message", "id": f"msg_{self.id}", "status": "completed" if done else "in_progress",
                          "role": "assistant",
                          "content": [{"type": "output_text", "text": self.reply.text if done else "",
                                       "annotations": []}] if done else []})
        for tc, cid in self.calls:
            items.append({"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": tc.name,
                          "arguments": tc.arguments_json() if done else "",
                          "status": "completed" if done else "in_progress"})
        return items

    def body(self, status: str = "completed") -> dict[str, Any]:
        done = status == "completed"
        return {"id": f"resp_{self.id}", "object": "response", "created_at": self.created, "status": status,
                "model": self.req.model, "output": self._items(True) if done else [],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": self.req.body.get("tools") or [],
                "usage": self.served.usage if done else None, "error": None, "incomplete_details": None,
                "instructions": self.req.body.get("instructions"), "metadata": {}, "temperature": 1.0,
                "top_p": 1.0, "text": {"format": {"type": "text"}}}

    def events(self) -> Iterator[tuple[str, bytes]]:
        seq = itertools.count()

        def ev(kind: str, **data: Any) -> bytes:
            return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

        yield "head", ev("response.created", response=self.body("in_progress"))
        yield "head", ev("response.in_progress", response=self.body("in_progress"))
        items = self._items(False)
        index = 0
        first = True
        if self.reply.text or not self.calls:
            item = items[0]
            yield ("token" if first else "head"), ev("response.output_item.added", output_index=0, item=item)
            first = False
            part = {"type": "output_text", "text": "", "annotations": []}
            yield "head", ev("response.content_part.added", item_id=item["id"], output_index=0, content_index=0,
                             part=part)
            for p in count_pieces(self.reply.text):
                yield "token", ev("response.output_text.delta", item_id=item["id"], output_index=0, content_index=0,
                                  delta=p, logprobs=[])
            yield "head", ev("response.output_text.done", item_id=item["id"], output_index=0, content_index=0,
                             text=self.reply.text, logprobs=[])
            yield "head", ev("response.content_part.done", item_id=item["id"], output_index=0, content_index=0,
                             part={**part, "text": self.reply.text})
            yield "head", ev("response.output_item.done", output_index=0, item=self._items(True)[0])
            index = 1
        done_items = self._items(True)
        for k, (tc, _) in enumerate(self.calls):
            item = items[index + k]
            yield ("token" if first else "head"), ev("response.output_item.added", output_index=index + k, item=item)
            first = False
            for p in count_pieces(tc.arguments_json()):
                yield "token", ev("response.function_call_arguments.delta", item_id=item["id"],
                                  output_index=index + k, delta=p)
            yield "head", ev("response.function_call_arguments.done", item_id=item["id"], output_index=index + k,
                             arguments=tc.arguments_json())
            yield "head", ev("response.output_item.done", output_index=index + k, item=done_items[index + k])
        yield "head", ev("response.completed", response=self.body("completed"))


class _AnthropicWire(_Wire):
    def _content(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self.reply.text:
            blocks.append({"type": "text", "text": self.reply.text})
        for tc, cid in self.calls:
            args = json.loads(tc.arguments_json() or "{}")
            blocks.append({"type": "tool_use", "id": cid.replace("call_", "toolu_"), "name": tc.name, "input": args})
        return blocks

    def _stop(self) -> str:
        return "tool_use" if self.calls else "end_turn"

    def body(self) -> dict[str, Any]:
        return {"id": f"msg_{self.id}", "type": "message", "role": "assistant", "model": self.req.model,
                "content": self._content(), "stop_reason": self._stop(), "stop_sequence": None,
                "usage": self.served.usage}

    def events(self) -> Iterator[tuple[str, bytes]]:
        start_usage = {**self.served.usage, "output_tokens": 1}
        yield "head", _sse("message_start", {"type": "message_start", "message": {
            "id": f"msg_{self.id}", "type": "message", "role": "assistant", "model": self.req.model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}})
        index = 0
        if self.reply.text:
            yield "token", _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                                        "content_block": {"type": "text", "text": ""}})
            yield "head", _sse("ping", {"type": "ping"})
            for p in count_pieces(self.reply.text):
                yield "token", _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                            "delta": {"type": "text_delta", "text": p}})
            yield "head", _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            index = 1
        for k, (tc, cid) in enumerate(self.calls):
            i = index + k
            yield "token", _sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": cid.replace("call_", "toolu_"), "name": tc.name, "input": {}}})
            for p in count_pieces(tc.arguments_json()):
                yield "token", _sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                            "delta": {"type": "input_json_delta", "partial_json": p}})
            yield "head", _sse("content_block_stop", {"type": "content_block_stop", "index": i})
        yield "head", _sse("message_delta", {"type": "message_delta",
                                             "delta": {"stop_reason": self._stop(), "stop_sequence": None},
                                             "usage": {"output_tokens": self.served.output_tokens}})
        yield "head", _sse("message_stop", {"type": "message_stop"})
