"""A hostile trace (markup, script injection, ``javascript:`` URLs, bidi overrides, control characters, a 1 MB
name) through every output: terminal (analyze, replay, import), the HTML report in a real Chromium (no script
runs, no request leaves), the exports (valid JSON that keeps the strings as data) and the notebook views."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agentprof.report.notebook import html_for
from agentprof.report.stages import run_stages

from ..cli_support import run
from .hostile import HUGE, PAYLOADS, write_hostile

_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    return write_hostile(tmp_path_factory.mktemp("hostile"))


def test_analyze_shows_trace_text_literally(capsys, hostile):
    code, out, err = run(capsys, "analyze", str(hostile), "--no-progress")
    assert code == 0, err
    assert "Traceback" not in out + err
    flat = re.sub(r"[\s│┃]+", "", out)  # table cells wrap: compare without layout
    assert "[/oops]" in flat and "[red]X[/red]" in flat  # shown, not read as markup
    assert not _RAW_CONTROL.search(out + err)  # no escape sequences or bidi overrides reach the terminal
    assert "\\x1b[31mRED" in flat and "\\u202eevil" in out
    assert len(out) < 200_000  # the 1 MB name is cut, not printed


def test_replay_and_import_print_trace_text_literally(capsys, hostile, tmp_path):
    code, out, err = run(capsys, "replay", str(hostile), "-s", "h200+x86", "--no-progress") \
        if _has_option("replay", "--no-progress") else run(capsys, "replay", str(hostile), "-s", "h200+x86")
    assert code == 0, err
    assert not _RAW_CONTROL.search(out + err) and "Traceback" not in out + err
    code, out, err = run(capsys, "import", str(hostile), "-o", str(tmp_path / "h.parquet"))
    assert code == 0, err
    assert not _RAW_CONTROL.search(out + err)


_TERMINAL_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Any C0/C1 control byte (newline aside), bidi mark or override: none of them is agentprof's own output."""


@pytest.mark.parametrize("command", ["analyze", "report", "replay", "diff", "export", "import", "cachesim",
                                     "error"])
def test_no_control_byte_from_the_trace_reaches_the_terminal(capsys, hostile, tmp_path, command):
    """Title-setting (OSC), screen-clearing (CSI), C1 and bidi payloads in wait reasons, tool, model and session
    names: every command's stdout and stderr show them escaped."""
    path = str(hostile)
    if command == "error":  # an error line quoting the file: a trace whose name field is the payload
        bad = tmp_path / "\x1b]0;pwned\x07bad.jsonl"
        bad.write_text(json.dumps({"record": "meta", "format": "\x1b[2J\u202e"}) + "\n")
        args = ["analyze", str(bad), "--no-progress"]
    else:
        args = {"analyze": ["analyze", path, "--no-progress"],
                "report": ["report", path, "-o", str(tmp_path / "h.html"), "-s", "h200+x86"],
                "replay": ["replay", path, "-s", "h200+x86"],
                "diff": ["diff", path, path],
                "export": ["export", path, "--to", "perfetto", "-o", str(tmp_path / "h.json")],
                "import": ["import", path, "-o", str(tmp_path / "h.parquet")],
                "cachesim": ["cachesim", path, "--model", "gpt-oss-120b"]}[command]
    code, out, err = run(capsys, *args)
    assert code == (2 if command == "error" else 0), err
    assert "Traceback" not in out + err
    assert not _TERMINAL_UNSAFE.search(out + err), sorted({repr(c) for c in _TERMINAL_UNSAFE.findall(out + err)})
    assert len(out + err) < 200_000  # the 1 MB name is cut, not printed
    if command in ("analyze", "diff", "error"):
        assert "\\x1b" in out + err  # shown as an escape, not dropped


def _has_option(cmd: str, opt: str) -> bool:
    import click

    from agentprof.cli import cli

    command = cli.get_command(click.Context(cli), cmd)
    return any(opt in p.opts for p in command.params)


def test_html_report_runs_nothing_and_fetches_nothing(capsys, hostile, tmp_path, browser):
    out_html = tmp_path / "hostile.html"
    code, _, err = run(capsys, "report", str(hostile), "-o", str(out_html), "--system", "h200+x86")
    assert code == 0, err
    page = browser.context.new_page()
    requests: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page.goto(out_html.resolve().as_uri())
    page.wait_for_selector("html[data-rendered]", timeout=30_000)
    # hover what shows names (tooltips, titles): every visible cell and item (a hidden one cannot be hovered),
    # the real mouse moved onto each without Playwright's wait for it to be stable (half the time)
    for el in page.locator("td:visible, th:visible, li:visible").all()[:400]:
        try:
            el.hover(timeout=200, force=True)
        except Exception:
            pass
    page.keyboard.press("Tab")
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []
    assert [u for u in requests if not u.startswith("file:")] == []
    assert requests == [out_html.resolve().as_uri()]
    body = page.inner_text("body")
    assert "[red]X[/red]" in body and "<img src=x onerror=" in body  # shown as text
    assert page.evaluate("document.querySelectorAll('img, iframe, svg[onload], a[href^=\"javascript\"]').length") \
        == 0
    page.close()


def test_exports_keep_strings_as_data(capsys, hostile, tmp_path):
    for fmt in ("perfetto", "otlp-json", "mooncake"):
        path = tmp_path / f"h.{fmt}.json"
        code, _, err = run(capsys, "export", str(hostile), "--to", fmt, "-o", str(path))
        assert code == 0, err
        text = path.read_text(encoding="utf-8")
        if fmt == "mooncake":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            assert rows  # token/hash rows only: no names travel
            continue
        doc = json.loads(text)  # valid JSON whatever the names hold
        strings = set(_strings(doc))
        for p in (PAYLOADS[3], PAYLOADS[0], PAYLOADS[13]):
            assert any(p in s for s in strings), (fmt, p)  # kept as data, byte for byte
    # the otlp export reads back to the same tool names
    code, _, err = run(capsys, "analyze", str(tmp_path / "h.otlp-json.json"), "--json", "--no-progress")
    assert code == 0, err


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.bad_attrs: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k.startswith("on") or (v and v.strip().lower().startswith("javascript:")):
                self.bad_attrs.append((k, v))


def test_notebook_views_escape_everything(hostile, browser):
    from agentprof.trace.files import read

    trace = read(hostile)
    res = run_stages(trace, systems=["h200+x86"])
    for obj in (trace, res.analysis, res.replay, *(c[1] for c in res.cache)):
        if obj is None:
            continue
        frag = html_for(obj)
        p = _Tags()
        p.feed(frag)
        assert not {"script", "img", "iframe", "a", "link"} & set(p.tags)
        assert p.bad_attrs == []
        assert HUGE not in frag  # a 1 MB name is cut in a table cell
        page = browser.context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d, dialogs=dialogs: (dialogs.append(d.message), d.dismiss()))
        page.set_content(f"<!doctype html><body>{frag}</body>")
        assert page.evaluate("window.__pwned") is None and dialogs == []
        page.close()
