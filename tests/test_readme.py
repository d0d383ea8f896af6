"""The README reads at a glance: it is a newcomer's first screen."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _visible_blocks(text: str) -> list[str]:
    """The README's paragraphs and list items as a reader sees them: code blocks, tables and headings left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for para in re.split(r"\n\s*\n", text):
        if not para.strip() or para.lstrip().startswith(("|", "#")):
            continue
        out += [item for item in re.split(r"\n(?=\s*- )", para) if item.strip()]
    return out


def test_no_visible_paragraph_runs_over_60_words() -> None:
    # an inline code span reads as one word; a longer paragraph or list item is split where its topic turns
    long = []
    for block in _visible_blocks((ROOT / "README.md").read_text(encoding="utf-8")):
        words = len(re.sub(r"`[^`]*`", "x", block).split())
        if words > 60:
            long.append(f"{words} words: {block[:80]}…")
    assert not long, "\n".join(long)


def test_the_split_keeps_what_it_counts() -> None:
    blocks = _visible_blocks("# T\n\nOne two.\n- a b\n- c `d e f`\n\n```\nx y z\n```\n\n| a | b |\n")
    assert blocks == ["One two.", "- a b", "- c `d e f`"]
