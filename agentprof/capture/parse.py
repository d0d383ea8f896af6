"""``agentprof.parse_json``: parse JSON and record the parse as a ``parse`` span with its size in bytes."""

from __future__ import annotations

import json
from typing import Any

from agentprof import semconv as sc
from agentprof.capture.failsafe import internal_error
from agentprof.capture.session import Session, current
from agentprof.capture.spans import Scope

ORIGINAL_LOADS = json.loads
"""``json.loads`` as it was when agentprof was imported (parse spans never record themselves twice)."""


def nbytes(text: Any) -> int:
    """Size of a JSON document in bytes (UTF-8 for text)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return len(text)
    if isinstance(text, str):
        return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return 0


def parse_scope(sess: Session, name: str, text: Any) -> Scope | None:
    try:
        return Scope(sess, name, {sc.KIND: "parse", sc.SESSION_ID: sess.id, sc.PARSE_BYTES: nbytes(text)}, cpu=True)
    except Exception as e:
        internal_error("starting a parse span", e)
        return None


def parse_json(text: str | bytes | bytearray, name: str = "parse_json", **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``, recorded as a ``parse`` span named ``name`` inside a profile.

    Parse errors (``json.JSONDecodeError``) propagate unchanged and mark the span failed.
    """
    sess = current()
    scope = parse_scope(sess, name, text) if sess is not None else None
    if scope is None:
        return ORIGINAL_LOADS(text, **kwargs)
    try:
        result = ORIGINAL_LOADS(text, **kwargs)
    except BaseException as e:
        scope.end(e)
        raise
    scope.end()
    return result
