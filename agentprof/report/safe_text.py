"""Text from a trace made safe for a terminal: no console markup, no control or direction-changing characters,
no screenful from one name.

Every string a trace holds (tool, model and session names, error types, paths, diagnostics) was written by
another program and is untrusted. Rich reads ``[...]`` in a plain ``str`` as markup (``[/oops]`` raises,
``[red]X[/red]`` turns red) and passes escape sequences (``ESC``) and bidirectional overrides through to the
terminal. :func:`shown` gives a printable stand-in (``\\x1b``, ``\\u202e``) cut to a length; :func:`markup`
additionally escapes it for strings that go through Rich markup.
"""

from __future__ import annotations

import re
from typing import Any

from rich.markup import escape
from rich.text import Text

LIMIT = 200
"""Characters of one trace string shown in the terminal (the rest is counted, never printed)."""

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def shown(value: Any, limit: int | None = LIMIT) -> str:
    """``value`` as one printable line: control, format and bidi characters written as escapes, and cut to
    ``limit`` characters (``None``: no cut) with the number of characters left out."""
    s = "" if value is None else str(value)
    if limit is not None and len(s) > limit:
        s = f"{s[:limit]}… ({len(s) - limit:,} more characters)"
    return _UNSAFE.sub(_visible, s)


def markup(value: Any, limit: int | None = LIMIT) -> str:
    """:func:`shown`, escaped for a string Rich parses as markup (square brackets shown as they are)."""
    return escape(shown(value, limit))


def text(value: Any, limit: int | None = LIMIT, style: str = "") -> Text:
    """:func:`shown` as a Rich ``Text`` (never parsed as markup)."""
    return Text(shown(value, limit), style=style)
