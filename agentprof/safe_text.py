"""Text from a trace made safe for a terminal: no console markup, no control or direction-changing characters,
no screenful from one name.

Every string a trace holds (tool, model and session names, error types, paths, diagnostics) was written by
another program and is untrusted. Rich reads ``[...]`` in a plain ``str`` as markup (``[/oops]`` raises,
``[red]X[/red]`` turns red) and passes escape sequences (``ESC``) and bidirectional overrides through to the
terminal. :func:`shown` gives a printable stand-in (``\\x1b``, ``\\u202e``) cut to a length; :func:`markup`
additionally escapes it for strings that go through Rich markup. Every command prints through :func:`console`
(Rich) or :func:`echo` (plain lines), which escape what is left at the last step: whatever a table, panel,
progress line or message holds, no control byte from a trace reaches the terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import click
from rich.console import Console, ConsoleOptions, RenderableType
from rich.containers import Lines
from rich.markup import escape
from rich.segment import Segment
from rich.text import Span, Text

LIMIT = 200
"""Characters of one trace string shown in the terminal (the rest is counted, never printed)."""

_CHARS = "\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
_UNSAFE = re.compile(f"[\x00-\x0a{_CHARS}]")
_UNSAFE_IN_LINES = re.compile(f"[\x00-\x09{_CHARS}]")
"""The same characters except the newline, which an output's own layout uses."""


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


def lines(value: Any) -> str:
    """``value`` with every unsafe character escaped except newlines (a whole message or rendered output)."""
    return _UNSAFE_IN_LINES.sub(_visible, "" if value is None else str(value))


_FIGURE_SPACE = re.compile(
    r"(?<=\d) (?=(?:%|×|[hmsd]\b|ms\b|µs\b|ns\b|min\b|[KMGTP]i?B\b|[kMGT]?Wh?\b|[KMGT]B/s\b|tok/s\b))"
    r"|(?<=\d [hmd]) (?=\d)")
"""A space inside a figure: between a number and its unit (``12 %``, ``3.6 s``, ``500 GiB``, ``40 tok/s``) and
between the parts of a duration (``2 h 36 m``); the pages apply the same rule (``report/assets/figures.js``)."""
_JOIN = "\ue000"
"""A one-cell stand-in that is not whitespace, so the word wrap never breaks a figure there."""


class FigureText(Text):
    """Text whose word wrap never splits a figure from its unit or a duration into its parts (``2 h`` at the end
    of one line, ``36 m`` at the start of the next reads as two numbers)."""

    def wrap(self, console: Console, width: int, **kwargs: Any) -> Lines:
        glued = self.copy()
        glued.plain = _FIGURE_SPACE.sub(_JOIN, self.plain)
        out = Text.wrap(glued, console, width, **kwargs)
        for line in out:
            line.plain = line.plain.replace(_JOIN, " ")
        return out


def figures_whole(t: Text) -> Text:
    """``t`` as :class:`FigureText` when it holds a figure with a space in it; ``t`` itself otherwise."""
    if isinstance(t, FigureText) or not _FIGURE_SPACE.search(t.plain):
        return t
    out = FigureText(t.plain, style=t.style, justify=t.justify, overflow=t.overflow, no_wrap=t.no_wrap,
                     end=t.end, tab_size=t.tab_size)
    out.spans = list(t.spans)
    return out


class SafeConsole(Console):
    """A Rich console that escapes unsafe characters in everything it prints: strings and ``Text`` before they
    are measured and wrapped (so nothing is cut), any other text segment as it is rendered. Its own styles and
    cursor controls are not text and pass. The last step before the terminal, behind :func:`shown`. Text it
    wraps keeps every figure whole (:class:`FigureText`)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return safe_text(super().render_str(text, **kwargs))

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        if isinstance(renderable, Text):
            renderable = figures_whole(safe_text(renderable))
        for seg in super().render(renderable, options):
            if seg.control or not _UNSAFE_IN_LINES.search(seg.text):
                yield seg
            else:
                yield Segment(lines(seg.text), seg.style, seg.control)


def safe_text(t: Text) -> Text:
    """A copy of ``t`` with unsafe characters escaped (newlines kept) and its styles on the same characters."""
    plain = t.plain
    if not _UNSAFE_IN_LINES.search(plain):
        return t
    pieces: list[str] = []
    at = [0] * (len(plain) + 1)
    n = 0
    for i, ch in enumerate(plain):
        at[i] = n
        piece = lines(ch)
        pieces.append(piece)
        n += len(piece)
    at[len(plain)] = n
    out = t.copy()
    out.plain = "".join(pieces)
    out.spans = [Span(at[min(s.start, len(plain))], at[min(s.end, len(plain))], s.style) for s in t.spans]
    return out


def console(**kwargs: Any) -> Console:
    """The console every command prints through (``stderr=True`` for progress and notes)."""
    return SafeConsole(**kwargs)


def echo(message: Any = "", err: bool = False) -> None:
    """``click.echo`` for a line that may hold trace text (escaped, newlines kept)."""
    click.echo(lines(message), err=err)
