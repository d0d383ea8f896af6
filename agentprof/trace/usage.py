"""Token-usage normalizer: every provider's usage fields onto the trace model's OTel meaning.

Trace model: ``input_tokens`` counts *all* input tokens (cached included); ``cache_read_tokens`` and
``cache_write_tokens`` are subsets of it; ``reasoning_tokens`` is a subset of ``output_tokens``.

Provider conventions handled:

- OpenAI chat completions: ``prompt_tokens`` ⊇ ``prompt_tokens_details.cached_tokens`` (subset semantics).
- OpenAI Responses / Codex: ``input_tokens`` ⊇ ``input_tokens_details.cached_tokens`` / ``cached_input_tokens``.
- Anthropic: ``input_tokens`` excludes ``cache_read_input_tokens`` and ``cache_creation_input_tokens``
  (additive semantics), so input = sum of the three.
- Gemini: ``promptTokenCount`` ⊇ ``cachedContentTokenCount``; ``thoughtsTokenCount`` is *in addition to*
  ``candidatesTokenCount``.
- OpenInference ``llm.token_count.*``; OTel ``gen_ai.usage.*`` (current and legacy names); OpenLLMetry
  ``llm.usage.*``. Legacy and OpenLLMetry inputs smaller than their own cached part are read as additive.

Impossible values (negative, beyond a 64-bit integer, not finite) are reported in ``Usage.problems`` (for the
trace's diagnostics) and dropped by ``Usage.usable()``, never silently used. :func:`resolve_streamed_output` picks the real output count of a
response logged several times while streaming (Claude Code's placeholder ``output_tokens``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    input_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    convention: str = "unknown"
    problems: list[str] = field(default_factory=list)

    def usable(self) -> Usage:
        """A copy without the values named in ``problems`` (what goes into the span table)."""
        u = Usage(**{k: v for k, v in self.__dict__.items() if k != "problems"}, problems=list(self.problems))
        for name, v in u.as_columns().items():
            if v is not None and (v < 0 or v > INT64_MAX):
                setattr(u, name, None)
        if u.input_tokens is not None:
            if u.cache_read_tokens is not None and u.cache_read_tokens > u.input_tokens:
                u.cache_read_tokens = None
            if u.cache_write_tokens is not None and (u.cache_read_tokens or 0) + u.cache_write_tokens > u.input_tokens:
                u.cache_write_tokens = None
        if u.reasoning_tokens is not None and u.output_tokens is not None and u.reasoning_tokens > u.output_tokens:
            u.reasoning_tokens = None
        return u

    def as_columns(self) -> dict[str, int | None]:
        return {
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }


def to_mapping(obj: Any) -> dict[str, Any]:
    """Usage objects from SDKs (pydantic models) or plain dicts, as a plain dict."""
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return dump()
        except Exception:
            pass
    return {k: getattr(obj, k) for k in dir(obj) if not k.startswith("_") and not callable(getattr(obj, k, None))}


INT64_MAX = (1 << 63) - 1


class Unreadable(int):
    """A count that is not a finite number (``inf``, ``NaN``): beyond any range, reported with its text."""

    raw: str

    def __new__(cls, raw: str) -> Unreadable:
        obj = super().__new__(cls, 1 << 64)
        obj.raw = raw
        return obj

    def __repr__(self) -> str:
        return self.raw

    __str__ = __repr__


def shown_number(v: int) -> str:
    """An out-of-range count for a message: its text, or ``1e+308`` rather than 309 digits."""
    if isinstance(v, Unreadable) or abs(v) < 10**20:
        return str(v)
    digits = str(abs(v))  # not float(v): a sum of such counts may be beyond any float
    return f"{'-' if v < 0 else ''}{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"


def _int(v: Any) -> int | None:
    """A token count as an int (may be out of range: :func:`_check` reports it), ``None`` when absent or text."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, float):
        return int(v) if math.isfinite(v) else Unreadable(repr(v))
    if isinstance(v, int):
        return int(v)
    return None


def _get(d: Mapping[str, Any], *path: str) -> Any:
    cur: Any = d
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def _check(u: Usage) -> Usage:
    for name, v in u.as_columns().items():
        if v is not None and v < 0:
            u.problems.append(f"negative {name} ({v})")
        elif v is not None and v > INT64_MAX:
            u.problems.append(f"{name} out of range ({shown_number(v)})")
    if any(v is not None and v > INT64_MAX for v in u.as_columns().values()):
        return u  # the relations below mean nothing with a count that is not one
    if u.input_tokens is not None:
        cached = (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0)
        if u.cache_read_tokens is not None and u.cache_read_tokens > u.input_tokens:
            u.problems.append(f"cache read {u.cache_read_tokens} exceeds input {u.input_tokens}")
        elif cached > u.input_tokens:
            u.problems.append(f"cache read + write {cached} exceeds input {u.input_tokens} (double counting?)")
    if u.reasoning_tokens is not None and u.output_tokens is not None and u.reasoning_tokens > u.output_tokens:
        u.problems.append(f"reasoning {u.reasoning_tokens} exceeds output {u.output_tokens}")
    return u


def normalize_usage(raw: Any, provider: str | None = None) -> Usage:
    """Map one provider usage record (dict or SDK object) to the trace model's meaning.

    ``provider`` (``openai``, ``anthropic``, ``gemini``, …) disambiguates records whose keys are shared
    between conventions (``input_tokens`` is additive for Anthropic, inclusive for OpenAI Responses).
    """
    d = to_mapping(raw)
    if not d:
        return Usage()
    prov = (provider or "").lower()

    # OTel GenAI (already normalized) and legacy names
    if any(k.startswith("gen_ai.usage.") for k in d):
        inp = _int(d.get("gen_ai.usage.input_tokens", d.get("gen_ai.usage.prompt_tokens",
                                                              d.get("llm.usage.prompt_tokens"))))
        read = _int(d.get("gen_ai.usage.cache_read.input_tokens", d.get("gen_ai.usage.cache_read_input_tokens")))
        write = _int(d.get("gen_ai.usage.cache_creation.input_tokens", d.get("gen_ai.usage.cache_creation_input_tokens")))
        conv = "otel"
        legacy = "gen_ai.usage.cache_read.input_tokens" not in d and "gen_ai.usage.cache_creation.input_tokens" \
            not in d and ("gen_ai.usage.cache_read_input_tokens" in d or "gen_ai.usage.cache_creation_input_tokens" in d)
        if legacy and inp is not None and (read or 0) + (write or 0) > inp:
            # legacy names (OpenLLMetry before it summed them) may carry Anthropic's additive input_tokens;
            # an input smaller than its own cached part can only be additive. When it is not smaller the
            # record is read as inclusive (OTel meaning), whatever the provider.
            inp += (read or 0) + (write or 0)
            conv = "otel-legacy-anthropic"
        out = _int(d.get("gen_ai.usage.output_tokens", d.get("gen_ai.usage.completion_tokens")))
        if out is None:
            out = _int(d.get("llm.usage.completion_tokens"))
        return _check(Usage(inp, read, write, out, _int(d.get("gen_ai.usage.reasoning.output_tokens",
                                                                d.get("gen_ai.usage.reasoning_tokens"))), conv))

    # OpenLLMetry's own names (llm.usage.*), used alone by older Traceloop instrumentations
    if "llm.usage.prompt_tokens" in d or "llm.usage.completion_tokens" in d:
        inp = _int(d.get("llm.usage.prompt_tokens"))
        read = _int(d.get("llm.usage.cache_read_input_tokens"))
        write = _int(d.get("llm.usage.cache_creation_input_tokens"))
        conv = "openllmetry"
        if inp is not None and (read or 0) + (write or 0) > inp:
            inp += (read or 0) + (write or 0)
            conv = "openllmetry-additive"
        return _check(Usage(inp, read, write, _int(d.get("llm.usage.completion_tokens")),
                            _int(d.get("llm.usage.reasoning_tokens")), conv))

    # OpenInference
    if any(k.startswith("llm.token_count.") for k in d):
        return _check(Usage(
            _int(d.get("llm.token_count.prompt")),
            _int(d.get("llm.token_count.prompt_details.cache_read")),
            _int(d.get("llm.token_count.prompt_details.cache_write")),
            _int(d.get("llm.token_count.completion")),
            _int(d.get("llm.token_count.completion_details.reasoning")),
            "openinference",
        ))

    # Gemini
    if "promptTokenCount" in d or "prompt_token_count" in d:
        def g(camel: str, snake: str) -> int | None:
            return _int(d.get(camel, d.get(snake)))
        cand, thoughts = g("candidatesTokenCount", "candidates_token_count"), g("thoughtsTokenCount", "thoughts_token_count")
        out = None if cand is None and thoughts is None else (cand or 0) + (thoughts or 0)
        return _check(Usage(g("promptTokenCount", "prompt_token_count"),
                            g("cachedContentTokenCount", "cached_content_token_count"), None, out, thoughts, "gemini"))

    # OpenAI chat completions (also LiteLLM / OpenRouter responses)
    if "prompt_tokens" in d:
        inp = _int(d.get("prompt_tokens"))
        read = _int(_get(d, "prompt_tokens_details", "cached_tokens"))
        write = _int(_get(d, "prompt_tokens_details", "cache_write_tokens"))
        conv = "openai-chat"
        # LiteLLM in front of Anthropic adds Anthropic's own fields next to prompt_tokens
        a_read, a_write = _int(d.get("cache_read_input_tokens")), _int(d.get("cache_creation_input_tokens"))
        if a_read is not None and read is None:
            read = a_read
        if a_write is not None and write is None:
            write = a_write
        if (a_read is not None or a_write is not None) and inp is not None:
            # LiteLLM versions differ: prompt_tokens = input + reads + writes (inclusive), = input + reads (writes
            # left out), or a proxy's copy of Anthropic's additive input_tokens. A total smaller than its own
            # cached part can only be the additive one; one that holds the reads but not the writes, the second
            conv = "litellm-anthropic"
            r, w = read or 0, write or 0
            if inp < r:
                inp += r + w
                conv = "litellm-anthropic-additive"
            elif inp < r + w:
                inp += w
                conv = "litellm-anthropic-reads-only"
        return _check(Usage(inp, read, write, _int(d.get("completion_tokens")),
                            _int(_get(d, "completion_tokens_details", "reasoning_tokens")), conv))

    # Anthropic messages
    if prov == "anthropic" or "cache_read_input_tokens" in d or "cache_creation_input_tokens" in d:
        base = _int(d.get("input_tokens"))
        read, write = _int(d.get("cache_read_input_tokens")), _int(d.get("cache_creation_input_tokens"))
        inp = None if base is None and read is None and write is None else (base or 0) + (read or 0) + (write or 0)
        return _check(Usage(inp, read, write, _int(d.get("output_tokens")), None, "anthropic"))

    # OpenAI Responses API / Codex token_count (LiteLLM's Responses objects add the cache writes of providers
    # that bill them, inside the inclusive input_tokens)
    if "input_tokens" in d or "output_tokens" in d:
        read = _int(_get(d, "input_tokens_details", "cached_tokens"))
        if read is None:
            read = _int(d.get("cached_input_tokens"))
        reasoning = _int(_get(d, "output_tokens_details", "reasoning_tokens"))
        if reasoning is None:
            reasoning = _int(d.get("reasoning_output_tokens"))
        return _check(Usage(_int(d.get("input_tokens")), read, _int(_get(d, "input_tokens_details", "cache_write_tokens")),
                            _int(d.get("output_tokens")), reasoning, "openai-responses"))
    return Usage()


@dataclass
class StreamedOutput:
    """The output token count chosen for a response logged several times while it streamed."""

    output_tokens: int | None
    reported: int | None
    source: str  # "final" | "only" | "estimate" | "none"
    problems: list[str] = field(default_factory=list)


def resolve_streamed_output(reports: list[int | None], visible_tokens: int | None = None,
                            tolerance: float = 0.7) -> StreamedOutput:
    """Pick the real ``output_tokens`` of one response from the values its log records carry.

    Some agents (Claude Code) write one record per content block, each with a copy of ``usage``; all but the
    last hold the count known when the block was written (a streaming placeholder, often 1–10). Records of one
    response that disagree mean placeholders: the largest (final) value is used. A final value smaller than
    the tokens of the visible output (text, tool calls) is impossible: it is reported and replaced by that
    visible-token count, a lower bound (``source == "estimate"``). ``visible_tokens`` usually comes from
    another tokenizer than the model's, so only values below ``tolerance`` × visible are called impossible.
    """
    vals = [v for v in (_int(r) for r in reports) if v is not None]
    if not vals:
        if visible_tokens:
            return StreamedOutput(visible_tokens, None, "estimate", ["no output_tokens recorded"])
        return StreamedOutput(None, None, "none")
    final = max(vals)
    problems: list[str] = []
    if final > INT64_MAX:
        return StreamedOutput(None, None, "none", [f"output_tokens out of range ({shown_number(final)})"])
    source = "only" if len(set(vals)) == 1 else "final"
    if final < 0:
        return StreamedOutput(None, final, "none", [f"negative output_tokens ({final})"])
    if visible_tokens is not None and final < tolerance * visible_tokens:
        problems.append(f"output_tokens {final} is a streaming placeholder: the visible output alone is "
                        f"{visible_tokens} tokens")
        return StreamedOutput(visible_tokens, final, "estimate", problems)
    return StreamedOutput(final, final, source, problems)
