"""Speculative decoding a what-if can switch on (``speculative.toml``): per model and method, the drafter's draft
tokens per step, the tokens kept per step and the drafter's size, each sourced with its range.

Read by :mod:`agentprof.replay.speculative`; every number is ``{value, source}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.hardware import Bounded, _numbers, _text

SPECULATIVE_FILE = CATALOG_DIR / "speculative.toml"
METHODS = ("eagle3",)


@dataclass(frozen=True)
class Drafter:
    """One model's speculative decoding by one method."""

    model: str
    method: str
    source: str
    draft_tokens: Bounded
    accept: Bounded
    drafter_params: Bounded
    pass_layers: Bounded


@lru_cache(maxsize=4)
def load_speculative(path: Path = SPECULATIVE_FILE) -> dict[tuple[str, str], Drafter]:
    """Parse ``speculative.toml`` (or ``path``) into ``{(model, method): Drafter}``; a malformed entry is one
    :class:`CatalogError` line naming the key."""
    data = read_toml(path)
    out = {}
    for name, methods in data.items():
        if not isinstance(methods, dict):
            raise CatalogError(f"{path}: {name}: expected a table of methods")
        for method, t in methods.items():
            w = f"{path}: {name}.{method}"
            if not isinstance(t, dict):
                raise CatalogError(f"{w}: expected a table")
            n = _numbers(t, w, ("draft_tokens", "accept", "drafter_params", "pass_layers"), (),
                         ("model", "method", "source"))
            model, meth, src = (_text(t, k, w) for k in ("model", "method", "source"))
            if meth not in METHODS:
                raise CatalogError(f"{w}: method must be one of {', '.join(METHODS)}, got {meth!r}")
            if n["accept"].value < 1 or n["accept"].value > 1 + n["draft_tokens"].value:
                raise CatalogError(f"{w}: accept must be between 1 and 1 + draft_tokens, got {n['accept'].value}")
            out[(model, meth)] = Drafter(model, meth, src, n["draft_tokens"], n["accept"], n["drafter_params"],
                                         n["pass_layers"])
    return out
