"""Turn SDK request/response values into plain JSON-like data (dicts, lists, strings, numbers).

Users pass dicts, pydantic models from a previous response (``messages.append(resp.choices[0].message)``),
tuples or one-shot iterables; SDKs use ``NotGiven``/``Omit`` sentinels for absent arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_SENTINELS = frozenset({"NotGiven", "Omit", "_NotGiven", "_Omit"})


def given(value: Any) -> Any:
    """``value``, or ``None`` for an SDK's "not given" sentinel."""
    if value is None or type(value).__name__ in _SENTINELS:
        return None
    return value


def plain(value: Any, depth: int = 0) -> Any:
    """A plain-data copy of ``value`` (pydantic models dumped, sentinels dropped, unknown objects as str)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if depth > 64:
        return str(value)
    if type(value).__name__ in _SENTINELS:
        return None
    if isinstance(value, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in value.items() if type(v).__name__ not in _SENTINELS}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return plain(dump(mode="json", exclude_unset=True), depth + 1)
        except Exception:
            try:
                return plain(dump(), depth + 1)
            except Exception:
                return str(value)
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return str(value)
