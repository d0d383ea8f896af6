"""An OpenAI-compatible server on loopback with a block-hash prefix cache and prefill/decode delays: something to
point ``agentprof loadtest`` at without an accelerator, and what its tests measure against.

It is :class:`~agentprof.demo.model_server.ModelServer` (chat completions and Responses, streamed with usage)
with three differences. Prompts are cut into ``block``-token blocks hashed in a chain (a block's hash covers every
token before it), and a request's cached tokens are its leading blocks already stored, as vLLM's automatic prefix
caching finds them; each block remembers the session (the request's ``user``) that stored it first, so hits
across sessions are counted apart. The reply is ``max_tokens`` one-token words (the length a load test asks
for, as ``ignore_eos`` gives it). Time to first token is ``base_s``, plus the frontend's tokenizing of the whole
prompt (``frontend_s_per_token``, default 0), plus the uncached tokens' prefill, one prefill at a time (a request
waits for the prefills before it), then ``decode_s`` per further token.

Extra routes: ``POST /tokenize`` (vLLM's: ``{"count", "tokens"}`` for a ``prompt`` or ``messages``) and
``GET /agentprof/served`` (every served call as the server measured it). ``python -m
agentprof.demo.prefix_server`` serves one in its own process and prints ``{"url": …}`` on one line.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

import xxhash

from agentprof.demo.model_server import (
    Latency,
    ModelRequest,
    ModelServer,
    Reply,
    ServedCall,
    _Handler,
    count_pieces,
    prompt_pieces,
    requested_max_tokens,
)


class BlockPrefixCache:
    """Chained block hashes of prompts, per (API, model); unlimited unless ``capacity_blocks`` (then LRU)."""

    def __init__(self, block: int = 16, capacity_blocks: int | None = None) -> None:
        self.block = max(1, block)
        self.capacity_blocks = capacity_blocks
        self._owner: OrderedDict[int, str | None] = OrderedDict()  # block hash -> session that stored it first
        self._lock = threading.Lock()

    def hashes(self, key: tuple[str, str], pieces: list[str]) -> list[int]:
        """The prompt's full blocks as chained hashes (seeded by ``key``, so APIs and models never share)."""
        h = xxhash.xxh3_64_intdigest("\x1f".join(key).encode())
        out = []
        b = self.block
        for i in range(0, len(pieces) // b * b, b):
            h = xxhash.xxh3_64_intdigest(h.to_bytes(8, "little") + "\x1f".join(pieces[i:i + b]).encode())
            out.append(h)
        return out

    def lookup_and_store(self, key: tuple[str, str], pieces: list[str], session: str | None = None) -> tuple[int, int]:
        """(cached tokens, of which stored by another session) for this prompt; then store its blocks."""
        hs = self.hashes(key, pieces)
        with self._lock:
            hit = cross = 0
            for h in hs:
                if h not in self._owner:
                    break
                hit += 1
                cross += self._owner[h] != session
            for h in hs:
                if h in self._owner:
                    self._owner.move_to_end(h)
                else:
                    self._owner[h] = session
            while self.capacity_blocks is not None and len(self._owner) > self.capacity_blocks:
                self._owner.popitem(last=False)
        return hit * self.block, cross * self.block


def echo_max_tokens(req: ModelRequest) -> Reply:
    """Answer with exactly the requested number of one-token words (16 when no cap is given)."""
    n = requested_max_tokens(req.body)
    return Reply(text=" ok" * (16 if n is None else max(n, 1)))


class PrefixCachingServer(ModelServer):
    """A :class:`ModelServer` with the block prefix cache, the ``max_tokens`` echo and the prefill queue."""

    def __init__(self, block: int = 16, base_s: float = 0.03, prefill_s_per_token: float = 2e-5,
                 decode_s: float = 2e-3, capacity_blocks: int | None = None, port: int = 0,
                 frontend_s_per_token: float = 0.0) -> None:
        super().__init__(script=echo_max_tokens, latency=self._latency, cache_block=block, port=port,
                         absolute_pacing=True)
        self.blocks = BlockPrefixCache(block, capacity_blocks)
        self.base_s, self.prefill_s_per_token, self.decode_s = base_s, prefill_s_per_token, decode_s
        self.frontend_s_per_token = frontend_s_per_token  # tokenizing the whole prompt, before the prefill lane
        self._free_at = 0.0  # when the one prefill lane is next free (perf_counter seconds)
        self._lane = threading.Lock()
        self._local = threading.local()
        self.records: list[tuple[ServedCall, str | None, int]] = []  # (call, session, cached from other sessions)

    def _latency(self, req: ModelRequest, prompt: int, cached: int, output: int) -> Latency:
        work = max(prompt - cached, 0) * self.prefill_s_per_token
        with self._lane:
            now = time.perf_counter()
            self._free_at = max(self._free_at, now) + work
            ttft = self._free_at - now
        return Latency(ttft_s=self.base_s + prompt * self.frontend_s_per_token + ttft, per_token_s=self.decode_s)

    def cached_tokens(self, api: str, req: ModelRequest, pieces: list[str]) -> int:
        user = req.body.get("user")
        session = user if isinstance(user, str) else None
        cached, cross = self.blocks.lookup_and_store((api, req.model), pieces, session)
        self._local.last = (session, cross)
        return cached

    def answer(self, api: str, body: dict[str, Any]) -> tuple[ModelRequest, Any, ServedCall | None]:
        self._local.last = (None, 0)
        req, reply, served = super().answer(api, body)
        if served is not None:
            session, cross = self._local.last
            with self._log_lock:
                self.records.append((served, session, cross))
        return req, reply, served

    def served(self) -> list[dict[str, Any]]:
        """Every served call as the server saw and timed it (first byte: request read -> first token written)."""
        with self._log_lock:
            rows = list(self.records)
        return [{"session": s, "api": c.api, "model": c.model, "stream": c.stream, "prompt_tokens": c.prompt_tokens,
                 "cached_tokens": c.cached_tokens, "cross_session_cached_tokens": x, "max_tokens": c.max_tokens,
                 "output_tokens": c.output_tokens, "first_byte_s": c.first_byte_s} for c, s, x in rows]


class _PrefixHandler(_Handler):
    owner: PrefixCachingServer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/") == "/agentprof/served":
            self._json(200, {"served": self.owner.served()})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/") != "/tokenize":
            super().do_POST()
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        if isinstance(body.get("messages"), list):
            pieces = prompt_pieces("chat", {"messages": body["messages"]})
        else:
            pieces = count_pieces(str(body.get("prompt", "")))
        time.sleep(len(pieces) * self.owner.frontend_s_per_token)  # the frontend's tokenizing, as a chat call pays it
        self._json(200, {"count": len(pieces), "max_model_len": 1 << 20,
                         "tokens": [xxhash.xxh32_intdigest(p.encode()) for p in pieces]})


PrefixCachingServer.handler = _PrefixHandler


def main(argv: list[str] | None = None) -> None:
    """Serve in this process until stdin closes (unless ``--ignore-stdin``), SIGTERM, or ``--max-seconds`` pass."""
    ap = argparse.ArgumentParser(prog="python -m agentprof.demo.prefix_server", description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--block", type=int, default=16, help="prefix-cache block size in tokens")
    ap.add_argument("--base-ms", type=float, default=30.0, help="fixed part of the time to first token")
    ap.add_argument("--prefill-us", type=float, default=20.0, help="prefill microseconds per uncached prompt token")
    ap.add_argument("--decode-ms", type=float, default=2.0, help="milliseconds per further output token")
    ap.add_argument("--frontend-us", type=float, default=0.0,
                    help="frontend microseconds per prompt token (tokenizing; /tokenize pays it too)")
    ap.add_argument("--max-seconds", type=float, default=3600.0, help="stop after this long at the latest")
    ap.add_argument("--ignore-stdin", action="store_true", help="do not stop when stdin closes (stop by SIGTERM)")
    a = ap.parse_args(argv)
    server = PrefixCachingServer(a.block, a.base_ms / 1e3, a.prefill_us / 1e6, a.decode_ms / 1e3, port=a.port,
                                 frontend_s_per_token=a.frontend_us / 1e6)
    with server:
        print(json.dumps({"url": server.openai_base_url}), flush=True)
        done = threading.Event()
        if not a.ignore_stdin:
            threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        done.wait(a.max_seconds)


if __name__ == "__main__":
    main()
