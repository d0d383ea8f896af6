"""How durations, shares, sizes and counts are written in terminal output: one format per kind of figure, shared
by every command (the report's terminal views, analyze, replay, serving and capacity), without importing rich."""

from __future__ import annotations

import math
import re


def fmt_duration(sec: float | None) -> str:
    """``1 h 02 m``, ``3 m 12 s``, ``12.3 s``, ``450 ms`` or ``—``."""
    if sec is None or not isinstance(sec, (int, float)) or not math.isfinite(sec):
        return "—"
    a = abs(sec)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{sec * 1e6:.0f} µs"
    if a < 1:
        return f"{sec * 1e3:.0f} ms" if a >= 0.1 else f"{sec * 1e3:.1f} ms"
    if a < 60:
        return f"{sec:.2f} s" if a < 10 else f"{sec:.1f} s"
    m, s = divmod(round(a), 60)
    sign = "-" if sec < 0 else ""
    if m < 60:
        return f"{sign}{m} m {s:02d} s"
    h, m = divmod(m, 60)
    return f"{sign}{h} h {m:02d} m"


def fmt_duration_short(sec: float | None) -> str:
    """A duration in at most 6 characters (``12.3s``, ``4.5m``, ``1.2h``), for wide tables."""
    if sec is None or not math.isfinite(sec):
        return "—"
    if sec >= 3600:
        return f"{sec / 3600:.1f}h"
    if sec >= 60:
        return f"{sec / 60:.1f}m"
    return f"{sec:.1f}s"


def fmt_share(x: float | None) -> str:
    """A share in whole percent without a space (``42%``), for table cells."""
    return "—" if x is None or not math.isfinite(x) else f"{x:.0%}"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:.{digits}f} %"


def fmt_bytes(b: float | None, none: str = "—") -> str:
    """Decimal byte units (``1.2 GB``); ``none`` for a missing value (``unlimited`` for a capacity)."""
    if b is None:
        return none
    for unit in ("B", "KB", "MB", "GB"):
        if abs(b) < 1000:
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1000
    return f"{b:.1f} TB"


def fmt_int(x: float | None) -> str:
    return "—" if x is None else f"{round(x):,}"


def fmt_count(n: float | None, noun: str, plural: str | None = None) -> str:
    """``n`` things, the noun in the singular for exactly one ("1 session", "2 sessions", "1,200 calls")."""
    return f"{fmt_int(n)} {noun if n is not None and round(n) == 1 else plural or noun + 's'}"


def fmt_tokens(x: float | None) -> str:
    if x is None:
        return "—"
    a = abs(x)
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if a >= div * 10 or (unit != "K" and a >= div):
            return f"{x / div:.1f}{unit}"
    return f"{round(x):,}"


def fmt_x(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.2f}×"


def fmt_fine(sec: float) -> str:
    """Seconds with 0.1 ms resolution below a second (sampled and self-measured times are often milliseconds)."""
    return f"{sec * 1e3:.1f} ms" if sec < 1 else fmt_duration(sec)


def fmt_capture_cost(co: dict) -> str:
    """One sentence on agentprof's own cost while capturing (an analysis' ``capture_overhead``)."""
    share = co.get("total_share_of_wall")
    text = f"agentprof's own cost while capturing: {fmt_fine(co['total_s'])} of CPU"
    if share is not None:
        text += f" ({share * 100:.2f} % of wall)"
    bg = co.get("background_cpu_s")
    if bg:
        text += (f": {fmt_fine(co['s'])} on the agent's threads, {fmt_fine(bg)} fingerprinting prompts on a background "
                 f"thread. The agent's wall grows by between {fmt_fine(co['s'])} (with a free core) and "
                 f"{fmt_fine(co['total_s'])} (sharing the agent's core under the GIL)")
    else:
        text += " on the agent's threads"
    return text + ". A process's first profile also loads agentprof's modules and tokenizer."


_SITE = re.compile(r".*[/\\](?:site|dist)-packages[/\\]|.*[/\\]lib[/\\]python\d+\.\d+[/\\]")


def short_file(path: str, cwd: str | None = None) -> str:
    """A source file as a terminal column shows it: an installed package's path from its package folder
    (``aiohttp/connector.py``), a standard-library module by its name (``selectors.py``), a file under ``cwd``
    relative to it, any other by its last two parts; ``<frozen importlib._bootstrap>`` as ``<frozen importlib>``."""
    if path.startswith("<frozen "):
        return "<frozen " + path[len("<frozen "):].rstrip(">").split(".")[0] + ">"
    cut = _SITE.sub("", path, count=1)
    if cut != path:
        return cut
    base = (cwd or "").rstrip("/\\")
    if base and path.startswith(base + "/"):
        return path[len(base) + 1:]
    parts = re.split(r"[/\\]", path)
    return "/".join(parts[-2:]) if len(parts) > 2 else path


def short_frame(name: str) -> str:
    """A function's qualified name without the ``<locals>`` steps of its nested definitions."""
    return name.replace("<locals>.", "")


_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}|(?<![0-9a-zA-Z])[0-9a-fA-F]{32}(?![0-9a-zA-Z])")


def short_ids(ids: list[str]) -> tuple[list[str], bool]:
    """Session ids for a terminal column: every UUID in them (dashed, or 32 hex digits as agentprof's capture
    writes them) cut to its first 8 characters (as git shortens a commit), unless that makes two of them alike;
    returns the ids to show and whether any was shortened."""
    short = [_UUID.sub(lambda m: m.group(0)[:8], i) for i in ids]
    if len(set(short)) < len(set(ids)):
        return list(ids), False
    return short, short != list(ids)
