"""Parsing sizes (``5GiB``, ``512MB``) and durations (``5m``, ``1h``) given on the command line."""

from __future__ import annotations

import re

from agentprof.errors import AgentprofError

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
UNLIMITED = ("unlimited", "inf", "none", "max")


def parse_size(text: str) -> int | None:
    """Bytes from ``5GiB`` / ``5G`` (binary, as LMCache's ``max_local_cpu_size``), ``5GB`` (decimal) or a plain
    number of bytes; ``unlimited`` gives ``None``."""
    t = text.strip().lower()
    if t in UNLIMITED:
        return None
    m = _SIZE.match(t)
    if not m:
        raise AgentprofError(f"cannot read size {text!r}: expected e.g. 5GiB, 512MiB, 40GB or unlimited")
    value, unit, binary, byte = m.groups()
    exp = _POW[unit.lower()]
    # "G"/"GiB" are binary (LMCache's convention); "GB" is decimal
    base = 1000 if (byte and not binary and unit) else 1024
    return int(float(value) * base ** exp)


_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_SECONDS = {None: 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from ``300``, ``300s``, ``5m``, ``1h`` or ``250ms``."""
    m = _DUR.match(text.strip().lower())
    if not m:
        raise AgentprofError(f"cannot read duration {text!r}: expected e.g. 300s, 5m or 1h")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def format_bytes(n: float | None) -> str:
    if n is None:
        return "unlimited"
    for unit, k in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if n >= 1024 ** k:
            return f"{n / 1024 ** k:.3g} {unit}"
    return f"{n:.0f} B"
