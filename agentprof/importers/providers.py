"""Which provider served a model, from its name, when a log does not say."""

from __future__ import annotations

_PREFIXES = (
    ("claude", "anthropic"),
    ("anthropic.", "aws.bedrock"),
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("codex", "openai"),
    ("gemini", "gcp.gemini"),
    ("google/", "openrouter"),
)


def provider_for_model(model: str | None) -> str | None:
    """``claude-*`` -> ``anthropic``, ``gpt-*`` -> ``openai``, …; ``None`` when the name does not tell."""
    if not model:
        return None
    m = model.lower()
    if "/" in m and not m.startswith("google/"):
        m = m.split("/", 1)[1]
    for prefix, provider in _PREFIXES:
        if m.startswith(prefix):
            return provider
    return None
