"""Class-level wrappers for SDK methods that send a model request.

A wrapped method checks for an active profile (one context-variable lookup) and otherwise calls straight
through. Patching is idempotent (the original is kept on the wrapper) and skips methods an SDK version
does not have.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from agentprof.capture import model_call
from agentprof.capture.session import current

ORIGINAL = "__agentprof_original__"


def wrap_request(original: Callable[..., Any], provider: str, api: str, is_async: bool = False) -> Callable[..., Any]:
    """Wrap a method that sends one request and returns a response or a stream (``create``, ``parse``).

    ``is_async``: the method returns an awaitable (SDK async methods are often plain functions returning a
    coroutine, so the class tells, not ``inspect``).
    """
    if is_async or inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def async_method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if current() is None:
                return await original(self, *args, **kwargs)
            return await model_call.record_async(provider, api, kwargs, self, lambda: original(self, *args, **kwargs))

        setattr(async_method, ORIGINAL, original)
        return async_method

    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if current() is None:
            return original(self, *args, **kwargs)
        return model_call.record(provider, api, kwargs, self, lambda: original(self, *args, **kwargs))

    setattr(method, ORIGINAL, original)
    return method


def patch_method(cls: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``cls.name`` by ``make(original)`` once; False when the class has no such method."""
    original = cls.__dict__.get(name)
    if original is None or not callable(original):
        return False
    if getattr(original, ORIGINAL, None) is not None:
        return True
    setattr(cls, name, make(original))
    return True


def unpatch_method(cls: Any, name: str) -> None:
    current_fn = cls.__dict__.get(name)
    original = getattr(current_fn, ORIGINAL, None)
    if original is not None:
        setattr(cls, name, original)
