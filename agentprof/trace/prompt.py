"""Turn a model request's prompt into segments, tokens and chained block hashes (text is never stored).

Capture and every importer go through here, so the same prompt gives the same hashes whichever way it
reached agentprof. Provider markers that are not prompt content (``cache_control``) are dropped before
hashing. Segment order follows how providers lay out the cached prefix: tool definitions, then system,
then messages.
"""

from __future__ import annotations

import json
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import xxhash

from agentprof.trace.hashing import DEFAULT_BLOCK_SIZE, chain_hashes, to_signed
from agentprof.trace.tokenizer import Tokenizer, get_tokenizer

NON_CONTENT_KEYS = frozenset({"cache_control"})
"""Keys that providers accept in a prompt but that are not tokens the model sees."""


@dataclass(frozen=True)
class Segment:
    """One piece of a prompt: ``kind`` is ``tools``, ``system`` or ``message``; ``role`` as sent."""

    kind: str
    role: str
    text: str


@dataclass
class Fingerprint:
    """What agentprof keeps of a prompt: chained block hashes, token count, per-segment sizes and hashes."""

    block_hashes: list[int]
    tokens: int
    segments: list[dict[str, Any]] = field(default_factory=list)


def canonical_json(obj: Any) -> str:
    """Deterministic JSON of ``obj`` with non-content keys removed at every depth."""
    return json.dumps(_strip(obj), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _strip(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _strip(v) for k, v in obj.items() if k not in NON_CONTENT_KEYS}
    if isinstance(obj, (list, tuple)):
        return [_strip(v) for v in obj]
    return obj


def content_text(content: Any) -> str:
    """Flatten provider message content (a string or a list of typed parts) to the text the model reads."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(t for t in (content_text(p) for p in content) if t)
    if isinstance(content, Mapping):
        t = content.get("type")
        if t in ("text", "input_text", "output_text", "summary_text"):
            return str(content.get("text", ""))
        if t == "thinking":
            return str(content.get("thinking", ""))
        if t == "redacted_thinking":
            return str(content.get("data", ""))
        if t == "tool_use":
            return f"[tool_use {content.get('name', '')} {content.get('id', '')}] {canonical_json(content.get('input', {}))}"
        if t == "tool_result":
            return f"[tool_result {content.get('tool_use_id', '')}] {content_text(content.get('content'))}"
        if t in ("function_call", "custom_tool_call"):
            args = content.get("arguments", content.get("input", ""))
            return f"[call {content.get('name', '')} {content.get('call_id', '')}] {args if isinstance(args, str) else canonical_json(args)}"
        if t in ("function_call_output", "custom_tool_call_output"):
            out = content.get("output", "")
            return f"[output {content.get('call_id', '')}] {out if isinstance(out, str) else content_text(out)}"
        if t == "reasoning":
            enc = content.get("encrypted_content")
            if enc:
                return str(enc)
            return content_text(content.get("summary") or content.get("content"))
        if t in ("image", "image_url", "input_image"):
            return f"[image {xxhash.xxh3_64_hexdigest(canonical_json(content).encode())}]"
        if "text" in content and isinstance(content["text"], str):
            return content["text"]
        return canonical_json(content)
    return str(content)


def _tools_segment(tools: Sequence[Any] | None) -> list[Segment]:
    return [Segment("tools", "", canonical_json(list(tools)))] if tools else []


def openai_chat_segments(messages: Iterable[Mapping[str, Any]], tools: Sequence[Any] | None = None) -> list[Segment]:
    """Segments of an OpenAI chat-completions request (``messages`` and ``tools``)."""
    segs = _tools_segment(tools)
    for m in messages:
        role = str(m.get("role", ""))
        text = content_text(m.get("content"))
        for tc in m.get("tool_calls") or ():
            fn = tc.get("function", {}) if isinstance(tc, Mapping) else {}
            text += f"\n[call {fn.get('name', '')} {tc.get('id', '')}] {fn.get('arguments', '')}"
        if m.get("tool_call_id"):
            text = f"[result {m.get('tool_call_id')}] {text}"
        kind = "system" if role in ("system", "developer") else "message"
        segs.append(Segment(kind, role, f"{role}: {text}"))
    return segs


def anthropic_segments(
    system: Any, messages: Iterable[Mapping[str, Any]], tools: Sequence[Any] | None = None
) -> list[Segment]:
    """Segments of an Anthropic messages request (``system``, ``messages``, ``tools``)."""
    segs = _tools_segment(tools)
    if system:
        segs.append(Segment("system", "system", f"system: {content_text(system)}"))
    for m in messages:
        role = str(m.get("role", ""))
        segs.append(Segment("message", role, f"{role}: {content_text(m.get('content'))}"))
    return segs


def responses_segments(instructions: Any, input: Any, tools: Sequence[Any] | None = None) -> list[Segment]:
    """Segments of an OpenAI Responses request (``instructions``, ``input`` items, ``tools``)."""
    segs = _tools_segment(tools)
    if instructions:
        segs.append(Segment("system", "system", f"system: {content_text(instructions)}"))
    if isinstance(input, str):
        segs.append(Segment("message", "user", f"user: {input}"))
        return segs
    for item in input or ():
        if not isinstance(item, Mapping):
            dump = getattr(item, "model_dump", None)
            item = dump() if callable(dump) else {"type": "message", "role": "user", "content": str(item)}
        t = item.get("type", "message")
        if t == "message":
            role = str(item.get("role", "user"))
            kind = "system" if role in ("system", "developer") else "message"
            segs.append(Segment(kind, role, f"{role}: {content_text(item.get('content'))}"))
        else:
            role = "tool" if t.endswith("_output") else "assistant"
            segs.append(Segment("message", role, f"{role}: {content_text(item)}"))
    return segs


class PromptHasher:
    """Tokenize and hash prompts; per-segment token ids are cached, as agent prompts repeat segments."""

    def __init__(self, tokenizer: Tokenizer | str | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                 cache_size: int = 8192) -> None:
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None and not isinstance(tokenizer, str) \
            else get_tokenizer(tokenizer)
        self.block_size = block_size
        self._cache: OrderedDict[bytes, array] = OrderedDict()
        self._cache_size = cache_size

    def tokens(self, text: str) -> array:
        key = xxhash.xxh3_128_digest(text.encode("utf-8", "surrogatepass"))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        arr = array("I", self.tokenizer.encode(text))
        self._cache[key] = arr
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return arr

    def fingerprint(self, segments: Sequence[Segment]) -> Fingerprint:
        stream = array("I")
        seg_info: list[dict[str, Any]] = []
        for s in segments:
            toks = self.tokens(s.text)
            stream.extend(toks)
            seg_info.append({"kind": s.kind, "role": s.role, "tokens": len(toks),
                             "hash": to_signed(xxhash.xxh3_64_intdigest(s.text.encode("utf-8", "surrogatepass")))})
        return Fingerprint(chain_hashes(stream, self.block_size), len(stream), seg_info)
