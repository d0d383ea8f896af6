"""Opt-in ``instrument_json=True``: ``json.loads`` calls made by the agent inside a profile become ``parse``
spans named ``json.loads``.

``json.loads`` is replaced while at least one such profile is active and restored after the last one ends.
Calls from SDK and HTTP internals (the ``openai``/``anthropic`` clients decoding responses, ``httpx``,
OpenTelemetry, agentprof itself) are not recorded: that time belongs to the model call. Code that bound
``loads`` before the profile started (``from json import loads``) is not seen.

A library's partial-JSON helper (LangChain's ``parse_partial_json``, which re-parses streamed tool arguments on
every chunk and expects most attempts to fail) is kept as parse time but classed ``agentprof.parse.partial``
(``complete`` or ``incomplete``), never as a failed parse.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from agentprof.capture.parse import recorded_loads
from agentprof.capture.patches import RefPatch
from agentprof.capture.session import current

SPAN_NAME = "json.loads"
_SKIP_ROOTS = frozenset({"openai", "anthropic", "httpx", "httpx2", "httpcore", "h11", "h2", "requests", "urllib3",
                         "opentelemetry", "pydantic", "pydantic_core", "google", "grpc", "tiktoken"})
_SKIP_OWN = ("agentprof.capture", "agentprof.trace")


def _from_internals(frame: Any) -> bool:
    mod = frame.f_globals.get("__name__", "") if frame is not None else ""
    if mod == "json" and frame.f_back is not None:  # json.load(fp) calls loads(fp.read())
        mod = frame.f_back.f_globals.get("__name__", "")
    return mod.partition(".")[0] in _SKIP_ROOTS or mod.startswith(_SKIP_OWN)


PARTIAL_HELPERS = frozenset({"parse_partial_json"})
"""Functions that parse JSON still streaming in and handle the failure themselves: LangChain's (``langchain_core.
utils.json``), and the same-named helper other libraries copied from open-interpreter."""


def _partial(frame: Any) -> bool:
    """Whether the caller is a partial-JSON helper (:data:`PARTIAL_HELPERS`)."""
    return frame is not None and frame.f_code.co_name in PARTIAL_HELPERS


def _make(original: Callable[..., Any]) -> Callable[..., Any]:
    def loads(s: Any, *args: Any, **kwargs: Any) -> Any:
        sess = current()
        if sess is None or not sess.instrument_json:
            return original(s, *args, **kwargs)
        caller = sys._getframe(1)
        if _from_internals(caller):
            return original(s, *args, **kwargs)
        return recorded_loads(sess, SPAN_NAME, original, s, args, kwargs, partial=_partial(caller))

    loads.__wrapped__ = original  # type: ignore[attr-defined]
    loads.__doc__ = original.__doc__
    return loads


LOADS = RefPatch(json, "loads", _make)
