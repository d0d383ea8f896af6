"""Claude Code session logs: ``~/.claude/projects/<project>/<session>.jsonl`` plus
``<session>/subagents/agent-*.jsonl`` (sub-agents and the compaction call).

Mapping (see ``docs/IMPORTING.md``):

- sessions: the main file is one session; each ``system/compact_boundary`` starts a new segment (child session,
  role ``compaction``); each sub-agent file (and inline ``isSidechain`` chains of older versions) is a child
  session (role ``subagent``; inline records with an ``agentId`` are that agent's session, and transcripts
  deeper under ``<session>/subagents/`` join it too) under the tool call that started it
  (``toolUseResult.agentId``, or the result record's own ``agentId``), or, when it
  outlived that call (a background agent), under the parent's wait its end falls in. Main files are never
  grouped together: a resumed session's file starts with copies of the records of the session it continues,
  and records already imported from another file feed prompts but make no spans;
- model calls: assistant records grouped by ``message.id`` (one record per content block). Start = the record
  the first block points to (``parentUuid``: the tool result or prompt that triggered the request), end = the
  last block: ``derived``, as the log has no request-start time and the interval includes CLI pre-processing.
  ``message.model`` is read per call. A record the CLI wrote in the model's place for a failed request
  (``isApiErrorMessage``) is a failed call with the ``error`` code as ``error_type``. ``output_tokens`` is
  resolved over the message's records (streaming placeholders, see
  :func:`agentprof.trace.usage.resolve_streamed_output`);
- retries: each ``system/api_error`` record (a failed attempt the CLI retries; ``retryInMs``, ``retryAttempt``,
  ``maxRetries``, the SDK error) is a failed ``model`` call from the request's trigger (or the previous
  back-off's end) to the record, with the API error type and HTTP status, no usage and no prompt hashes, then a
  ``retry`` wait of ``retryInMs`` clipped at the next record (all ``derived``); the call that follows starts
  when the last back-off ends. Retries that no call follows (interrupted) keep their spans, model unknown;
- prompts: the ``parentUuid`` chain from the call's first block back to the root, user/assistant records only,
  every block of a message on it (all records with its ``message.id``: with streaming tool execution some are
  on no chain), parallel tool results restored. System prompt and tool definitions are not logged, so hashes
  cover the messages only;
- tools: ``tool_use`` -> ``tool_result``; start = first ``PreToolUse`` hook record or end − ``durationMs``
  (``durationSeconds`` for web searches) (measured), else the ``tool_use`` block time (derived); a rejected
  tool is an ``approval`` wait;
- waits: the gap before each prompt the user typed (``user_turn``), before a background-task notification
  (``idle``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash

from agentprof import semconv as sc
from agentprof.importers.context import ImportContext
from agentprof.importers.jsonl import iter_records, read_bytes
from agentprof.importers.providers import provider_for_model
from agentprof.importers.spans import SpanBuilder
from agentprof.importers.timestamps import iso_to_ns, record_time
from agentprof.trace import waits
from agentprof.trace.prompt import Segment, anthropic_segments, canonical_json, content_text
from agentprof.trace.schema import Trace, TraceMeta
from agentprof.trace.usage import Usage, normalize_usage, resolve_streamed_output

FORMAT = "claude-code"
_KNOWN = {"user", "assistant", "system", "progress", "summary", "file-history-snapshot", "queue-operation",
          "custom-title", "attachment", "tag", "agent-name", "ai-title", "continued-in"}
_REJECTED = ("The user doesn't want to proceed with this tool use", "User rejected tool use")
_NOT_PROMPTS = ("[Request interrupted by user", "<task-notification>")
_BACKGROUND_SLACK_NS = 1_000_000_000  # a sub-agent ending this much after its tool call ran in the background


@dataclass
class _Rec:
    """One log record with what the importer needs from it."""

    line: int
    file: str
    raw: dict[str, Any]
    ts: int | None
    session: str = ""

    @property
    def type(self) -> str:
        return self.raw.get("type", "")

    @property
    def uuid(self) -> str | None:
        return self.raw.get("uuid")

    @property
    def parent(self) -> str | None:
        return self.raw.get("parentUuid")

    @property
    def content(self) -> Any:
        msg = self.raw.get("message")
        return msg.get("content") if isinstance(msg, dict) else None


@dataclass
class _File:
    path: str
    recs: list[_Rec] = field(default_factory=list)
    agent_id: str | None = None
    session_id: str | None = None
    session_ids: set[str] = field(default_factory=set)


def _head_ids(path: Path) -> tuple[str | None, str | None, int | None]:
    """``(sessionId, agentId, first timestamp)`` from the first records of a file (cheap: a few lines)."""
    sid = agent = None
    first_ts = None
    try:
        with path.open("rb") as f:
            for _ in range(50):
                line = f.readline(1 << 22)
                if not line:
                    break
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(rec, dict):
                    continue
                if first_ts is None:
                    first_ts = iso_to_ns(rec.get("timestamp"))
                if sid is None and isinstance(rec.get("sessionId"), str):
                    sid = rec["sessionId"]
                    agent = rec.get("agentId") if isinstance(rec.get("agentId"), str) else None
                if sid is not None and first_ts is not None:
                    break
    except OSError:
        pass
    return sid, agent, first_ts


def group(files: Sequence[Path]) -> list[list[Path]]:
    """Group files by Claude Code session: each main file (``<session>.jsonl``, no ``agentId``) first, then the
    sub-agent files (``<session>/subagents/agent-*.jsonl``, whose records carry the parent's ``sessionId``).

    Main files are never grouped with each other: a resumed session's new file starts with copies of the
    records of the session it continues (under that session's id), and is a session of its own. Groups are
    ordered by their first record's time, so the original session is imported before its continuations and
    owns the records they copy.
    """
    mains: list[tuple[Path, str | None, int | None]] = []
    subs: list[tuple[Path, str | None]] = []
    for f in files:
        sid, agent, first_ts = _head_ids(f)
        if agent is not None:
            subs.append((f, sid))
        else:
            mains.append((f, sid, first_ts))
    by_stem = {f.stem: i for i, (f, _, _) in enumerate(mains)}
    by_sid: dict[str, int] = {}
    for i, (_f, sid, _) in enumerate(mains):
        if sid is not None:
            by_sid.setdefault(sid, i)
    members: list[list[Path]] = [[f] for f, _, _ in mains]
    alone: list[list[Path]] = []
    for f, sid in subs:
        owner = by_stem.get(sid or "")  # <session>.jsonl
        if owner is None:  # <session>/subagents/agent-*.jsonl, also deeper (subagents/workflows/<run>/)
            owner = next((by_stem[d.parent.name] for d in f.parents if d.name == "subagents" and
                          d.parent.name in by_stem), None)
        if owner is None and sid is not None:
            owner = by_sid.get(sid, by_stem.get(sid.split("#", 1)[0]))  # a renamed main file; "<main>#agent-…"
        if owner is None:
            alone.append([f])
        else:
            members[owner].append(f)
    order = sorted(range(len(mains)), key=lambda i: (mains[i][2] is None, mains[i][2] or 0, str(mains[i][0])))
    return [[members[i][0], *sorted(members[i][1:], key=str)] for i in order] + sorted(alone, key=lambda g: str(g[0]))


def _read_file(path: Path, ctx: ImportContext) -> _File:
    out = _File(str(path))
    for line, raw in iter_records(path, ctx, "Claude Code session"):
        t = raw.get("type")
        if not isinstance(t, str):
            ctx.bad(out.path, line, "record without a string 'type' (not a Claude Code session record)")
            continue
        if t not in _KNOWN:
            ctx.unknown(out.path, line, repr(t))
            continue
        if t in ("user", "assistant"):
            msg = raw.get("message")
            if not isinstance(msg, dict):
                ctx.bad(out.path, line, f"{t} record: 'message' must be an object, got {type(msg).__name__}")
                continue
            c = msg.get("content")
            if not isinstance(c, (list, str)):  # a string is one text block, as in the Messages API
                ctx.bad(out.path, line, f"{t} record: message.content must be a string or list, got "
                        f"{type(c).__name__}")
                continue
            if isinstance(c, list) and not all(isinstance(b, dict) for b in c):
                ctx.bad(out.path, line, f"{t} record: content blocks must be objects")
                continue
            u = msg.get("usage")
            if u is not None and not isinstance(u, dict):
                ctx.bad(out.path, line, f"assistant record: message.usage must be an object, got {type(u).__name__}")
                continue
        ts, unreadable = record_time(raw.get("timestamp"))
        if unreadable:
            ctx.bad(out.path, line, unreadable)
            continue
        if isinstance(raw.get("sessionId"), str):
            out.session_ids.add(raw["sessionId"])
            if out.session_id is None:
                out.session_id = raw["sessionId"]
                # a sub-agent file says so on its first record (as :func:`group` reads it); a main file's
                # Task result or inline side chain can carry the agentId of the sub-agent it ran
                if isinstance(raw.get("agentId"), str):
                    out.agent_id = raw["agentId"]
        out.recs.append(_Rec(line, out.path, raw, ts))
    return out


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _prompt_shape(msgs: list[tuple[tuple[str, ...], str, list]]) -> dict[str, Any]:
    """What the miss explainer needs of a prompt's layout: whether the request was triggered by tool results
    or by a user turn of another kind, and whether earlier assistant turns hold (extended) thinking."""
    out: dict[str, Any] = {}
    if msgs and msgs[-1][1] == "user":
        kinds = {b.get("type") for b in msgs[-1][2]}
        out["agentprof.prompt.trigger"] = "tool_result" if kinds == {"tool_result"} else \
            "user_text" if "tool_result" not in kinds else "tool_result+user_text"
    if any(role == "assistant" and any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks)
           for _key, role, blocks in msgs):
        out["agentprof.prompt.thinking"] = True
    return out


# Anthropic API error types by HTTP status (https://docs.anthropic.com/en/api/errors), for retry records whose
# error object carries a status but no error body (network-level failures carry neither)
_STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                 504: "timeout_error", 529: "overloaded_error"}


def _is_retry(rec: _Rec) -> bool:
    """A ``system/api_error`` record: the CLI logged a failed API attempt that it will retry."""
    return rec.type == "system" and rec.raw.get("subtype") == "api_error"


def _retry_status(raw: dict[str, Any]) -> int | None:
    """HTTP status of a retried attempt: ``error.status``, else ``api_error_status``, else ``error.formatted``."""
    err = raw.get("error")
    cands = [err.get("status") if isinstance(err, dict) else None, raw.get("api_error_status")]
    for c in cands:
        if isinstance(c, int) and not isinstance(c, bool):
            return c
    fmt = err.get("formatted") if isinstance(err, dict) else None
    if isinstance(fmt, str) and fmt[:3].isdigit() and (len(fmt) == 3 or not fmt[3].isdigit()):
        return int(fmt[:3])  # "529 Overloaded"
    return None


def _retry_error_type(raw: dict[str, Any], status: int | None) -> str:
    """The API error type of a retried attempt, whichever of the layouts the CLI version wrote.

    The error is the serialized SDK error: ``{status, headers, requestID, error: {type: "error", error: {type,
    message}}}`` (Anthropic body), a gateway's ``{error: {type, code, message}}``, a connection failure
    ``{message, formatted, connection|cause: {code}}``, or a plain string (``"Connection error (ECONNRESET)"``).
    """
    err = raw.get("error")
    if isinstance(err, dict):
        body = err.get("error")
        if isinstance(body, dict):
            inner = body.get("error")
            if isinstance(inner, dict) and isinstance(inner.get("type"), str) and inner["type"]:
                return inner["type"]
        for t in (err.get("type"), body.get("type") if isinstance(body, dict) else None):
            if isinstance(t, str) and t and t != "error":
                return t
        for k in ("connection", "cause"):
            code = err.get(k).get("code") if isinstance(err.get(k), dict) else None
            if isinstance(code, str) and code:
                return code
        if status in _STATUS_TYPES:
            return _STATUS_TYPES[status]
        text = " ".join(str(err.get(k) or "") for k in ("message", "formatted"))
    else:
        if status in _STATUS_TYPES:
            return _STATUS_TYPES[status]
        text = err if isinstance(err, str) else ""
    code = text[text.rfind("(") + 1:text.rfind(")")] if text.rfind("(") < text.rfind(")") else ""
    if code.isupper() or (code[:1].isupper() and code.isalnum()):  # "... (ECONNRESET)", "(FailedToOpenSocket)"
        return code
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        return "timeout"
    if "connect" in low:
        return "connection_error"
    return f"http_{status}" if status is not None else "api_error"


def _retry_delay_ns(raw: dict[str, Any]) -> int | None:
    """The back-off the CLI announced before the next attempt (``retryInMs``, fractional ms), or None."""
    ms = raw.get("retryInMs")
    if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms >= 0:
        return int(ms * 1_000_000)
    return None


def _user_text(rec: _Rec) -> str | None:
    """The text of a user record that is a typed prompt (not a tool result or a meta message)."""
    if rec.raw.get("isMeta") or rec.raw.get("isCompactSummary") or rec.raw.get("toolUseResult") is not None:
        return None
    blocks = _blocks(rec.content)
    if not blocks or any(b.get("type") == "tool_result" for b in blocks):
        return None
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


class _Importer:
    def __init__(self, files: list[_File], ctx: ImportContext, main_path: Path) -> None:
        self.files = files
        self.ctx = ctx
        main = files[0]
        stem = Path(main.path).stem
        # a resumed session's file starts with records copied from the session it continues (that id)
        self.sid = stem if stem in main.session_ids else (main.session_id or stem)
        # records already imported from an earlier file (the copies) feed prompts but make no spans
        self.emitted: set[str] = ctx.seen.setdefault(FORMAT, set())
        self.copies = {r.uuid for f in files for r in f.recs if r.uuid and r.uuid in self.emitted}
        copied_ts = [r.ts for f in files for r in f.recs if r.uuid in self.copies and r.ts is not None]
        self.copy_until = max(copied_ts) if copied_ts else None
        digest = xxhash.xxh3_64_hexdigest(read_bytes(main_path))
        self.b = SpanBuilder(FORMAT, f"{self.sid}\x1f{digest}", ctx, path=str(main_path))
        self.by_uuid: dict[str, _Rec] = {}
        self.tool_results: dict[str, tuple[_Rec, dict[str, Any]]] = {}
        self.pre_hooks: dict[str, int] = {}
        self.tool_spans: dict[str, str] = {}          # tool_use id -> span id
        self.tool_session: dict[str, str] = {}        # tool_use id -> session id
        self.agent_tool: dict[str, str] = {}          # agentId -> tool_use id
        self.tool_use_rec: dict[str, _Rec] = {}       # tool_use id -> assistant record
        self.msg_records: dict[str, list[_Rec]] = {}  # file + message id -> its assistant records (per block)
        self.seg_cache: dict[tuple[str, ...], list[Segment]] = {}
        self.version: str | None = None
        self.fingerprinters: dict[str, Any] = {}
        self.backoff_end: dict[tuple[str, int], int] = {}  # retry record (file, line) -> end of its back-off
        self.extent: dict[str, tuple[int, int] | None] = {}      # session -> first/last own record time
        self.tool_end: dict[str, int] = {}                         # tool_use id -> its span's end
        self.wait_spans: list[tuple[str, str, int, int]] = []     # (session, span id, start, end)
        self.inline_agents: dict[str, str] = {}                    # inline side chain session -> agentId

    def _background_host(self, sess: str, tool: str | None) -> str | None:
        """For a sub-agent that outlived the tool call that launched it (a background agent: the call returns
        at once), the span it ran under: the parent's wait that its end falls in (the agent idled until the
        completion notice), else the parent session's agent span. ``None`` when it ran inside its tool call."""
        ext = self.extent.get(sess)
        if not tool or tool not in self.tool_spans or ext is None:
            return None
        tool_end = self.tool_end.get(tool)
        if tool_end is None or ext[1] <= tool_end + _BACKGROUND_SLACK_NS:
            return None
        parent_sess = self.tool_session.get(tool, self.sid)
        for w_sess, w_id, w_start, w_end in self.wait_spans:
            if w_sess == parent_sess and w_start <= ext[1] <= w_end:
                return w_id
        return self.b.agent_span_id(parent_sess)

    def _is_copy(self, r: _Rec) -> bool:
        """A record copied from a session imported earlier (records without a uuid: written among the copies)."""
        if not self.copies:
            return False
        if r.uuid:
            return r.uuid in self.copies
        return self.copy_until is not None and (r.ts is None or r.ts <= self.copy_until)

    # ---------------------------------------------------------------- indexing
    def index(self) -> None:
        for f in self.files:
            for r in f.recs:
                if r.uuid:
                    self.by_uuid.setdefault(r.uuid, r)
                if self.version is None and isinstance(r.raw.get("version"), str):
                    self.version = r.raw["version"]
                if r.type == "assistant":
                    mid = (r.raw.get("message") or {}).get("id") or r.uuid or r.line
                    self.msg_records.setdefault(f"{r.file}\x1f{mid}", []).append(r)
                    for b in _blocks(r.content):
                        if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                            self.tool_use_rec.setdefault(b["id"], r)
                elif r.type == "user":
                    for b in _blocks(r.content):
                        if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                            self.tool_results.setdefault(b["tool_use_id"], (r, b))
                    tur = r.raw.get("toolUseResult")
                    # the Task result names the sub-agent it ran (in toolUseResult, or on the record itself)
                    aid = tur.get("agentId") if isinstance(tur, dict) else None
                    if not isinstance(aid, str) and not r.raw.get("isSidechain"):
                        aid = r.raw.get("agentId")
                    if isinstance(aid, str):
                        for b in _blocks(r.content):
                            if b.get("type") == "tool_result":
                                self.agent_tool.setdefault(aid, b.get("tool_use_id"))
                elif r.type == "progress":
                    data = r.raw.get("data") or {}
                    tid = r.raw.get("toolUseID")
                    if isinstance(data, dict) and data.get("hookEvent") == "PreToolUse" and isinstance(tid, str) \
                            and r.ts is not None:
                        self.pre_hooks[tid] = min(self.pre_hooks.get(tid, r.ts), r.ts)

    def assign_sessions(self) -> list[tuple[str, dict[str, Any]]]:
        """Give every record its session; returns ``(session_id, declaration kwargs)`` in order."""
        decl: list[tuple[str, dict[str, Any]]] = []
        main = self.files[0]
        seg = 0
        cur = self.sid
        decl.append((cur, {"role": "main" if main.agent_id is None else "subagent"}))
        side_root: dict[str, str] = {}
        file_agents = {f.agent_id or Path(f.path).stem for f in self.files[1:]}
        for r in main.recs:
            if r.type == "system" and r.raw.get("subtype") == "compact_boundary":
                seg += 1
                meta = r.raw.get("compactMetadata") or {}
                prev = cur
                cur = f"{self.sid}/compact-{seg}"
                decl.append((cur, {"role": "compaction", "parent_session_id": self.sid, "attributes": {
                    "agentprof.compaction.trigger": meta.get("trigger") if isinstance(meta, dict) else None,
                    "agentprof.compaction.pre_tokens": meta.get("preTokens") if isinstance(meta, dict) else None,
                    "agentprof.compaction.previous_session": prev}}))
            if r.raw.get("isSidechain") and main.agent_id is None:
                aid = r.raw.get("agentId")
                if isinstance(aid, str) and aid and aid not in file_agents:  # a sub-agent's records, inline
                    sess = f"{self.sid}/agent-{aid}"
                    attrs: dict[str, Any] = {sc.AGENT_ID: aid}
                    self.inline_agents[sess] = aid
                else:
                    sess = f"{self.sid}/sidechain-{self._sidechain_root(r, side_root)[:8]}"
                    attrs = {}
                if not any(s == sess for s, _ in decl):
                    decl.append((sess, {"role": "subagent", "parent_session_id": cur, "attributes": attrs}))
                r.session = sess
            else:
                r.session = cur
        for f in self.files[1:]:
            aid = f.agent_id or Path(f.path).stem
            sess = f"{self.sid}/agent-{aid}"
            parent = None
            tool = self.agent_tool.get(aid)
            first_parent = next((r.parent for r in f.recs if r.parent), None)
            if tool and tool in self.tool_use_rec and self.tool_use_rec[tool].session:
                parent = self.tool_use_rec[tool].session
            elif first_parent and first_parent in self.by_uuid and self.by_uuid[first_parent].session:
                parent = self.by_uuid[first_parent].session
            kind = "compact" if aid.startswith("acompact") else None
            decl.append((sess, {"role": "subagent", "parent_session_id": parent or self.sid,
                                "attributes": {sc.AGENT_ID: aid, "agentprof.subagent.type": kind}}))
            for r in f.recs:
                r.session = sess
        return decl

    def _sidechain_root(self, r: _Rec, memo: dict[str, str]) -> str:
        path = []
        cur: _Rec | None = r
        root = r.uuid or str(r.line)
        while cur is not None:
            if cur.uuid in memo:
                root = memo[cur.uuid]
                break
            path.append(cur.uuid)
            nxt = self.by_uuid.get(cur.parent) if cur.parent else None
            if nxt is None or not nxt.raw.get("isSidechain"):
                root = cur.uuid or root
                break
            cur = nxt
        for u in path:
            if u:
                memo[u] = root
        return root

    # ---------------------------------------------------------------- prompts
    def _chain(self, first: _Rec) -> list[_Rec]:
        out: list[_Rec] = []
        seen: set[str] = set()
        cur = self.by_uuid.get(first.parent) if first.parent else None
        while cur is not None and cur.uuid not in seen:
            seen.add(cur.uuid or "")
            if cur.type in ("user", "assistant"):
                out.append(cur)
            cur = self.by_uuid.get(cur.parent) if cur.parent else None
        out.reverse()
        return out

    def _messages(self, chain: list[_Rec], before: int | None) -> list[tuple[tuple[str, ...], str, list]]:
        """``(key, role, blocks)`` per API message: every block of one assistant message (records with its
        ``message.id``, also those off the chain), consecutive user records merged, tool results of parallel
        tool calls (off the chain) restored.

        With streaming tool execution a tool's result is written while later blocks of the same message still
        stream, and the next block points to that result: the chain then interleaves blocks and results, and
        blocks whose results finished last are on no chain at all. The API request holds the whole message."""
        msgs: list[tuple[list[str], str, list[dict[str, Any]]]] = []
        where: dict[str, int] = {}  # message id -> index in msgs
        for r in chain:
            if r.type == "assistant":
                if (r.raw.get("message") or {}).get("model") == "<synthetic>" or r.raw.get("isApiErrorMessage"):
                    continue
                mid = f"{r.file}\x1f{(r.raw.get('message') or {}).get('id') or r.uuid or r.line}"
                if mid in where:
                    continue  # its blocks are gathered below, in stream order
                where[mid] = len(msgs)
                msgs.append(([f"m:{mid}"], "assistant", []))
            else:
                blocks = _blocks(r.content)
                if msgs and msgs[-1][1] == "user":
                    msgs[-1][2].extend(blocks)
                    msgs[-1][0].append(r.uuid or "")
                else:
                    msgs.append(([r.uuid or ""], "user", list(blocks)))
        on_chain = {r.uuid for r in chain}
        for mid, i in where.items():
            for r in self.msg_records.get(mid) or []:
                if r.uuid in on_chain or before is None or r.ts is None or r.ts <= before:
                    msgs[i][2].extend(_blocks(r.content))
                    msgs[i][0].append(r.uuid or "")
        # restore missing tool results (parallel tool calls: only one result lies on the chain)
        for i, (_key, role, blocks) in enumerate(msgs):
            if role != "assistant":
                continue
            ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            if not ids or i + 1 >= len(msgs) or msgs[i + 1][1] != "user":
                continue
            nxt = msgs[i + 1]
            have = {b.get("tool_use_id") for b in nxt[2] if b.get("type") == "tool_result"}
            missing = [t for t in ids if t not in have and t in self.tool_results]
            add = []
            for t in missing:
                rec, blk = self.tool_results[t]
                if before is None or rec.ts is None or rec.ts <= before:
                    add.append(blk)
                    nxt[0].append(f"r:{t}")
            order = {t: k for k, t in enumerate(ids)}
            results = sorted([b for b in nxt[2] if b.get("type") == "tool_result"] + add,
                             key=lambda b: order.get(b.get("tool_use_id"), len(order)))
            others = [b for b in nxt[2] if b.get("type") != "tool_result"]
            nxt[2][:] = results + others
        return [(tuple(k), role, blocks) for k, role, blocks in msgs]

    def _segments(self, msgs: list[tuple[tuple[str, ...], str, list]]) -> list[Segment]:
        segs: list[Segment] = []
        for key, role, blocks in msgs:
            hit = self.seg_cache.get(key)
            if hit is None:
                hit = anthropic_segments(None, [{"role": role, "content": blocks}])
                self.seg_cache[key] = hit
            segs.extend(hit)
        return segs

    # ---------------------------------------------------------------- spans
    def run(self) -> Trace:
        self.index()
        decl = self.assign_sessions()
        recs_by_session: dict[str, list[_Rec]] = {}
        for f in self.files:
            for r in f.recs:
                if not self._is_copy(r):
                    recs_by_session.setdefault(r.session, []).append(r)
        if self.copies:  # segments and side chains made only of copied records belong to the earlier file
            decl = [(sess, kw) for sess, kw in decl if sess in recs_by_session or
                    (sess == self.sid and recs_by_session)]  # a file of copies only adds nothing
            self.ctx.note("resumed_session_copies", f"{len(self.copies)} record(s) repeat records of a session "
                          "imported from another file (a resumed session); they are used for prompts only",
                          self.files[0].path)
        declared = {sess for sess, _ in decl}
        for sess, kw in decl:
            # meta records (hook context, caveats) can be copies with the time of the record they annotate:
            # the compaction agent's file starts with the parent's hook notes from minutes earlier
            rs = [r.ts for r in recs_by_session.get(sess, []) if r.ts is not None and not r.raw.get("isMeta")] or \
                [r.ts for r in recs_by_session.get(sess, []) if r.ts is not None]
            attrs = dict(kw.pop("attributes", None) or {})
            durs = [r.raw.get("durationMs") for r in recs_by_session.get(sess, [])
                    if r.type == "system" and r.raw.get("subtype") == "turn_duration"]
            attrs["agentprof.claude_code.turn_duration_ms"] = sum(d for d in durs if isinstance(d, (int, float))) \
                if durs else None
            attrs["agentprof.source.version"] = self.version
            self.extent[sess] = (min(rs), max(rs)) if rs else None
            self.b.session(sess, agent_name="claude-code", start_ns=min(rs) if rs else None,
                           end_ns=max(rs) if rs else None, attributes=attrs, **kw)
        for sess, kw in decl:
            self._session_spans(sess, recs_by_session.get(sess, []), waits=kw.get("role") != "subagent")
        # sub-agent sessions hang under the tool call that ran them
        for f in self.files[1:]:
            aid = f.agent_id or Path(f.path).stem
            tool = self.agent_tool.get(aid)
            sess = f"{self.sid}/agent-{aid}"
            if sess not in declared:
                continue
            launched = self._background_host(sess, tool)
            if launched is not None:
                self.b.set_session_parent(sess, launched)
            elif tool and tool in self.tool_spans:
                self.b.set_session_parent(sess, self.tool_spans[tool])
            else:
                self.b.set_session_parent(sess, self.b.agent_span_id(self.b.cols["parent_session_id"][
                    self.b.sessions[sess].agent_row] or self.sid))
        for sess, aid in self.inline_agents.items():  # side chains of a known sub-agent: under its tool call
            tool = self.agent_tool.get(aid)
            if sess in declared and tool and tool in self.tool_spans:
                launched = self._background_host(sess, tool)
                self.b.set_session_parent(sess, launched if launched is not None else self.tool_spans[tool])
        self.emitted.update(r.uuid for f in self.files for r in f.recs if r.uuid)
        for sess, kw in decl:
            if (kw.get("role") in ("compaction",) or sess.startswith(f"{self.sid}/sidechain-") or (
                    sess in self.inline_agents and self.agent_tool.get(self.inline_agents[sess]) not in self.tool_spans)):
                parent = self.b.cols["parent_session_id"][self.b.sessions[sess].agent_row]
                if parent in self.b.sessions:
                    self.b.set_session_parent(sess, self.b.agent_span_id(parent))
        meta = TraceMeta(source_format=FORMAT, sources=[f.path for f in self.files],
                         extra={"agent_version": self.version} if self.version else {})
        return Trace(meta, self.b.finish(), [])

    def _session_spans(self, sess: str, recs: list[_Rec], waits: bool) -> None:
        calls: dict[str, list[_Rec]] = {}
        order: list[str] = []
        # retry records belong to the next call of their session; a typed prompt before it ends the run
        # (the attempts were abandoned: interrupted, or the session ended)
        retries: dict[str, list[_Rec]] = {}
        orphans: list[tuple[list[_Rec], int | None]] = []  # (run, time of the record that ended it)
        pending: list[_Rec] = []
        for r in recs:
            if _is_retry(r):
                pending.append(r)
            elif r.type == "assistant":
                msg = r.raw["message"]
                key = str(msg.get("id") or r.raw.get("requestId") or r.uuid or r.line)
                if key not in calls:
                    calls[key] = []
                    order.append(key)
                    if pending:
                        retries[key], pending = pending, []
                calls[key].append(r)
            elif pending and r.type == "user" and not r.raw.get("isMeta"):
                orphans.append((pending, r.ts))
                pending = []
        if pending:
            orphans.append((pending, None))
        for key in order:
            self._model_call(sess, key, calls[key], retries.get(key, []))
        for run, bound in orphans:
            first = self._trigger(run[0])
            self._retries(sess, run, first.ts if first is not None else None, None, bound)
        if waits:  # a sub-agent's prompts come from its parent agent, not from a person
            self._waits(sess, recs)

    def _trigger(self, rec: _Rec) -> _Rec | None:
        """The record a request was sent for: ``rec``'s parent, past the retry records logged in between."""
        seen: set[str] = set()
        cur = self.by_uuid.get(rec.parent) if rec.parent else None
        while cur is not None and _is_retry(cur) and cur.parent and cur.parent not in seen:
            seen.add(cur.parent)
            cur = self.by_uuid.get(cur.parent)
        return None if cur is not None and _is_retry(cur) else cur

    def _retries(self, sess: str, run: list[_Rec], start: int | None, model: str | None,
                 bound: int | None) -> int | None:
        """One failed ``model`` span per retry record and a ``retry`` wait for its back-off; returns when the
        next attempt started (the last back-off's end), or ``start`` when no record has a time.

        An attempt starts at ``start`` (the request's trigger) or the previous back-off's end and fails at the
        record's time; the back-off is ``retryInMs`` from there, clipped at the next record (``bound``)."""
        timed = [r for r in run if r.ts is not None]
        for i, r in enumerate(timed):
            end = r.ts
            assert end is not None
            begin = end if start is None or start > end else start
            status = _retry_status(r.raw)
            m = model
            if m is None and isinstance(r.raw.get("message"), dict) and r.raw["message"].get("model") != "<synthetic>":
                m = r.raw["message"].get("model")
            attempt = r.raw.get("retryAttempt")
            attrs: dict[str, Any] = {
                "agentprof.source.line": r.line, sc.HTTP_STATUS_CODE: status,
                "agentprof.claude_code.api_error_status": status, "agentprof.retry.attempt": attempt,
                "agentprof.retry.max": r.raw.get("maxRetries"),
                "agentprof.timing.start": "request trigger" if start is not None and i == 0 else
                "end of the previous retry back-off" if start is not None else "unknown (record time)"}
            self.b.add(sess, "model", sc.model_span_name(m), key=("retry", r.file, r.line), start_ns=begin,
                       end_ns=end, timing="derived", status="error", error_type=_retry_error_type(r.raw, status),
                       model=m, provider=(provider_for_model(m) or "anthropic") if m else None, stream=True,
                       attributes=attrs)
            nxt = timed[i + 1].ts if i + 1 < len(timed) else bound
            delay = _retry_delay_ns(r.raw)
            start = end
            if delay is None:
                continue
            stop = end + delay
            clipped = nxt is not None and nxt >= end and stop > nxt
            if clipped:
                assert nxt is not None
                stop = nxt
            self.backoff_end[(r.file, r.line)] = stop
            if stop > end:
                self.b.add(sess, "wait", "wait retry", key=("backoff", r.file, r.line), start_ns=end, end_ns=stop,
                           timing="derived", attributes={
                               sc.WAIT_REASON: waits.RETRY, "agentprof.source.line": r.line,
                               "agentprof.retry.attempt": attempt, "agentprof.retry.delay_ms": r.raw["retryInMs"],
                               "agentprof.retry.clipped": True if clipped else None})
            start = stop
        return start

    def _model_call(self, sess: str, key: str, blocks: list[_Rec], retries: list[_Rec] | None = None) -> None:
        first, _last = blocks[0], blocks[-1]
        msg = first.raw["message"]
        model = msg.get("model")
        trigger = self._trigger(first)
        start = trigger.ts if trigger is not None and trigger.ts is not None and first.ts is not None and \
            trigger.ts <= first.ts else first.ts
        end = max((r.ts for r in blocks if r.ts is not None), default=None)
        failed = next((r for r in blocks if r.raw.get("isApiErrorMessage")), None)
        prompt_at = start  # the request's content was fixed when it was first sent
        timing_start = "trigger record (parentUuid of the first block)"
        if retries:
            first_try = trigger.ts if trigger is not None and trigger.ts is not None else None
            start = self._retries(sess, retries, first_try, None if model == "<synthetic>" else model, first.ts)
            timing_start = "end of the last retry back-off (system/api_error retryInMs)"
            if start is None or (first.ts is not None and start > first.ts):
                start = first.ts
        if model == "<synthetic>" or failed is not None:
            # the CLI's own message in the model's place: a failed request (isApiErrorMessage) or a notice
            if failed is None:
                return
            err = failed.raw.get("error")
            attrs_err: dict[str, Any] = {"agentprof.source.line": first.line,
                                         "agentprof.claude_code.api_error_status": failed.raw.get("apiErrorStatus"),
                                         "agentprof.retry.count": len(retries) if retries else None}
            self.b.add(sess, "model", sc.model_span_name(None), key=("call", key), start_ns=start, end_ns=end,
                       timing="derived", status="error",
                       error_type=err if isinstance(err, str) and err else "api_error", attributes=attrs_err)
            return
        # usage: the final record of the message carries the final counts
        usages = [r.raw["message"].get("usage") for r in blocks]
        final = max((u for u in usages if isinstance(u, dict)), key=lambda u: u.get("output_tokens") or 0,
                    default=None)
        usage = normalize_usage(final, provider="anthropic") if final else None
        hasher = self.ctx.prompt_hasher()
        visible = 0
        content: list[dict[str, Any]] = []
        for r in blocks:
            content.extend(_blocks(r.content))
        for b in content:
            if b.get("type") == "text":
                visible += len(hasher.tokens(str(b.get("text", ""))))
            elif b.get("type") == "tool_use":
                visible += len(hasher.tokens(f"{b.get('name', '')} {canonical_json(b.get('input', {}))}"))
        out = resolve_streamed_output([u.get("output_tokens") if isinstance(u, dict) else None for u in usages],
                                      visible_tokens=visible or None)
        attrs: dict[str, Any] = {sc.RESPONSE_ID: msg.get("id"), "agentprof.source.line": first.line,
                                 "agentprof.usage.output_tokens_source": out.source,
                                 "agentprof.timing.start": timing_start,
                                 "agentprof.retry.count": len(retries) if retries else None}
        if out.source == "estimate":
            attrs["agentprof.usage.output_tokens_reported"] = out.reported
        if final and isinstance(final.get("cache_creation"), dict):
            cc = final["cache_creation"]
            attrs["agentprof.usage.cache_write_5m"] = cc.get("ephemeral_5m_input_tokens")
            attrs["agentprof.usage.cache_write_1h"] = cc.get("ephemeral_1h_input_tokens")
        stop = next((r.raw["message"].get("stop_reason") for r in reversed(blocks)
                     if r.raw["message"].get("stop_reason")), None)
        if stop:
            attrs[sc.RESPONSE_FINISH_REASONS] = [stop]
        fp = None
        chain = self._chain(first)
        if chain:
            fper = self.fingerprinters.get(sess)
            if fper is None:
                fper = self.fingerprinters[sess] = self.ctx.fingerprinter()
            msgs = self._messages(chain, prompt_at)
            fp = fper.fingerprint(self._segments(msgs))
            attrs.update(_prompt_shape(msgs))
        if usage is None and out.output_tokens is not None:
            usage = Usage(output_tokens=out.output_tokens, convention="anthropic")
        if usage is not None:
            usage.output_tokens = out.output_tokens
        for problem in out.problems:
            self.ctx.note("usage_placeholder", f"{problem}; the visible-output count is used (a lower bound)",
                          first.file, first.line)
        sid = self.b.add_model_call(sess, model=model, provider=provider_for_model(model) or "anthropic",
                                    usage=usage, fingerprint=fp, path=first.file, line=first.line,
                                    key=("call", key), start_ns=start, end_ns=end, timing="derived", stream=True,
                                    attributes=attrs)
        for r in blocks:
            for b in _blocks(r.content):
                if b.get("type") == "tool_use":
                    self._tool(sess, r, b, sid)

    def _tool(self, sess: str, rec: _Rec, block: dict[str, Any], model_span: str) -> None:
        tid = block.get("id")
        if not isinstance(tid, str) or tid in self.tool_spans:
            return
        name = str(block.get("name") or "tool")
        res = self.tool_results.get(tid)
        attrs: dict[str, Any] = {sc.TOOL_CALL_ID: tid, sc.TOOL_NAME: name, "agentprof.source.line": rec.line,
                                 "agentprof.tool.requested_by": model_span}
        status, err = "ok", None
        start, end, timing = rec.ts, None, "derived"
        if res is None:
            self.tool_session[tid] = sess
            self.tool_spans[tid] = self.b.add(sess, "tool", sc.tool_span_name(name), key=("tool", tid),
                                              start_ns=start, timing="unknown", status="error",
                                              error_type="no_result", attributes=attrs)
            return
        rrec, rblock = res
        end = rrec.ts
        tur = rrec.raw.get("toolUseResult")
        text = content_text(rblock.get("content"))
        rejected = (isinstance(tur, str) and tur.startswith(_REJECTED[1])) or text.startswith(_REJECTED[0])
        if rejected:
            w = self.b.add(sess, "wait", f"wait {waits.APPROVAL}", key=("perm", tid), start_ns=rec.ts, end_ns=end,
                           timing="derived", attributes={sc.WAIT_REASON: waits.APPROVAL, sc.TOOL_CALL_ID: tid,
                                                         "agentprof.wait.outcome": "rejected",
                                                         "agentprof.wait.after": "tool_use",
                                                         "agentprof.wait.until": "rejection (tool_result)"})
            attrs["agentprof.tool.permission_wait"] = w
            self.tool_session[tid] = sess
            self.tool_spans[tid] = self.b.add(sess, "tool", sc.tool_span_name(name), key=("tool", tid),
                                              start_ns=end, end_ns=end, timing="derived", status="error",
                                              error_type="rejected", attributes=attrs)
            return
        dur = None
        if isinstance(tur, dict):
            dur = tur.get("durationMs", tur.get("totalDurationMs"))
            secs = tur.get("durationSeconds")  # WebSearch results (2.1.x) give seconds
            if dur is None and isinstance(secs, (int, float)) and not isinstance(secs, bool):
                dur = secs * 1000.0
            if tur.get("interrupted"):
                status, err = "error", "interrupted"
            if tur.get("backgroundTaskId"):
                attrs["agentprof.tool.background_task"] = tur.get("backgroundTaskId")
            if isinstance(tur.get("agentId"), str):
                attrs[sc.AGENT_ID] = tur["agentId"]
        if rblock.get("is_error") and status == "ok":
            status, err = "error", "tool_error"
        if isinstance(dur, (int, float)) and not isinstance(dur, bool) and end is not None:
            start, timing = end - int(dur * 1_000_000), "measured"
        elif tid in self.pre_hooks and end is not None and self.pre_hooks[tid] <= end:
            start, timing = self.pre_hooks[tid], "measured"
        self.tool_session[tid] = sess
        if end is not None:
            self.tool_end[tid] = end
        self.tool_spans[tid] = self.b.add(sess, "tool", sc.tool_span_name(name), key=("tool", tid), start_ns=start,
                                          end_ns=end, timing=timing, status=status, error_type=err,
                                          attributes=attrs)

    def _waits(self, sess: str, recs: list[_Rec]) -> None:
        queued: list[tuple[int, str]] = []
        for f in self.files:
            for r in f.recs:
                if r.type == "queue-operation" and r.raw.get("operation") == "enqueue" and r.ts is not None:
                    queued.append((r.ts, str(r.raw.get("content", ""))))
        prev: int | None = None
        for r in recs:
            if r.ts is None or r.type in ("queue-operation", "file-history-snapshot"):
                continue
            if r.type == "user" and prev is not None and r.ts > prev:
                text = _user_text(r)
                if text is not None and not text.startswith(_NOT_PROMPTS[0]):
                    # a background task's notification ends a wait nobody typed: idle, not the user's turn
                    reason = waits.IDLE if text.lstrip().startswith(_NOT_PROMPTS[1]) else waits.USER_TURN
                    end = r.ts
                    q = [t for t, c in queued if prev < t <= r.ts and c.strip() and c.strip() in text]
                    if q:
                        end = min(q)  # typed while the agent was busy: the wait ended when it was queued
                    if end > prev:
                        wid = self.b.add(sess, "wait", f"wait {reason}", key=("wait", r.uuid or r.line),
                                         start_ns=prev, end_ns=end, timing="measured",
                                         attributes={sc.WAIT_REASON: reason, "agentprof.source.line": r.line,
                                                     "agentprof.wait.until": "task notification" if reason ==
                                                     waits.IDLE else ("queued prompt" if q else "user prompt")})
                        self.wait_spans.append((sess, wid, prev, end))
            prev = r.ts if prev is None else max(prev, r.ts)
            if _is_retry(r):  # the CLI was backing off, not waiting for anyone
                prev = max(prev, self.backoff_end.get((r.file, r.line), prev))


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one Claude Code session: its main file first, then its sub-agent files."""
    files = [_read_file(Path(p), ctx) for p in paths]
    return _Importer(files, ctx, Path(paths[0])).run()
