"""``agentprof diff`` Markdown and terminal output keep trace text as text: a tool named with a table pipe, a
backtick, a link, an HTML tag, a console markup tag and an escape sequence shows as those characters, in one
table cell, and changes nothing else."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from agentprof.analysis.diff import diff
from agentprof.report.diff_markdown import md, render_markdown
from agentprof.report.diff_terminal import show_diff

from .report_support import SEC, T0, make_trace, span

EVIL = "a|b`c [x](http://e.test) <img src=x> [red]r[/red] \x1b[31m_*"


def runs(prefix: str, tool_s: float):
    """One run: a model call, then the evil-named tool three times (``tool_s`` each, +1 ms per call)."""
    s, t = f"{prefix}0", T0
    recs = [span(s, "m", "root", "model", "chat x", t, t + SEC, trace_id=s,
                 **{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10})]
    t += SEC
    for i in range(3):
        d = int(tool_s * SEC) + i * 1_000_000
        recs.append(span(s, f"t{i}", "root", "tool", "execute_tool x", t, t + d, trace_id=s,
                         **{"gen_ai.tool.name": EVIL}))
        t += d
    recs.insert(0, span(s, "root", None, "agent", "invoke_agent a", T0, t, trace_id=s))
    return make_trace(recs)


@pytest.fixture(scope="module")
def result():
    res = diff(runs("b", 0.1), runs("n", 0.5))
    return res, res.failures(slower_pct=20)


def test_markdown_cells_hold_trace_text_as_text(result):
    res, failed = result
    assert [f["scope"] for f in failed] == [f"tool:{EVIL}"]
    out = render_markdown(res, failed)
    row = next(ln for ln in out.splitlines() if ln.startswith("| **tool "))
    assert row.count("|") - row.count("\\|") == 8  # seven cells: the name's pipe is escaped
    assert "\\`c" in row and "\\[x\\]\\(http\\:" in row and "\\<img" in row and "\\x1b" in row
    assert "\x1b" not in out and "](http" not in out
    # every unescaped backtick, bracket or angle bracket in the document is the report's own, not the tool's
    assert not re.search(r"(?<!\\)[`\[\]<>]", out.replace("<details>", "").replace("</details>", "")
                         .replace("<summary>", "").replace("</summary>", "").replace("<sub>", "")
                         .replace("</sub>", ""))
    assert md("a|b") == "a\\|b" and md("x\ny") == "x\\\\x0ay"


def test_terminal_shows_markup_and_escapes_as_characters(result):
    res, failed = result
    buf = io.StringIO()
    show_diff(res, failed, Console(file=buf, width=100, force_terminal=False, color_system=None))
    out = buf.getvalue()
    assert "\x1b" not in out and "[red]r[/red]" in out.replace("\n", "").replace(" ", "")
    assert "\\x1b" in out
