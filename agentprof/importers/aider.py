"""Aider's ``.aider.llm.history``: every request as ``TO LLM <time>`` followed by the verbatim prompt, one
``ROLE text`` line per line and ``-------`` between messages, then ``LLM RESPONSE <time>`` and the reply.

Mapping (see ``docs/IMPORTING.md``): each request is a ``model`` span from its ``TO LLM`` to its
``LLM RESPONSE`` time (both recorded, second resolution: ``measured``; local time without a zone, read as
UTC). The prompt is the verbatim message list; a message sent as content blocks is printed one ``key: value``
line per field (``type: text``, ``text: …``, ``cache_control: {…}`` with ``--cache-prompts``; a multi-line
text continues on lines without a role prefix): its text is the content, the cache markers are not. The file has no token counts, no model name and no tool events; the gap
before each request is a ``wait`` (``user``, inferred: it also holds edits being applied).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xxhash

from agentprof import semconv as sc
from agentprof.importers.context import ImportContext
from agentprof.importers.jsonl import read_bytes
from agentprof.importers.spans import SpanBuilder
from agentprof.importers.timestamps import iso_to_ns
from agentprof.trace import waits
from agentprof.trace.prompt import openai_chat_segments
from agentprof.trace.schema import Trace, TraceMeta

FORMAT = "aider"
_HEADER = re.compile(r"^(TO LLM|LLM RESPONSE) (\S+)\s*$")
_ROLE = re.compile(r"^(SYSTEM|USER|ASSISTANT|TOOL|FUNCTION)(?: (.*))?$")
_SEP = "-------"


def _parse(path: Path, ctx: ImportContext) -> list[dict[str, Any]]:
    """Requests as ``{start, end, line, messages, response}``."""
    text = read_bytes(path).decode("utf-8", errors="replace")
    reqs: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    section = None  # "prompt" | "response"
    msg: dict[str, Any] | None = None
    for n, line in enumerate(text.split("\n"), start=1):
        h = _HEADER.match(line)
        if h:
            ts = iso_to_ns(h.group(2))
            if ts is None:
                ctx.bad(str(path), n, f"{h.group(1)} time {h.group(2)!r} is not an ISO 8601 time")
            if h.group(1) == "TO LLM":
                cur = {"start": ts, "end": None, "line": n, "messages": [], "response": []}
                reqs.append(cur)
                section, msg = "prompt", None
            else:
                if cur is None or cur["end"] is not None:
                    ctx.bad(str(path), n, "LLM RESPONSE without a TO LLM request before it")
                    section = None
                    continue
                cur["end"] = ts
                section, msg = "response", None
            continue
        if line == _SEP or (not line and section is None):
            msg = None
            continue
        if section is None or cur is None:
            ctx.bad(str(path), n, "text outside a TO LLM / LLM RESPONSE block (not an Aider LLM history?)")
            continue
        r = _ROLE.match(line)
        if r is None and msg is not None and msg["lines"] and msg["lines"][0].startswith("type: "):
            # content blocks are printed ``ROLE key: value`` with the value verbatim: the later lines of a
            # multi-line text carry no role prefix (blank ones included)
            msg["lines"].append(line)
            continue
        if r is None:
            if not line:
                continue
            ctx.bad(str(path), n, "line does not start with SYSTEM, USER or ASSISTANT")
            continue
        role, body = r.group(1).lower(), r.group(2) or ""
        target = cur["messages"] if section == "prompt" else cur["response"]
        if msg is None or msg["role"] != role or msg is not (target[-1] if target else None):
            msg = {"role": role, "lines": []}
            target.append(msg)
        msg["lines"].append(body)
    if not reqs and not ctx.skip_bad_lines:
        from agentprof.errors import TraceFormatError

        raise TraceFormatError(str(path), 1, "no 'TO LLM <time>' request found (not an Aider LLM history)")
    return reqs


def _content(lines: list[str]) -> str:
    """A message's content: its lines, or the text of the content blocks Aider printed field by field."""
    if not lines or lines[0] != "type: text" or len(lines) < 2 or not lines[1].startswith("text: "):
        return "\n".join(lines)
    texts: list[str] = []
    cur: list[str] | None = None
    for line in lines:
        if line.startswith("type: "):
            cur = None
        elif line.startswith("text: ") and cur is None:
            cur = [line[len("text: "):]]
            texts.append("")
        elif line.startswith("cache_control: "):
            cur = None
            continue
        elif cur is not None:
            cur.append(line)
        if cur is not None:
            texts[-1] = "\n".join(cur)
    return "\n".join(texts)


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one Aider LLM history file (one session)."""
    path = Path(paths[0])
    reqs = _parse(path, ctx)
    sid = f"aider:{path.parent.name or 'history'}"
    b = SpanBuilder(FORMAT, f"{path.name}\x1f{xxhash.xxh3_64_hexdigest(read_bytes(path))}", ctx, path=str(path))
    b.session(sid, agent_name="aider", attributes={"agentprof.source.path": str(path),
                                                   "agentprof.time_zone": "local time read as UTC"})
    prev_end: int | None = None
    fper = ctx.fingerprinter()
    for k, r in enumerate(reqs):
        messages = [{"role": m["role"], "content": _content(m["lines"])} for m in r["messages"]]
        fp = fper.fingerprint(openai_chat_segments(messages)) if messages else None
        if prev_end is not None and r["start"] is not None and r["start"] > prev_end:
            b.add(sid, "wait", f"wait {waits.USER_TURN}", key=("wait", k), start_ns=prev_end, end_ns=r["start"],
                  timing="measured", source=(str(path), r["line"]), attributes={sc.WAIT_REASON: waits.USER_TURN, "agentprof.wait.inferred":
                              "gap between a response and the next request (also holds applying edits)"})
        b.add_model_call(sid, model=None, provider=None, fingerprint=fp, path=str(path), line=r["line"],
                         key=("call", k), start_ns=r["start"], end_ns=r["end"],
                         timing="measured" if r["start"] is not None and r["end"] is not None else "unknown",
                         attributes={"agentprof.source.line": r["line"],
                                     "agentprof.response_messages": len(r["response"])})
        prev_end = r["end"] if r["end"] is not None else prev_end
    meta = TraceMeta(source_format=FORMAT, sources=[str(path)], extra={"time_zone": "local time read as UTC"})
    return Trace(meta, b.finish(), [])
