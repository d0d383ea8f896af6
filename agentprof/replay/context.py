"""Calls that do not fit the replayed model's context window: counted and said, never hidden.

A trace recorded on a 1M-token model (Claude Sonnet 4/4.5 with the long-context beta) can hold prompts that
the open stand-in it is replayed as could not take at all (Kimi K2.5: 262,144 tokens). The replay says how many
calls that is and what ``--overflow`` has the client do instead (:mod:`agentprof.replay.compaction`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentprof.catalog import ModelSpec


def context_tokens(spec: ModelSpec) -> float | None:
    """``spec``'s context window in tokens; None where the catalog states none."""
    field = spec.fields.get("context")
    return float(field.value) if field is not None and field.value else None


def beyond_context(spec: ModelSpec, inp: np.ndarray, out: np.ndarray) -> dict[str, Any] | None:
    """Calls (prompt plus reply tokens, as arrays over the calls replayed as ``spec``) beyond ``spec``'s
    context window: their count, the largest prompt, the window and its source; None when all fit or the
    catalog states no window."""
    window = context_tokens(spec)
    if window is None or inp.size == 0:
        return None
    need = np.nan_to_num(inp, nan=0.0) + np.nan_to_num(out, nan=0.0)
    over = need > window
    if not over.any():
        return None
    return {"model": spec.key, "calls": int(over.sum()), "of_calls": int(inp.size),
            "max_prompt_tokens": int(np.nanmax(inp[over])), "context_tokens": int(window),
            "context_source": spec.fields["context"].source}


def context_note(spec: ModelSpec, d: dict[str, Any], policy: str = "compact") -> str:
    """The sentence the terminal, JSON and HTML notes carry for :func:`beyond_context`'s result, saying what the
    client does with those calls under ``--overflow`` ``policy`` (the figures: ``beyond_context`` records)."""
    did = {"compact": "the client compacts its history before them, as Claude Code does at 83.5 % of its window",
           "reject": "the server refuses them: those sessions' tasks fail there",
           "stand-in": "what passes one replica's KV pool is compacted"}[policy]
    return (f"{d['calls']:,} of {d['of_calls']:,} call(s) replayed as {spec.display} need more than its "
            f"{d['context_tokens']:,}-token context [{d['context_source']}] (prompts up to "
            f"{d['max_prompt_tokens']:,} tokens): {did} (--overflow {policy})")


def covering_standin(spec: ModelSpec, need: float, extra: tuple[str, ...] = ()) -> tuple[ModelSpec, str | None]:
    """``--overflow stand-in``: ``spec`` when its window covers ``need`` tokens (prompt plus reply), else the
    catalog model with the smallest window that does, and the note that says so; a clear error when none does."""
    from agentprof.catalog import CatalogError, models

    def window(m: ModelSpec) -> float:
        return context_tokens(m) or 0.0

    if window(spec) >= need:
        return spec, None
    fits = sorted((m for m in models(extra).values() if window(m) >= need), key=lambda m: (window(m), m.key))
    if not fits:
        best = max(models(extra).values(), key=window)
        raise CatalogError(f"--overflow stand-in: no catalog model's context covers calls of {int(need):,} tokens "
                           f"(largest: {best.display}, {int(window(best)):,}); use --overflow compact or reject")
    m = fits[0]
    return m, (f"calls up to {int(need):,} tokens exceed {spec.display}'s {int(window(spec)):,}-token context: "
               f"replayed as {m.display} ({int(window(m)):,} tokens; --overflow stand-in)")
