"""Build small traces with exact timestamps and prompt hashes for the analysis tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentprof import semconv as sc
from agentprof.trace import Trace, TraceMeta, spans_from_records
from agentprof.trace.hashing import chain_hashes

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "traces" / "samples"
S = 1_000_000_000


def prompt_hashes(tokens: list[int], block: int = 64) -> list[int]:
    """Chained block hashes of a token list (agentprof's own scheme)."""
    return chain_hashes(tokens, block)


class TraceBuilder:
    """Span records for one trace; times are given in seconds and stored as nanoseconds."""

    def __init__(self, block_size: int = 64, hash_scheme: str | None = None) -> None:
        self.records: list[dict[str, Any]] = []
        self.block_size = block_size
        self.hash_scheme = hash_scheme
        self._n = 0

    def _id(self) -> str:
        self._n += 1
        return f"s{self._n:04d}"

    def session(self, session_id: str, start: float, end: float, *, parent_session: str | None = None,
                role: str | None = None, parent_span: str | None = None, **attrs: Any) -> str:
        a = {sc.SESSION_ID: session_id, sc.KIND: "agent", **attrs}
        if parent_session:
            a[sc.PARENT_SESSION_ID] = parent_session
        if role:
            a[sc.SESSION_ROLE] = role
        sid = f"agent-{session_id}"
        self.records.append({"record": "span", "trace_id": "t", "span_id": sid, "parent_id": parent_span,
                             "name": f"invoke_agent {session_id}", "kind": "agent",
                             "start_ns": int(round(start * S)), "end_ns": int(round(end * S)), "attributes": a})
        return sid

    def span(self, session_id: str, kind: str, start: float | None, end: float | None, *, parent: str | None = None,
             name: str | None = None, **attrs: Any) -> str:
        sid = self._id()
        a = {sc.SESSION_ID: session_id, sc.KIND: kind, **attrs}
        self.records.append({"record": "span", "trace_id": "t", "span_id": sid,
                             "parent_id": parent or f"agent-{session_id}", "name": name or f"{kind} {sid}",
                             "kind": kind, "start_ns": None if start is None else int(round(start * S)),
                             "end_ns": None if end is None else int(round(end * S)), "attributes": a})
        return sid

    def model(self, session_id: str, start: float | None, end: float | None, *, tokens: list[int] | None = None,
              hashes: list[int] | None = None, prompt_tokens: int | None = None, model: str = "m",
              input_tokens: int | None = None, cache_read: int | None = None, ttft: float | None = None,
              stream: bool | None = None, segments: list[dict[str, Any]] | None = None, provider: str | None = None,
              parent: str | None = None, **attrs: Any) -> str:
        a: dict[str, Any] = {sc.REQUEST_MODEL: model, **attrs}
        if tokens is not None:
            hashes = prompt_hashes(tokens, self.block_size)
            prompt_tokens = len(tokens) if prompt_tokens is None else prompt_tokens
        if hashes is not None:
            a[sc.PROMPT_BLOCK_HASHES] = hashes
        if prompt_tokens is not None:
            a[sc.PROMPT_TOKENS] = prompt_tokens
        if input_tokens is not None:
            a[sc.USAGE_INPUT_TOKENS] = input_tokens
        if cache_read is not None:
            a[sc.USAGE_CACHE_READ_INPUT_TOKENS] = cache_read
        if ttft is not None:
            a[sc.RESPONSE_TIME_TO_FIRST_CHUNK] = ttft
        if stream is not None:
            a[sc.REQUEST_STREAM] = stream
        if segments is not None:
            a[sc.PROMPT_SEGMENTS] = json.dumps(segments)
        if provider is not None:
            a[sc.PROVIDER_NAME] = provider
        return self.span(session_id, "model", start, end, parent=parent, name=f"chat {model}", **a)

    def trace(self) -> Trace:
        extra = {"hash_scheme": self.hash_scheme} if self.hash_scheme else {}
        return Trace(TraceMeta(block_size=self.block_size, extra=extra), spans_from_records(self.records))


def segmented_prompt(parts: list[tuple[str, str, list[int]]], block: int = 64) -> tuple[list[int], list[dict]]:
    """Tokens and ``segments`` for a prompt made of (kind, role, tokens) pieces; segment hash = hash of its
    tokens (as agentprof hashes a segment's text)."""
    tokens: list[int] = []
    segs: list[dict[str, Any]] = []
    for kind, role, toks in parts:
        tokens.extend(toks)
        segs.append({"kind": kind, "role": role, "tokens": len(toks), "hash": hash(tuple(toks)) & 0x7FFFFFFFFFFF})
    return tokens, segs
