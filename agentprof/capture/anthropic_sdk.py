"""Instrumentation of the ``anthropic`` SDK: messages (and beta messages), sync and async.

``create`` (plain and ``stream=True``) and ``parse`` are wrapped at the class level. ``messages.stream(...)``
returns a manager that sends the request when entered (``with client.messages.stream(...) as s:``); its
request function is wrapped so the model span starts there and follows the stream to its end.
``with_raw_response`` / ``with_streaming_response`` go through ``create``; see
:mod:`~agentprof.capture.raw_response`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from agentprof.capture import model_call
from agentprof.capture.failsafe import internal_error, warn_once
from agentprof.capture.sdk_patch import ORIGINAL, patch_method, unpatch_method, wrap_request
from agentprof.capture.session import current

MESSAGES_MODULE = "anthropic.resources.messages.messages"
BETA_MESSAGES_MODULE = "anthropic.resources.beta.messages.messages"
_CLASSES = ("Messages", "AsyncMessages")


def _sync_request(api_request: Callable[[], Any], request: dict[str, Any], resource: Any) -> Callable[[], Any]:
    def send() -> Any:
        return model_call.record("anthropic", "messages", request, resource, api_request)

    return send


async def _async_request(api_request: Any, request: dict[str, Any], resource: Any) -> Any:
    async def send() -> Any:
        return await api_request

    return await model_call.record_async("anthropic", "messages", request, resource, send)


def _hook_manager(manager: Any, request: dict[str, Any], resource: Any) -> None:
    key = next((k for k in vars(manager) if k.endswith("__api_request")), None)
    if key is None:
        warn_once("anthropic:stream-layout", "this anthropic SDK's messages.stream() has an unknown layout; "
                                             "its calls are not recorded")
        return
    api_request = vars(manager)[key]
    if inspect.isawaitable(api_request):
        setattr(manager, key, _async_request(api_request, request, resource))
    else:
        setattr(manager, key, _sync_request(api_request, request, resource))


def wrap_stream(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``Messages.stream`` / ``AsyncMessages.stream`` (both return a manager synchronously)."""
    @functools.wraps(original)
    def stream(self: Any, *args: Any, **kwargs: Any) -> Any:
        if current() is None:
            return original(self, *args, **kwargs)
        try:
            model_call.materialize(kwargs, "messages")
        except Exception as e:
            internal_error("reading an anthropic request", e)
        manager = original(self, *args, **kwargs)
        try:
            _hook_manager(manager, dict(kwargs, stream=True), self)
        except Exception as e:
            internal_error("instrumenting an anthropic message stream", e)
        return manager

    setattr(stream, ORIGINAL, original)
    return stream


def patch_messages(module: ModuleType) -> list[str]:
    done = []
    for cls_name in _CLASSES:
        cls = getattr(module, cls_name, None)
        if cls is None:
            continue
        for name in ("create", "parse"):
            is_async = cls_name.startswith("Async")
            if patch_method(cls, name, lambda original, a=is_async: wrap_request(original, "anthropic", "messages", a)):
                done.append(f"{cls_name}.{name}")
        if patch_method(cls, "stream", wrap_stream):
            done.append(f"{cls_name}.stream")
    return done


def unpatch(module: ModuleType) -> None:
    for cls_name in _CLASSES:
        cls = getattr(module, cls_name, None)
        if cls is not None:
            for name in ("create", "parse", "stream"):
                unpatch_method(cls, name)


TARGETS = {MESSAGES_MODULE: patch_messages, BETA_MESSAGES_MODULE: patch_messages}
