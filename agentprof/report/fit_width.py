"""Tables that fit the terminal: figures are never cut or wrapped; when all columns do not fit the width, the
columns are stacked into as few tables as fit, each repeating the row's name columns.

A figure cell (``1 h 02 m``, ``1.35×``) never wraps (a duration split over two lines reads as two numbers) and
is never cut with an ellipsis; name cells fold (every character kept, over several lines) when even one
figure column beside them is too wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table

WIDE = 10_000
"""A console width no table reaches: what a table measures there is its natural width."""


@dataclass(frozen=True)
class Column:
    """One column: its header, alignment, and whether it names the row (repeated in every stacked table,
    folded when narrow), holds words that may wrap (``wrap``: a list of frameworks, a source) or holds a figure
    (never wrapped, never cut)."""

    header: str
    justify: str = "right"
    name: bool = False
    style: str | None = None
    wrap: bool = False


def _table(title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[RenderableType]],
           idx: Sequence[int], styles: Sequence[str | None], caption: str | None, name_width: int | None = None,
           name_widths: dict[int, int] | None = None) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, collapse_padding=True, caption=caption, caption_justify="left", caption_style="dim")
    for i in idx:
        c = columns[i]
        if c.name:
            t.add_column(c.header, justify=c.justify, overflow="fold", style=c.style,  # type: ignore[arg-type]
                         max_width=(name_widths or {}).get(i, name_width))
        else:
            t.add_column(c.header, justify=c.justify, no_wrap=not c.wrap, overflow="fold",  # type: ignore[arg-type]
                         style=c.style, max_width=max(12, name_width * 3 // 4) if c.wrap and name_width else None)
    for r, st in zip(rows, styles, strict=True):
        t.add_row(*(r[i] for i in idx), style=st)
    return t


def natural_width(renderable: RenderableType) -> int:
    """The width ``renderable`` takes when nothing constrains it."""
    con = Console(width=WIDE)
    return Measurement.get(con, con.options, renderable).maximum


def fitted_tables(title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[RenderableType]],
                  width: int, row_styles: Sequence[str | None] | None = None,
                  caption: str | None = None) -> list[Table]:
    """One table when it fits ``width``; else the figure columns, in order, over as few stacked tables as fit,
    each with the name columns first, folded to at most a third of the width, and word columns wrapped to a
    quarter of it (the caption goes under the last)."""
    styles = list(row_styles) if row_styles is not None else [None] * len(rows)
    names = [i for i, c in enumerate(columns) if c.name]
    figures = [i for i, c in enumerate(columns) if not c.name]
    whole = _table(title, columns, rows, range(len(columns)), styles, caption)
    if natural_width(whole) <= width or not figures:
        return [whole]
    name_width = max(12, width // 3 // max(1, len(names)))
    groups: list[list[int]] = [[]]
    for i in figures:
        trial = groups[-1] + [i]
        if groups[-1] and natural_width(_table(None, columns, rows, names + trial, styles, None, name_width)) > width:
            groups.append([i])
        else:
            groups[-1] = trial
    out = []
    for k, g in enumerate(groups):
        t_, c_ = title if k == 0 else None, caption if k == len(groups) - 1 else None
        widths = _name_widths(columns, rows, names, g, styles, width, name_width)
        table = _table(t_, columns, rows, names + g, styles, c_, name_width, widths)
        if widths and natural_width(table) > width:  # the share was measured apart: fold to the third
            table = _table(t_, columns, rows, names + g, styles, c_, name_width)
        out.append(table)
    return out


def _name_widths(columns: Sequence[Column], rows: Sequence[Sequence[RenderableType]], names: list[int],
                 group: list[int], styles: Sequence[str | None], width: int, floor: int) -> dict[int, int] | None:
    """The name columns' widths beside ``group``'s figure columns: what the figures leave of ``width``, shared so
    that a narrow name keeps its natural width and the others split the rest (none below ``floor``); None when
    the figures leave no more than ``floor`` each."""
    if not names:
        return None
    rest = width - natural_width(_table(None, columns, rows, group, styles, None)) - 2 * len(names)
    if rest <= floor * len(names):
        return None
    nat = {i: natural_width(_table(None, columns, rows, [i], styles, None)) for i in names}
    widths: dict[int, int] = {}
    left = sorted(names, key=nat.__getitem__)
    while left:
        i = left.pop(0)
        widths[i] = max(floor, min(nat[i], rest // (len(left) + 1)))
        rest -= widths[i]
    return widths
