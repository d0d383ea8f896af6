"""Instrumentation of LiteLLM: each ``litellm.completion`` / ``acompletion`` call (chat) and each
``litellm.responses`` / ``aresponses`` call (Responses API) is one model span.

LiteLLM posts to most providers (Anthropic among them, and OpenAI's Responses API) with its own HTTP client,
which the SDK hooks never see; for OpenAI-compatible chat providers it goes through the ``openai`` SDK, whose
hook then stands aside (:data:`~agentprof.capture.model_call.OUTER_CALL`) so the call is counted once. LiteLLM
answers in OpenAI's shapes whatever the provider (chat completions, or Responses API objects and events), so
usage is read in OpenAI's convention; streams (``CustomStreamWrapper``, the Responses streaming iterators) are
observed item by item while the agent iterates them.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from agentprof import semconv as sc
from agentprof.capture import model_call
from agentprof.capture.failsafe import internal_error, warn_once
from agentprof.capture.model_call import OUTER_CALL, ModelCall
from agentprof.capture.sdk_patch import ORIGINAL
from agentprof.capture.session import current

FUNCTIONS = {"completion": ("chat", False), "acompletion": ("chat", True), "responses": ("responses", False),
             "aresponses": ("responses", True)}
"""The LiteLLM functions recorded: the API their requests and answers have the shape of, and whether they are
coroutine functions."""
# LiteLLM provider ids whose OpenTelemetry GenAI name differs (gen_ai.provider.name well-known values)
_OTEL_PROVIDER = {"azure": "azure.ai.openai", "azure_ai": "azure.ai.inference", "bedrock": "aws.bedrock",
                  "vertex_ai": "gcp.vertex_ai", "gemini": "gcp.gemini", "mistral": "mistral_ai", "xai": "x_ai",
                  "watsonx": "ibm.watsonx.ai"}
# LiteLLM's public signatures start completion(model, messages, ...) and responses(input, model, ...)
_POSITIONAL = {"chat": ("model", "messages"), "responses": ("input", "model")}


def _provider_and_model(kw: dict[str, Any]) -> tuple[str, str | None]:
    """LiteLLM's own reading of ``model`` / ``custom_llm_provider``; the ``provider/`` prefix when it fails."""
    model = kw.get("model")
    if not isinstance(model, str):
        return "litellm", None
    custom = kw.get("custom_llm_provider")
    try:
        found = sys.modules["litellm"].get_llm_provider(model=model, custom_llm_provider=custom,
                                                        api_base=kw.get("api_base"))
        name, prov = str(found[0]), str(found[1])
    except Exception:
        prefix, _, rest = model.partition("/")
        prov, name = (custom, model) if isinstance(custom, str) and custom else \
            (prefix, rest) if rest else ("litellm", model)
    return _OTEL_PROVIDER.get(prov, prov), name


def _begin(kw: dict[str, Any], api: str) -> ModelCall | None:
    try:
        prov, model = _provider_and_model(kw)
        request = {"model": model, "stream": kw.get("stream") is True,
                   **{key: kw.get(key) for key in model_call.PROMPT_FIELDS[api]}}
        if api == "chat" and not request["tools"]:
            request["tools"] = kw.get("functions")
        call = model_call.begin(prov, api, request, None, usage_shape="openai")
        if call is not None:
            base = kw.get("api_base") or kw.get("base_url")
            if isinstance(base, str) and base:
                url = urlsplit(base)
                if url.hostname:
                    call.span.set_attribute(sc.SERVER_ADDRESS, url.hostname)
                    if url.port:
                        call.span.set_attribute(sc.SERVER_PORT, url.port)
        return call
    except Exception as e:
        internal_error("starting a litellm model span", e)
        return None


def _fold(args: tuple[Any, ...], kwargs: dict[str, Any], api: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Leading positional arguments (``model, messages`` or ``input, model``) moved into the keywords, so a
    one-shot iterable prompt can be made a list both LiteLLM and agentprof read."""
    names = _POSITIONAL[api]
    if len(args) > len(names):
        return args, kwargs
    kw = dict(zip(names, args, strict=False))
    kw.update(kwargs)
    try:
        model_call.materialize(kw, api)
    except Exception as e:
        internal_error("reading a litellm request", e)
    return (), kw


# --- streams ------------------------------------------------------------------------------------------
_observed: dict[type, type] = {}


def _observed_class(cls: type) -> type:
    """A subclass of LiteLLM's stream class that reports each chunk to the stream's :class:`ModelCall`."""
    sub = _observed.get(cls)
    if sub is not None:
        return sub

    class Observed(cls):  # type: ignore[valid-type, misc]
        __slots__ = ()

        def __next__(self) -> Any:
            call: ModelCall = self._agentprof_call
            token = OUTER_CALL.set(True)
            try:
                item = super().__next__()
            except StopIteration:
                call.stream_done(complete=True)
                raise
            except BaseException as e:
                call.stream_failed(e)
                raise
            finally:
                OUTER_CALL.reset(token)
            call.chunk(item)
            return item

        async def __anext__(self) -> Any:
            call: ModelCall = self._agentprof_call
            token = OUTER_CALL.set(True)
            try:
                item = await super().__anext__()
            except StopAsyncIteration:
                call.stream_done(complete=True)
                raise
            except BaseException as e:
                call.stream_failed(e)
                raise
            finally:
                OUTER_CALL.reset(token)
            call.chunk(item)
            return item

    for name in ("close", "aclose"):
        closer = getattr(cls, name, None)
        if closer is None:
            continue

        def make(closer: Callable[..., Any] = closer) -> Callable[..., Any]:
            @functools.wraps(closer)
            def close(self: Any, *a: Any, **k: Any) -> Any:
                self._agentprof_call.stream_done(complete=False)
                return closer(self, *a, **k)
            return close

        setattr(Observed, name, make())
    Observed.__name__ = Observed.__qualname__ = cls.__name__
    Observed.__module__ = cls.__module__
    _observed[cls] = Observed
    return Observed


def _observe_stream(result: Any, call: ModelCall) -> bool:
    if not (hasattr(result, "__next__") or hasattr(result, "__anext__")):
        return False
    try:
        result._agentprof_call = call
        result.__class__ = _observed_class(type(result))
    except Exception as e:
        warn_once("litellm:stream-layout", f"this litellm version's stream ({type(result).__name__}) cannot be "
                                           f"observed ({type(e).__name__}); its chunks are not recorded")
        return False
    return True


def _finish(call: ModelCall, result: Any) -> Any:
    """Record the response, or observe the stream the agent will iterate; ``result`` itself is returned."""
    try:
        if call.stream:
            if not _observe_stream(result, call):
                call.stream_done(complete=False)
            return result
    except Exception as e:
        internal_error("observing a litellm stream", e)
        return result
    return call.handle_result(result)


# --- the wrappers -------------------------------------------------------------------------------------
def _wrap_sync(original: Callable[..., Any], api: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def completion(*args: Any, **kwargs: Any) -> Any:
        if current() is None or OUTER_CALL.get():
            return original(*args, **kwargs)
        args, kwargs = _fold(args, kwargs, api)
        call = _begin(kwargs, api)
        if call is None:
            return original(*args, **kwargs)
        token, span_token = OUTER_CALL.set(True), call.attach()
        try:
            result = original(*args, **kwargs)
        except BaseException as e:
            call.fail(e)
            raise
        finally:
            call.detach(span_token)
            OUTER_CALL.reset(token)
        if inspect.isawaitable(result):  # completion(..., acompletion=True) hands back a coroutine (responses too)
            return _await_then_finish(call, result)
        return _finish(call, result)

    setattr(completion, ORIGINAL, original)
    return completion


async def _await_then_finish(call: ModelCall, pending: Any) -> Any:
    token, span_token = OUTER_CALL.set(True), call.attach()
    try:
        result = await pending
    except BaseException as e:
        call.fail(e)
        raise
    finally:
        call.detach(span_token)
        OUTER_CALL.reset(token)
    return _finish(call, result)


def _wrap_async(original: Callable[..., Any], api: str) -> Callable[..., Any]:
    @functools.wraps(original)
    async def acompletion(*args: Any, **kwargs: Any) -> Any:
        if current() is None or OUTER_CALL.get():
            return await original(*args, **kwargs)
        args, kwargs = _fold(args, kwargs, api)
        call = _begin(kwargs, api)
        if call is None:
            return await original(*args, **kwargs)
        return await _await_then_finish(call, original(*args, **kwargs))

    setattr(acompletion, ORIGINAL, original)
    return acompletion


def patch(module: ModuleType) -> list[str]:
    """Wrap the :data:`FUNCTIONS` ``module`` defines or re-exports (once each)."""
    done = []
    for name, (api, is_async) in FUNCTIONS.items():
        fn = module.__dict__.get(name)
        if fn is None or not callable(fn) or isinstance(fn, ModuleType):
            continue
        if getattr(fn, ORIGINAL, None) is None:
            setattr(module, name, (_wrap_async if is_async else _wrap_sync)(fn, api))
        done.append(name)
    return done


def unpatch(module: ModuleType) -> None:
    for name in FUNCTIONS:
        original = getattr(module.__dict__.get(name), ORIGINAL, None)
        if original is not None:
            setattr(module, name, original)


# ``litellm`` re-exports the functions; ``litellm.main`` defines the chat ones and ``litellm.responses.main``
# the Responses ones; newer versions route the public chat names through ``litellm.chat_completions.dispatch``
# (absent in older ones, then nothing is patched there)
TARGETS = {"litellm": patch, "litellm.main": patch, "litellm.chat_completions.dispatch": patch,
           "litellm.responses.main": patch}
