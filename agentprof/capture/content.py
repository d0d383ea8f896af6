"""Opt-in content capture (``capture_content=True``): requests and responses as the JSON the OpenTelemetry
GenAI conventions define for ``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.system_instructions`` and ``gen_ai.tool.definitions``. Never called unless the user opted in."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentprof import semconv as sc

SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def _text(s: Any) -> dict[str, Any]:
    return {"type": "text", "content": s if isinstance(s, str) else _dumps(s)}


def _parts(content: Any) -> list[dict[str, Any]]:
    """Provider content (string or typed parts, any of the three APIs) as OTel message parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [_text(content)]
    if isinstance(content, Mapping):
        content = [content]
    parts: list[dict[str, Any]] = []
    for p in content:
        if not isinstance(p, Mapping):
            parts.append(_text(str(p)))
            continue
        t = p.get("type")
        if t in ("text", "input_text", "output_text"):
            parts.append(_text(p.get("text", "")))
        elif t == "tool_use":
            parts.append({"type": "tool_call", "id": p.get("id"), "name": p.get("name"), "arguments": p.get("input")})
        elif t == "tool_result":
            parts.append({"type": "tool_call_response", "id": p.get("tool_use_id"), "response": p.get("content")})
        elif t in ("thinking", "reasoning"):
            parts.append({"type": "reasoning", "content": p.get("thinking") or p.get("summary") or ""})
        elif t == "function_call":
            parts.append({"type": "tool_call", "id": p.get("call_id"), "name": p.get("name"),
                          "arguments": p.get("arguments")})
        elif t == "function_call_output":
            parts.append({"type": "tool_call_response", "id": p.get("call_id"), "response": p.get("output")})
        else:
            parts.append({"type": str(t or "unknown"), "content": p})
    return parts


def _chat_message(m: Mapping[str, Any]) -> dict[str, Any]:
    role = m.get("role", "user")
    parts = _parts(m.get("content"))
    for tc in m.get("tool_calls") or ():
        fn = tc.get("function", {}) if isinstance(tc, Mapping) else {}
        parts.append({"type": "tool_call", "id": tc.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")})
    if role == "tool":
        parts = [{"type": "tool_call_response", "id": m.get("tool_call_id"),
                  "response": m.get("content") if isinstance(m.get("content"), str) else _dumps(m.get("content"))}]
    return {"role": role, "parts": parts}


def input_content(api: str, request: Mapping[str, Any]) -> dict[str, str]:
    """Content attributes of a (plain-data) request."""
    out: dict[str, str] = {}
    system: Any = None
    if api == "chat":
        messages = [_chat_message(m) for m in request.get("messages") or [] if isinstance(m, Mapping)]
    elif api == "messages":
        messages = [{"role": m.get("role", "user"), "parts": _parts(m.get("content"))}
                    for m in request.get("messages") or [] if isinstance(m, Mapping)]
        system = request.get("system")
    else:
        inp = request.get("input")
        if isinstance(inp, str):
            messages = [{"role": "user", "parts": [_text(inp)]}]
        else:
            messages = []
            for item in inp or []:
                if not isinstance(item, Mapping):
                    continue
                if item.get("type", "message") == "message":
                    messages.append({"role": item.get("role", "user"), "parts": _parts(item.get("content"))})
                else:
                    role = "tool" if str(item.get("type", "")).endswith("_output") else "assistant"
                    messages.append({"role": role, "parts": _parts(item)})
        system = request.get("instructions")
    out[sc.INPUT_MESSAGES] = _dumps(messages)
    if system:
        out[SYSTEM_INSTRUCTIONS] = _dumps(_parts(system))
    if request.get("tools"):
        out[TOOL_DEFINITIONS] = _dumps(request["tools"])
    return out


def output_messages(api: str, response: Mapping[str, Any]) -> str:
    """``gen_ai.output.messages`` of a (plain-data) response."""
    msgs: list[dict[str, Any]] = []
    if api == "chat":
        for ch in response.get("choices") or []:
            m = _chat_message(ch.get("message") or {})
            m["role"] = m.get("role") or "assistant"
            m["finish_reason"] = ch.get("finish_reason")
            msgs.append(m)
    elif api == "messages":
        msgs.append({"role": "assistant", "parts": _parts(response.get("content")),
                     "finish_reason": response.get("stop_reason")})
    else:
        parts: list[dict[str, Any]] = []
        for item in response.get("output") or []:
            if isinstance(item, Mapping) and item.get("type") == "message":
                parts.extend(_parts(item.get("content")))
            elif isinstance(item, Mapping):
                parts.extend(_parts(item))
        msgs.append({"role": "assistant", "parts": parts, "finish_reason": response.get("status")})
    return _dumps(msgs)
