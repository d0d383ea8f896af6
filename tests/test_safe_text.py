"""The console every command prints through wraps prose without splitting a figure: a number stays with its unit
and a duration's parts stay together at every width, styles stay on their characters, and the words are all
there."""

from __future__ import annotations

import random
import re

import pytest
from rich.text import Text

from agentprof.safe_text import console

FIGURES = ["2 h 36 m", "1 h 02 m 03 s", "42 m 25 s", "12 %", "3.64 s", "500 GiB", "1.5 TB", "767 ms", "4 kWh",
           "0.95×", "7 d 3 h"]
WORDS = ["the", "task", "in", "instead", "of", "model", "calls", "are", "waiting", "for", "user", "orchestration"]


def _sentence(rng: random.Random) -> tuple[str, list[str]]:
    words, figures = [], []
    for _ in range(40):
        if rng.random() < 0.35:
            f = rng.choice(FIGURES)
            figures.append(f)
            words.append(f)
        else:
            words.append(rng.choice(WORDS))
    return " ".join(words), figures


def _printed(renderable, width: int) -> list[str]:
    con = console(record=True, width=width, color_system=None)
    con.print(renderable)
    return [line.rstrip() for line in con.export_text().splitlines()]


@pytest.mark.parametrize("width", [24, 31, 40, 57, 80, 101])
def test_prose_never_splits_a_figure(width):
    rng = random.Random(width)
    for _ in range(20):
        sentence, figures = _sentence(rng)
        lines = _printed(Text(sentence), width)
        assert all(len(line) <= width for line in lines)
        assert " ".join(lines).split() == sentence.split()  # every word, in order, nothing added
        shown = "\n".join(lines)
        for f in set(figures):
            assert shown.count(f) == sentence.count(f), (f, lines)


def test_styles_stay_on_their_characters():
    t = Text("waiting 55 %, model calls ")
    t.append("2 h 36 m", style="bold")
    t.append(" instead of 3 h 10 m")
    con = console(record=True, width=14, color_system="truecolor", force_terminal=True)
    con.print(t)
    lines = [line.rstrip() for line in con.export_text(clear=False).splitlines()]
    assert "2 h 36 m" in lines
    html = con.export_html(inline_styles=True)
    assert re.search(r"<span style=\"font-weight: bold\">2 h 36 m</span>", html), html


def test_a_figure_wider_than_the_line_is_folded_not_lost():
    lines = _printed(Text("x 1 h 02 m 03 s y"), 8)
    assert "".join(lines).replace(" ", "") == "x1h02m03sy"
