"""Provider prompt-cache rules (TTL, minimum cacheable prompt) used by the miss explainer and the simulator.

Figures, as documented by the providers (see ``docs/ANALYSIS.md`` for the sources):

- Anthropic (Claude, also via Bedrock/Vertex): entries live 5 minutes from last use (refreshed on every hit),
  or 1 hour with ``ttl: "1h"``. Minimum cacheable prompt: 1024 tokens (Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4,
  Sonnet 3.7, Sonnet 3.5, Opus 3), 2048 (Sonnet 4.6, Haiku 3.5, Haiku 3), 4096 (Opus 4.5, Opus 4.6, Haiku 4.5).
- OpenAI: automatic for prompts of 1024 tokens or more, hits in 128-token steps; cached prefixes usually stay
  5–10 minutes after last use (up to an hour off-peak), modelled as 5 minutes.
- Google Gemini implicit caching: no documented TTL; the documented minimum has varied by model and over time
  (1024–4096); agentprof uses the lowest, 1024, so it never blames the minimum wrongly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

ANTHROPIC_TTL_S = 300.0
ANTHROPIC_TTL_1H_S = 3600.0
OPENAI_TTL_S = 300.0


@dataclass(frozen=True)
class ProviderCache:
    """How one provider's prompt cache behaves for one model."""

    family: str  # anthropic | openai | google | unknown
    ttl_s: float | None  # None: not documented
    min_tokens: int
    step_tokens: int = 1
    source: str = ""


_ANTHROPIC_MIN = (
    (re.compile(r"opus-4[-.][56]|opus-4\.[56]|haiku-4[-.]5"), 4096),
    (re.compile(r"sonnet-4[-.]6|haiku-3|3[-.]5-haiku|3-haiku"), 2048),
)


def family_of(model: str | None, provider: str | None = None) -> str:
    """``anthropic``, ``openai``, ``google`` or ``unknown`` from the model name (then the provider)."""
    m = (model or "").lower()
    p = (provider or "").lower()
    if "claude" in m or p.startswith("anthropic"):
        return "anthropic"
    if re.search(r"(^|[/.])(gpt-|o[134]\b|o[134]-|codex|chatgpt)", m) or p in ("openai", "azure.ai.openai"):
        return "openai"
    if "gemini" in m or p.startswith("gcp.") or p == "google":
        return "google"
    return "unknown"


@lru_cache(maxsize=1024)
def provider_cache(model: str | None, provider: str | None = None, one_hour: bool = False) -> ProviderCache:
    """The prompt-cache rules for ``model`` (``one_hour``: the trace shows 1-hour cache writes)."""
    fam = family_of(model, provider)
    m = (model or "").lower()
    if fam == "anthropic":
        min_tokens = 1024
        for pat, n in _ANTHROPIC_MIN:
            if pat.search(m):
                min_tokens = n
                break
        return ProviderCache(fam, ANTHROPIC_TTL_1H_S if one_hour else ANTHROPIC_TTL_S, min_tokens, 1,
                             "Anthropic prompt caching docs: 5 min TTL refreshed on hit (1 h option); "
                             "minimum 1024-4096 tokens by model")
    if fam == "openai":
        return ProviderCache(fam, OPENAI_TTL_S, 1024, 128,
                             "OpenAI prompt caching guide: prompts >= 1024 tokens, 128-token steps, "
                             "5-10 min after last use")
    if fam == "google":
        return ProviderCache(fam, None, 1024, 1, "Gemini implicit caching docs: minimum 1024-4096 by model, "
                             "no documented TTL")
    return ProviderCache(fam, None, 0, 1, "unknown provider: no TTL or minimum assumed")
