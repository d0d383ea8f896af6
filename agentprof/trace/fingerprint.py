"""Prompt fingerprints for a sequence of calls whose prompts mostly extend the previous one.

Gives exactly :meth:`agentprof.trace.prompt.PromptHasher.fingerprint`'s result, but reuses the previous
call's block hashes over the segments both prompts share and hashes only the rest (the chain continues from
the last reused hash), so importing a session costs about its new tokens instead of prompt length × calls.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import xxhash

from agentprof.trace.hashing import chain_hashes, to_signed
from agentprof.trace.prompt import Fingerprint, PromptHasher, Segment


class IncrementalFingerprinter:
    """Fingerprints the prompts of one session in call order (any order is correct, call order is fast)."""

    def __init__(self, hasher: PromptHasher, max_cache: int = 65536) -> None:
        self.hasher = hasher
        self.block_size = hasher.block_size
        self._seg: dict[tuple[str, str, str], tuple[array, dict[str, Any]]] = {}
        self._max = max_cache
        self._prev_keys: list[tuple[str, str, str]] = []
        self._prev_ends: list[int] = []  # cumulative token count at the end of each previous segment
        self._prev_hashes: list[int] = []

    def _segment(self, s: Segment) -> tuple[array, dict[str, Any]]:
        key = (s.kind, s.role, s.text)
        hit = self._seg.get(key)
        if hit is None:
            toks = self.hasher.tokens(s.text)
            info = {"kind": s.kind, "role": s.role, "tokens": len(toks),
                    "hash": to_signed(xxhash.xxh3_64_intdigest(s.text.encode("utf-8", "surrogatepass")))}
            if len(self._seg) >= self._max:
                self._seg.clear()
            hit = self._seg[key] = (toks, info)
        return hit

    def fingerprint(self, segments: Sequence[Segment]) -> Fingerprint:
        keys = [(s.kind, s.role, s.text) for s in segments]
        parts = [self._segment(s) for s in segments]
        common = 0
        prev = self._prev_keys
        while common < len(keys) and common < len(prev) and (keys[common] is prev[common] or
                                                             keys[common] == prev[common]):
            common += 1
        shared_tokens = self._prev_ends[common - 1] if common else 0
        reuse = min(shared_tokens // self.block_size, len(self._prev_hashes))
        start_tok = reuse * self.block_size
        tail = array("I")
        pos = 0
        ends: list[int] = []
        for toks, _info in parts:
            n = len(toks)
            if pos + n > start_tok:
                tail.extend(toks[max(0, start_tok - pos):] if pos < start_tok else toks)
            pos += n
            ends.append(pos)
        seed = self._prev_hashes[reuse - 1] if reuse else 0
        hashes = self._prev_hashes[:reuse] + chain_hashes(tail, self.block_size, seed=seed)
        self._prev_keys, self._prev_ends, self._prev_hashes = keys, ends, hashes
        return Fingerprint(list(hashes), pos, [dict(info) for _toks, info in parts])
