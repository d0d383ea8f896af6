"""One load test from start to end: the workload, the prompt words checked, the run, the figures, the prediction."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprof.errors import AgentprofError
from agentprof.loadtest.client import CallRecord, Endpoint, RunRecords, run
from agentprof.loadtest.prompts import WORDS, PromptSynth, check_words, probe_words
from agentprof.loadtest.results import Price, catalog_price, summarize
from agentprof.loadtest.workload import Workload, prepare
from agentprof.report.measured import MARK, VERSION
from agentprof.trace.schema import Trace

APIS = ("chat", "responses")


@dataclass
class LoadtestResult:
    """The measured figures (``measured``), the prediction and its error per figure (``--predict``), and what
    the run assumed."""

    measured: dict[str, Any]
    workload: Workload
    records: RunRecords
    endpoint: Endpoint
    prompts: dict[str, Any]
    predicted: dict[str, Any] | None = None
    error: dict[str, float | None] | None = None
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The result document (``--json``, ``--out``): ``MARK`` first, so the report can tell the file."""
        return {MARK: VERSION, "endpoint": self.endpoint.url, "model": self.endpoint.model, "api": self.endpoint.api,
                "sources": self.sources, **self.measured, "prompts": self.prompts, "predicted": self.predicted,
                "error": self.error, "notes": self.notes}


def root_url(url: str) -> str:
    """The server root of an OpenAI base URL (``http://host:port/v1`` -> ``http://host:port``)."""
    u = url.rstrip("/")
    return u[:-3] if u.endswith("/v1") else u


def preflight(ep: Endpoint) -> None:
    """A clear error now, instead of every call failing, when nothing answers at the endpoint."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - the test extra installs it
        raise AgentprofError("agentprof loadtest needs httpx: pip install 'agentprof[loadtest]'") from None

    try:
        httpx.get(ep.url.rstrip("/") + "/models", timeout=10.0, headers={"Authorization": f"Bearer {ep.api_key}"})
    except httpx.HTTPError as e:
        raise AgentprofError(f"cannot reach {ep.url}: {type(e).__name__}: {e}") from None


def _tokenize_count(ep: Endpoint, words: tuple[str, ...], n: int, timeout: float = 10.0) -> int | None:
    """The server's ``/tokenize`` (vLLM's, SGLang's) token count of one user message of ``n`` synthetic words, chat
    template included; None where it has no such route or answers otherwise."""
    import httpx

    body = {"model": ep.model, "messages": [{"role": "user", "content": probe_words(words, n)}]}
    try:
        r = httpx.post(root_url(ep.url) + "/tokenize", json=body, timeout=timeout,
                       headers={"Authorization": f"Bearer {ep.api_key}"})
        c = r.json().get("count") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        c = None
    return c if isinstance(c, int) else None


def probe_tokenize(ep: Endpoint, words: tuple[str, ...]) -> tuple[int | None, float | None]:
    """(chat-template tokens, server tokens per synthetic word) from the server's ``/tokenize`` (vLLM's, SGLang's),
    or (None, None) where it has none."""
    counts = []
    for n in (64, 128):
        c = _tokenize_count(ep, words, n)
        if c is None:
            return None, None
        counts.append(c)
    per_word = (counts[1] - counts[0]) / 64
    return counts[0] - round(64 * per_word), per_word


FRONTEND_PROBE_WORDS = (1_000, 9_000)
"""Prompt sizes (synthetic words) of the two ``/tokenize`` calls whose time difference prices the frontend."""


def probe_frontend(ep: Endpoint, words: tuple[str, ...], repeats: int = 3) -> float | None:
    """Seconds the server's frontend spends per prompt token (chat template and tokenizer), from its ``/tokenize``:
    the median time of a long prompt's call less a short one's, over their token-count difference (the network
    and fixed request time cancel); None where it has no ``/tokenize`` or the difference is not positive. What a
    chat call also pays before its prefill (a real server parses the request as well: a lower bound)."""
    import statistics
    import time

    times: list[float] = []
    counts: list[int] = []
    for n in FRONTEND_PROBE_WORDS:
        taken = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            c = _tokenize_count(ep, words, n, timeout=30.0)
            if c is None:
                return None
            taken.append(time.perf_counter() - t0)
        times.append(statistics.median(taken))
        counts.append(c)
    dt, dn = times[1] - times[0], counts[1] - counts[0]
    return dt / dn if dt > 0 and dn > 0 else None


def loadtest(trace: Trace, endpoint: Endpoint, concurrency: int = 1, sessions: int | None = None,
             max_calls: int | None = None, cap_wait: float | None = None, time_scale: float = 1.0,
             predict: str | None = None, predict_model: str | None = None, tokenizer: str | None = None,
             price: Price | None = None, template_tokens: int | None = None, seed: int | None = None,
             on_call: Callable[[CallRecord], None] = lambda r: None,
             on_start: Callable[[int], None] = lambda n: None) -> LoadtestResult:
    """Replay ``trace``'s sessions against ``endpoint`` closed-loop and measure them (see the package docstring).
    ``seed`` fixes the prompt text (default: new text each run, so no run finds another's blocks cached);
    ``on_start(calls to send)`` and ``on_call(record)`` report progress."""
    if endpoint.api not in APIS:
        raise AgentprofError(f"unknown --api {endpoint.api!r}: expected {' or '.join(APIS)}")
    wl = prepare(trace, concurrency, sessions, max_calls, cap_wait, time_scale)
    if predict:  # an unknown system is an error now, not after the run
        from agentprof.catalog.hardware import load_catalog

        load_catalog().system(predict)
    notes = list(wl.notes)
    words = WORDS
    prompts: dict[str, Any] = {"words": len(WORDS), "block_size": wl.plan.block_size}
    if tokenizer:
        from agentprof.trace.tokenizer import get_tokenizer

        try:
            tok = get_tokenizer(tokenizer)
        except (ValueError, OSError, ImportError) as e:
            raise AgentprofError(f"cannot load --tokenizer {tokenizer!r}: {e}") from None
        words = check_words(tok, wl.plan.block_size)
        prompts.update(tokenizer=tok.name, words=len(words))
    preflight(endpoint)
    overhead, per_word = probe_tokenize(endpoint, words)
    prompts["server_tokens_per_word"] = per_word
    prompts["server_frontend_s_per_token"] = probe_frontend(endpoint, words) if per_word is not None else None
    if template_tokens is not None:
        overhead = template_tokens
    elif overhead is None:
        notes.append("the server has no /tokenize: chat-template tokens not subtracted (see prompt_tokens.drift)")
    if per_word is not None and abs(per_word - 1.0) > 0.01:
        notes.append(f"the server reads a synthetic word as {per_word:.2f} tokens, not 1: prompt lengths and "
                     "block boundaries drift (pass the model's --tokenizer to keep only one-token words)")
    prompts["template_tokens"] = max(overhead or 0, 0)
    salt = secrets.randbits(32) if seed is None else seed
    prompts["seed"] = salt
    synth = PromptSynth(wl.plan, words, max(overhead or 0, 0), salt)
    synth.warm()
    on_start(int(wl.sent.sum()))
    rec = asyncio.run(run(wl, synth, endpoint, on_call))
    notes.extend(rec.notes)
    measured = summarize(wl, rec, price if price is not None else catalog_price(endpoint.model))
    if measured["cache_read_share"] is None and measured["calls"]["ok"]:
        notes.append("the server reports no cached_tokens in its usage (vLLM: start it with "
                     "--enable-prompt-tokens-details)")
    if measured["cost_per_task"] is None and measured["tasks"]["completed"]:
        notes.append(f"no catalog price for {endpoint.model!r}: pass --price IN,OUT[,CACHED] for cost per task")
    res = LoadtestResult(measured, wl, rec, endpoint, prompts, notes=notes,
                         sources=[Path(s).name for s in trace.meta.sources])
    if predict:
        from agentprof.loadtest.predict import errors
        from agentprof.loadtest.predict import predict as simulate

        try:
            res.predicted = simulate(wl, predict, predict_model or endpoint.model)
        except AgentprofError as e:  # the measurement stands without it
            notes.append(f"no prediction on {predict}: {e}")
        else:
            res.error = errors({**measured, "prompts": prompts}, res.predicted)
    return res
