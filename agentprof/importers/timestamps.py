"""Timestamps found in agent logs (ISO 8601 strings, epoch seconds) as epoch nanoseconds."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from agentprof.trace.usage import Unreadable

_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$")


def iso_to_ns(value: object) -> int | None:
    """``2026-02-11T20:36:45.693Z`` (up to nanosecond digits) to epoch ns; ``None`` when unreadable.

    A timestamp without an offset is read as UTC (Aider writes local time without a zone).
    """
    if not isinstance(value, str):
        return None
    m = _ISO.match(value.strip())
    if not m:
        return None
    date, clock, frac, tz = m.groups()
    if tz in (None, "Z"):
        tz = "+00:00"
    elif ":" not in tz:
        tz = tz[:3] + ":" + tz[3:]
    try:
        dt = datetime.fromisoformat(f"{date}T{clock}{tz}")
    except ValueError:
        return None
    ns = int(dt.astimezone(timezone.utc).timestamp()) * 1_000_000_000
    if frac:
        ns += int(frac.ljust(9, "0"))
    return ns


def record_time(value: object) -> tuple[int | None, str | None]:
    """A log record's ``timestamp`` as epoch ns (None when absent), or the reason to refuse the line when it is
    there but unreadable: a record at an unknown time must not be placed at a guessed one."""
    ns = iso_to_ns(value)
    if value is not None and ns is None:
        return None, f"timestamp {str(value)[:40]!r} is not an ISO 8601 time"
    return ns, None


def epoch_s_to_ns(value: object) -> int | None:
    """Epoch seconds (int or float, as JSON numbers) to ns; ``inf``/``NaN`` become :class:`Unreadable` (out of
    any range: the span builder reports it and keeps the record with the time unknown)."""
    return seconds_to_ns(value)


def seconds_to_ns(value: object) -> int | None:
    """A duration in seconds to ns (``None`` for missing or non-numeric; not finite: :class:`Unreadable`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return Unreadable(repr(value))
    if isinstance(value, int) or abs(value) >= 1e18:  # exact (a float this large has no fraction)
        return int(value) * 1_000_000_000
    return int(round(value * 1_000_000_000))
