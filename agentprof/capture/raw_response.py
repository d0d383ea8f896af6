"""The SDKs' raw-response wrappers (``with_raw_response`` / ``with_streaming_response``) seen from a model call.

Both SDKs hand back an object holding the HTTP response whose ``.parse()`` builds the result a plain ``create``
returns and keeps it per target type, so later ``.parse()`` calls return that same object. agentprof relies on
that cache: where the body is already in (``with_raw_response``) or parsing reads nothing (an SSE stream), it
parses once right away and reads usage from, or observes, the very object the agent's ``.parse()`` will get.
Where the body is still the agent's to read (``with_streaming_response`` without ``stream=True``), it waits
for the agent's own ``.parse()`` (or the response's ``close()``) instead. Nothing here may raise into the agent.
"""

from __future__ import annotations

import inspect
import weakref
from typing import TYPE_CHECKING, Any

from agentprof.capture.failsafe import warn_once

if TYPE_CHECKING:
    from agentprof.capture.model_call import ModelCall

READY = "ready"  # parsing now reads nothing the agent still needs
LAZY = "lazy"  # the body is unread: only the agent may start reading it
FAILED = object()  # parse_now / parse_async could not parse


def _is_sse(raw: Any) -> bool:
    for name in ("_stream", "_is_sse_stream"):  # openai's legacy wrapper / the newer APIResponse classes
        value = raw.__dict__.get(name)
        if isinstance(value, bool):
            return value
    return False


def _body_read(raw: Any) -> bool:
    try:
        raw.http_response.content  # noqa: B018 - raises while the body is unread
        return True
    except Exception:
        return False


def kind(obj: Any) -> str | None:
    """:data:`READY` or :data:`LAZY` for an SDK raw-response wrapper, ``None`` for anything else."""
    try:
        if not isinstance(obj.__dict__.get("_parsed_by_type"), dict) or "http_response" not in obj.__dict__ \
                or not callable(getattr(type(obj), "parse", None)):
            return None
        return READY if _is_sse(obj) or _body_read(obj) else LAZY
    except Exception:
        return None


def needs_await(obj: Any) -> bool:
    """A ready wrapper whose ``.parse()`` is a coroutine (the anthropic async client's ``AsyncAPIResponse``)."""
    return kind(obj) == READY and inspect.iscoroutinefunction(type(obj).parse)


def _failed(provider: str, err: BaseException) -> object:
    warn_once(f"raw-response:{provider}:{type(err).__name__}",
              f"could not parse a {provider} raw response ({type(err).__name__}: {err}); its model span has no "
              "usage (the agent's own .parse() behaves as without agentprof)")
    return FAILED


def parse_now(raw: Any, provider: str) -> Any:
    """``raw.parse()`` (cached by the SDK for the agent's own call), or :data:`FAILED` after one warning."""
    try:
        return raw.parse()
    except Exception as e:
        return _failed(provider, e)


async def parse_async(raw: Any, provider: str) -> Any:
    """:func:`parse_now` for an awaitable ``.parse()`` (the body is already read, so this never waits on I/O)."""
    try:
        return await raw.parse()
    except Exception as e:
        return _failed(provider, e)


def follow_close(raw: Any, call: ModelCall) -> None:
    """If the agent closes a response whose body is still open, the call ends there (a stream it did not read to
    the end is incomplete; a call already ended stays as it was)."""
    cls_close = getattr(type(raw), "close", None)
    if cls_close is None or _body_read(raw):
        return
    ref = weakref.ref(raw)
    if inspect.iscoroutinefunction(cls_close):
        async def aclose() -> None:
            call.stream_done(complete=not call.stream)
            r = ref()
            if r is not None:
                await cls_close(r)

        raw.close = aclose
    else:
        def close() -> None:
            call.stream_done(complete=not call.stream)
            r = ref()
            if r is not None:
                cls_close(r)

        raw.close = close


def follow_lazy(raw: Any, call: ModelCall) -> None:
    """Record what the agent's own ``.parse()`` returns; a ``close()`` before that ends the call without usage."""
    cls_parse = type(raw).parse
    ref = weakref.ref(raw)
    if inspect.iscoroutinefunction(cls_parse):
        async def aparse(*args: Any, **kwargs: Any) -> Any:
            out = await cls_parse(ref(), *args, **kwargs)
            if not args and not kwargs:
                call.lazy_parsed(out)
            return out

        raw.parse = aparse
    else:
        def parse(*args: Any, **kwargs: Any) -> Any:
            out = cls_parse(ref(), *args, **kwargs)
            if not args and not kwargs:
                call.lazy_parsed(out)
            return out

        raw.parse = parse
    follow_close(raw, call)
