"""Instrumentation of the ``openai`` SDK: chat completions and the Responses API, sync and async.

Patched at the class level (``Completions``/``AsyncCompletions``, ``Responses``/``AsyncResponses``):
``create`` (plain and ``stream=True``) and ``parse``. The ``.stream(...)`` helpers send their request through
``create``, so they are recorded too, as one call each. Raw-response wrappers (``with_raw_response``,
``with_streaming_response``) go through the same methods; :mod:`~agentprof.capture.raw_response` reads them.
"""

from __future__ import annotations

from types import ModuleType

from agentprof.capture.sdk_patch import patch_method, unpatch_method, wrap_request

CHAT_MODULE = "openai.resources.chat.completions.completions"
RESPONSES_MODULE = "openai.resources.responses.responses"
_METHODS = ("create", "parse")


def _patch(module: ModuleType, classes: tuple[str, ...], api: str) -> list[str]:
    done = []
    for cls_name in classes:
        cls = getattr(module, cls_name, None)
        if cls is None:
            continue
        for name in _METHODS:
            is_async = cls_name.startswith("Async")
            if patch_method(cls, name, lambda original, a=is_async: wrap_request(original, "openai", api, a)):
                done.append(f"{cls_name}.{name}")
    return done


def patch_chat(module: ModuleType) -> list[str]:
    return _patch(module, ("Completions", "AsyncCompletions"), "chat")


def patch_responses(module: ModuleType) -> list[str]:
    return _patch(module, ("Responses", "AsyncResponses"), "responses")


def unpatch(module: ModuleType) -> None:
    for cls_name in ("Completions", "AsyncCompletions", "Responses", "AsyncResponses"):
        cls = getattr(module, cls_name, None)
        if cls is not None:
            for name in _METHODS:
                unpatch_method(cls, name)


TARGETS = {CHAT_MODULE: patch_chat, RESPONSES_MODULE: patch_responses}
