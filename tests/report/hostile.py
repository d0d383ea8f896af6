"""A hostile trace: every string a trace can carry set to console markup, HTML/JS injection, ``javascript:``
URLs, bidi overrides, control characters and a 1 MB name, written as an agentprof JSONL file so the CLI
commands read it as they would any trace."""

from __future__ import annotations

import json
from pathlib import Path

from .report_support import SEC, T0, span

PWN = "window.__pwned=(window.__pwned||0)+1"
PAYLOADS = [
    "[/oops]",
    "[red]X[/red]",
    "[link=https://example.com/x]click[/link]",
    f"</script><script>{PWN}</script>",
    f"<img src=x onerror=\"{PWN}\">",
    f"<svg onload=\"{PWN}\"></svg>",
    f"\" onmouseover=\"{PWN}\" x=\"",
    f"' onfocus='{PWN}' autofocus='",
    f"javascript:{PWN}",
    f"<a href=\"javascript:{PWN}\">go</a>",
    "<iframe src=\"https://example.com/\"></iframe><link rel=stylesheet href=\"https://example.com/x.css\">",
    f"${{{PWN}}}{{{{constructor.constructor('{PWN}')()}}}}",
    "\u202eevil\u202c \u2066rtl\u2069",
    "ctl\x1b[31mRED\x1b[0m\x07\x08\r\x00end",
    "\u2028line\u2029sep",
    "\x1b]0;pwned title\x07",  # sets the terminal's title
    "\x1b[2J\x1b[H",  # clears the screen
    "\u202eC0\x01\x7f C1\x85\x90\x9b31m\x9c",
]
HUGE = "N" * (1 << 20)


def hostile_records() -> list[dict]:
    """Span records: a session whose every name, model, error type, wait reason and id is a payload."""
    sess = "sess" + PAYLOADS[3] + PAYLOADS[15]
    recs = [span(sess, "root", None, "agent", "invoke_agent " + PAYLOADS[4], T0, T0 + 400 * SEC,
                 **{"gen_ai.agent.name": PAYLOADS[1]})]
    t = T0 + SEC
    for i, p in enumerate(PAYLOADS):
        recs.append(span(sess, f"m{i}", "root", "model", f"chat {p}", t, t + 2 * SEC, **{
            "gen_ai.request.model": p, "gen_ai.response.model": p, "gen_ai.provider.name": p,
            "gen_ai.usage.input_tokens": 1000 + i, "gen_ai.usage.output_tokens": 10,
            "gen_ai.usage.cache_read.input_tokens": 900}))
        t += 2 * SEC
        rec = span(sess, f"t{i}", "root", "tool", f"execute_tool {p}", t, t + SEC, status="error",
                   **{"gen_ai.tool.name": p})
        rec["error_type"] = p
        recs.append(rec)
        t += SEC
        recs.append(span(sess, f"w{i}", "root", "wait", f"wait {p}", t, t + SEC, **{"agentprof.wait.reason": p}))
        t += SEC
    recs.append(span(sess, "huge", "root", "tool", "execute_tool " + HUGE, t, t + SEC,
                     **{"gen_ai.tool.name": HUGE}))
    sub = "sub" + PAYLOADS[0]
    recs.append(span(sub, "sroot", "t1", "agent", "invoke_agent " + PAYLOADS[8], T0 + 5 * SEC, T0 + 9 * SEC,
                     **{"agentprof.session.parent_id": sess, "agentprof.session.role": PAYLOADS[2]}))
    return recs


def write_hostile(folder: Path) -> Path:
    """The hostile trace as ``folder/<payload-ish name>.jsonl`` (the file name is hostile too)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "[red]x[bold]<b>hostile.jsonl"
    meta = {"record": "meta", "format": "agentprof-trace", "version": 1, "source_format": "agentprof",
            "name": PAYLOADS[3] + PAYLOADS[1], "tokenizer": PAYLOADS[0], "block_size": 64,
            "diagnostics": [{"kind": PAYLOADS[0], "message": PAYLOADS[4] + PAYLOADS[13], "path": PAYLOADS[9]}]}
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(meta) + "\n")
        for r in hostile_records():
            f.write(json.dumps(r) + "\n")
    return path
