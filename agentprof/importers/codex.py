"""OpenAI Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Mapping (see ``docs/IMPORTING.md``):

- one rollout -> one session; a ``compacted`` record starts a new segment (child session, role ``compaction``)
  whose history is the compaction's ``replacement_history`` (or its summary message); a sub-agent thread's
  rollout (``session_meta.source.subagent.thread_spawn``) is a child session of its parent thread, and the
  parent's records replayed at its start (also in forks, ``forked_from_id``) are context, not calls;
- model calls: each ``event_msg/token_count`` with usage closes one call (``last_token_usage``, or the
  difference of consecutive ``total_token_usage`` where a build reports totals only; OpenAI subset semantics;
  a repeated report of the same totals is the same call). Files without ``token_count`` use
  ``token_usage_record`` (``usage``, paginated history mode). A count written before the response's items
  (0.4x) keeps those items as its outputs. A response cut short by ``turn_aborted`` is a failed call ending
  at the interruption. Start = the last input record before the
  call's first output item (tool output, user message, ``turn_context``) or the previous call's end, whichever
  is later: progress events written while a response streams or a background command ends
  (``agent_reasoning``, ``agent_message``, ``exec_command_end``, rate-limit ``token_count``) are not request
  starts. End = the ``token_count`` record: ``derived``. Rollouts without ``token_count`` close a call when the
  next input arrives, at its last output item. The model comes from the latest ``turn_context``;
  ``task_complete.time_to_first_token_ms`` becomes the first call's TTFT;
- prompts: ``base_instructions`` + every response item logged before the call's first output item (user
  turns logged only as ``event_msg/user_message`` are inserted as user messages). Tool definitions are not
  logged;
- tools: ``function_call``/``custom_tool_call``/``local_shell_call`` -> their output. ``exec_command_end``
  ``duration``, ``custom_tool_call_output`` ``metadata.duration_seconds`` and the unified exec output's
  ``Wall time:`` header give measured spans ending at the record; otherwise call -> output (derived). ``web_search_call`` runs inside the model call (an attribute);
- turn structure: without ``token_count`` a response also ends at a new turn (``task_started``,
  ``turn_context``, a user message as item or event), at a ``final_answer`` message, or where a ``reasoning``
  item follows an answer message, so no call spans a user turn or an answer;
- waits: the answer (``task_complete``, else the last answer message, else the session start) -> the next
  turn's first record (``user_turn``; in paginated history mode the ``item_completed`` UserMessage event);
  approval requests -> the next event of the same call, and escalated commands (``sandbox_permissions:
  "require_escalated"``) -> their measured start (``approval``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xxhash

from agentprof import semconv as sc
from agentprof.importers.context import ImportContext
from agentprof.importers.jsonl import iter_records, read_bytes
from agentprof.importers.providers import provider_for_model
from agentprof.importers.spans import SpanBuilder
from agentprof.importers.timestamps import iso_to_ns, record_time, seconds_to_ns
from agentprof.trace import waits
from agentprof.trace.prompt import Segment, content_text, responses_segments
from agentprof.trace.schema import Trace, TraceMeta
from agentprof.trace.usage import normalize_usage

FORMAT = "codex"
_TOP = {"session_meta", "turn_context", "response_item", "event_msg", "compacted", "token_usage_record"}
# durable records of newer builds (thread state, inter-agent metadata) that say nothing about calls or tools
_IGNORED_TOP = {"world_state", "retained_context", "security_risk_score", "inter_agent_communication",
                "inter_agent_communication_metadata", "realtime_item"}
_OUTPUT_ITEMS = {"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call",
                 "image_generation_call", "tool_search_call"}
_INPUT_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output",
                "tool_search_output"}
_TOOL_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
_APPROVALS = {"exec_approval_request", "apply_patch_approval_request", "request_permissions"}
# records after which the next request can be sent (the request's input is complete there)
_TRIGGER_EVENTS = {"user_message", "task_started"}


ESCALATION_WAIT_MIN_S = 1.0
"""A command that asked to run outside the sandbox (``sandbox_permissions: "require_escalated"``) and started
this long after the model asked for it waited for the user's approval (the rollout has no approval event)."""


def _escalated(arguments: Any) -> bool:
    """Whether a tool call's arguments ask for escalated (unsandboxed) execution, which needs approval."""
    if not isinstance(arguments, str) or "escalat" not in arguments:
        return False
    try:
        args = json.loads(arguments)
    except ValueError:
        return False
    return isinstance(args, dict) and (args.get("sandbox_permissions") == "require_escalated"
                                       or args.get("with_escalated_permissions") is True)


def _is_output(item: dict[str, Any]) -> bool:
    t = item.get("type")
    if t == "message":
        return item.get("role") == "assistant"
    return t in _OUTPUT_ITEMS


def _is_turn_input(payload: dict[str, Any]) -> bool:
    """An event after which a request can be sent: a user turn (``user_message``, or in paginated history
    mode an ``item_completed`` UserMessage) or the turn's start."""
    et = payload.get("type")
    if et in _TRIGGER_EVENTS:
        return True
    item = payload.get("item")
    return et == "item_completed" and isinstance(item, dict) and item.get("type") == "UserMessage"


def _duration(v: Any) -> float | None:
    """``{secs, nanos}`` or seconds as a number."""
    if isinstance(v, dict):
        s, n = v.get("secs", 0), v.get("nanos", 0)
        if isinstance(s, (int, float)) and isinstance(n, (int, float)):
            return float(s) + float(n) / 1e9
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def _total_tokens(payload: dict[str, Any]) -> int:
    """The cumulative ``total_tokens`` of a ``token_count`` event (-1 when absent)."""
    info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
    total = info.get("total_token_usage") if isinstance(info.get("total_token_usage"), dict) else {}
    v = total.get("total_tokens")
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def _usage_delta(total: Any, prev: Any) -> dict[str, Any] | None:
    """One call's usage from two cumulative totals (``token_count`` events without ``last_token_usage``)."""
    if not isinstance(total, dict):
        return None
    prev = prev if isinstance(prev, dict) else {}
    out: dict[str, Any] = {}
    for k, v in total.items():
        if isinstance(v, int) and not isinstance(v, bool):
            p = prev.get(k)
            out[k] = v - p if isinstance(p, int) and not isinstance(p, bool) and p <= v else v
    return out or None


def _count_key(payload: dict[str, Any]) -> str:
    """A ``token_count`` event's usage, as a key: a replayed copy of a call has the same one."""
    info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
    return json.dumps([info.get("total_token_usage"), info.get("last_token_usage")], sort_keys=True)


_WALL_TIME = re.compile(r"^Wall time: ([0-9]+(?:\.[0-9]+)?) seconds$", re.MULTILINE)


def _output_metadata_duration(output: Any) -> float | None:
    """``metadata.duration_seconds`` of a tool output serialized as JSON (apply_patch, older shell tool), or
    the ``Wall time: X seconds`` line the unified exec tool (``exec_command``/``write_stdin``, 0.10x+) puts in
    its output's header."""
    if isinstance(output, str) and not output.startswith("{"):
        m = _WALL_TIME.search(output, 0, 400)
        return float(m.group(1)) if m else None
    if not isinstance(output, str):
        return None
    try:
        obj = json.loads(output)
    except ValueError:
        return None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return _duration(meta.get("duration_seconds")) if isinstance(meta, dict) else None


class _Importer:
    def __init__(self, path: Path, ctx: ImportContext) -> None:
        self.path = str(path)
        self.ctx = ctx
        self.recs: list[tuple[int, int | None, dict[str, Any]]] = []
        for line, rec in iter_records(path, ctx, "Codex rollout"):
            t = rec.get("type")
            if "payload" not in rec:
                if line == 1 and "id" in rec and "timestamp" in rec:  # pre-2025 rollouts: bare session header
                    rec = {"timestamp": rec.get("timestamp"), "type": "session_meta", "payload": rec}
                elif rec.get("record_type") == "state":
                    continue
                elif isinstance(t, str) and (t in _OUTPUT_ITEMS or t in _INPUT_ITEMS or t == "message"):
                    rec = {"timestamp": rec.get("timestamp"), "type": "response_item", "payload": rec}
                else:
                    ctx.bad(self.path, line, "record without 'type' and 'payload' (not a Codex rollout record)")
                    continue
            t = rec.get("type")
            if t in _IGNORED_TOP:
                continue
            if t not in _TOP:
                ctx.unknown(self.path, line, repr(t))
                continue
            if not isinstance(rec.get("payload"), dict):
                ctx.bad(self.path, line, f"{t} record: 'payload' must be an object, got "
                        f"{type(rec.get('payload')).__name__}")
                continue
            ts, unreadable = record_time(rec.get("timestamp"))
            if unreadable:
                ctx.bad(self.path, line, unreadable)
                continue
            self.recs.append((line, ts, rec))
        meta = next((r["payload"] for _, _, r in self.recs if r["type"] == "session_meta"), {})
        self.sid = str(meta.get("id") or path.stem)
        self.b = SpanBuilder(FORMAT, f"{self.sid}\x1f{xxhash.xxh3_64_hexdigest(read_bytes(path))}", ctx, path=str(path))
        bi = meta.get("base_instructions", meta.get("instructions"))
        self.instructions = content_text(bi.get("text") if isinstance(bi, dict) else bi) if bi else ""
        self.version = meta.get("cli_version")
        self.provider = meta.get("model_provider")
        self.meta = meta
        # a sub-agent thread (multi-agent ``spawn_agent``) or a fork: its rollout starts with a replay of the
        # parent's records (the parent's session_meta, items and token_count events) before its own first turn
        src = meta.get("source")
        sub = src.get("subagent", src.get("sub_agent")) if isinstance(src, dict) else None
        spawn = sub.get("thread_spawn") if isinstance(sub, dict) and isinstance(sub.get("thread_spawn"), dict) \
            else None
        self.parent_thread = (spawn or {}).get("parent_thread_id") or (meta.get("forked_from_id") if sub else None)
        self.subagent = sub is not None
        self.forked = bool(meta.get("forked_from_id")) or spawn is not None
        self.agent_nickname = (spawn or {}).get("agent_nickname") or meta.get("agent_nickname")
        self.approved: set[str] = set()  # calls whose approval the rollout records as events

    def run(self) -> Trace:
        recs = self.recs
        tc_files = any(r["type"] == "event_msg" and r["payload"].get("type") == "token_count" and
                       r["payload"].get("info") for _, _, r in recs)
        # ``token_usage_record`` (one per completed response, newer builds) stands in for token_count only
        # where a file has none: both are written for the same response
        use_records = not tc_files and any(r["type"] == "token_usage_record" and
                                           isinstance(r["payload"].get("usage"), dict) for _, _, r in recs)
        has_token_counts = tc_files or use_records
        times = [ts for _, ts, _ in recs if ts is not None]
        created = iso_to_ns(self.meta.get("timestamp"))
        if created is not None:
            times.append(created)
        sess = self.sid
        seg = 0
        seen_counts: set[str] = self.ctx.seen.setdefault("codex.token_counts", set())
        seen_calls: set[str] = self.ctx.seen.setdefault("codex.call_ids", set())
        replaying = self.forked  # until the thread's own first turn
        baseline = -1            # largest cumulative total replayed from the parent
        own_counts: set[str] = set()
        own_calls: set[str] = set()
        role = "subagent" if self.subagent and self.parent_thread else "main"
        self.b.session(sess, agent_name="codex", start_ns=min(times) if times else None,
                       end_ns=max(times) if times else None, role=role,
                       parent_session_id=str(self.parent_thread) if role == "subagent" else None,
                       attributes={"agentprof.source.version": self.version, "agentprof.codex.originator":
                                   self.meta.get("originator"), "agentprof.source.path": self.path,
                                   "agentprof.codex.forked_from": self.meta.get("forked_from_id"),
                                   "agentprof.codex.agent_nickname": self.agent_nickname})
        seg_bounds: dict[str, list[int]] = {sess: []}
        sys_segs = responses_segments(self.instructions, []) if self.instructions else []
        history: list[dict[str, Any]] = []
        hist_segs: list[list[Segment]] = []
        model: str | None = None
        call: dict[str, Any] | None = None
        # a call closed by a usage report written before its output items (0.4x-era rollouts record the
        # response's items after its token_count): those items are its outputs, not a new request
        early: dict[str, Any] | None = None
        pending_user: str | None = None
        turn_users: list[str] = []
        prev_ts: int | None = None
        trigger_ts: int | None = created  # last record that completed a request's input (or closed a call)
        last_tc_total: Any = None
        tools: dict[str, dict[str, Any]] = {}
        turn_first_call: str | None = None
        turn_idle_from: int | None = created  # the session opened; the first prompt is typed after that
        idle_after = "session_start"  # what turn_idle_from marks (the wait's evidence)
        answered_at: int | None = None  # the last output was an assistant message (an answer, if the turn ends)
        approvals: dict[str, tuple[int, str]] = {}
        fper = self.ctx.fingerprinter()

        def push(item: dict[str, Any]) -> None:
            history.append(item)
            hist_segs.append(responses_segments(None, [item]))

        def open_call(ts_trigger: int | None, line: int) -> dict[str, Any]:
            nonlocal pending_user
            if pending_user is not None:
                push({"type": "message", "role": "user", "content": [{"type": "input_text", "text": pending_user}],
                      "agentprof.synthetic": True})
                pending_user = None
            return {"start": ts_trigger, "prompt_len": len(history), "line": line, "outputs": [], "web": 0,
                    "end": None, "last_out": None, "out_ts": []}

        def close_call(c: dict[str, Any], ts: int | None, usage_raw: Any, line: int,
                       error: str | None = None) -> str:
            nonlocal turn_first_call, trigger_ts
            segs = list(sys_segs)
            for s in hist_segs[:c["prompt_len"]]:
                segs.extend(s)
            fp = fper.fingerprint(segs) if segs else None
            usage = normalize_usage(usage_raw, provider="openai") if usage_raw else None
            write = usage_raw.get("cache_write_input_tokens") if isinstance(usage_raw, dict) else None
            if usage is not None and isinstance(write, int) and not isinstance(write, bool) and \
                    usage.input_tokens is not None and (usage.cache_read_tokens or 0) + write <= usage.input_tokens:
                usage.cache_write_tokens = write  # newer builds: a part of input_tokens, like the cached part
            attrs = {"agentprof.source.line": c["line"], "agentprof.timing.start":
                     "record before the first output item"}
            if c["web"]:
                attrs["agentprof.codex.web_search_calls"] = c["web"]
            sid = self.b.add_model_call(
                sess, model=model, provider=self.provider or provider_for_model(model), usage=usage,
                fingerprint=fp, path=self.path, line=line, key=("call", c["line"], line),
                start_ns=c["start"], end_ns=ts, timing="derived", stream=True, attributes=attrs,
                status="error" if error else "ok", error_type=error, inner_ns=c["out_ts"])
            if turn_first_call is None:
                turn_first_call = sid
            if ts is not None:
                trigger_ts = ts if trigger_ts is None else max(trigger_ts, ts)
            return sid

        def end_response(line: int) -> None:
            """Without usage reports, a new turn (or user message) ends the response in flight at its last
            output item: a model call never spans a user turn."""
            nonlocal call
            if call is not None and not has_token_counts and call["outputs"]:
                close_call(call, call["last_out"] or prev_ts, None, line)
                call = None

        def user_turn(ts: int | None, line: int, what: str) -> None:
            """The user's next message (or the turn it opens) arrived: the time since the answer (the turn's
            ``task_complete``, else the last answer message, else the session start) was the user's."""
            nonlocal turn_idle_from, answered_at
            start, after = (turn_idle_from, idle_after) if turn_idle_from is not None else (answered_at, "answer")
            if start is not None and ts is not None and ts > start:
                self.b.add(sess, "wait", f"wait {waits.USER_TURN}", key=("wait", line), start_ns=start, end_ns=ts,
                           timing="measured", attributes={sc.WAIT_REASON: waits.USER_TURN,
                                                          "agentprof.wait.after": after,
                                                          "agentprof.wait.until": what,
                                                          "agentprof.source.line": line})
            turn_idle_from = None
            answered_at = None

        for line, ts, rec in recs:
            t, p = rec["type"], rec["payload"]
            if replaying and t == "turn_context":
                replaying = False  # the thread's own first turn
            if replaying:
                # the parent's records replayed into a sub-agent's or fork's rollout: its context, not its calls
                if t == "response_item":
                    push(p)
                elif t == "compacted" and isinstance(p.get("replacement_history"), list):
                    history.clear()
                    hist_segs.clear()
                    for item in p["replacement_history"]:
                        if isinstance(item, dict):
                            push(item)
                elif t == "event_msg" and p.get("type") == "token_count":
                    baseline = max(baseline, _total_tokens(p))
                    own_counts.add(_count_key(p))
                if ts is not None:
                    prev_ts = ts if prev_ts is None else max(prev_ts, ts)
                    trigger_ts = ts if trigger_ts is None else max(trigger_ts, ts)
                continue
            try:
                if t == "session_meta":
                    pass
                elif t == "turn_context":
                    end_response(line)
                    model = p.get("model") or model
                elif t == "compacted":
                    if call is not None:
                        close_call(call, call["last_out"] or prev_ts, None, line)
                        call = None
                    seg += 1
                    prev_sess = sess
                    sess = f"{self.sid}/compact-{seg}"
                    self.b.session(sess, role="compaction", parent_session_id=self.sid, agent_name="codex",
                                   parent_span_id=self.b.agent_span_id(self.sid), start_ns=ts,
                                   attributes={"agentprof.compaction.previous_session": prev_sess})
                    seg_bounds[sess] = []
                    history.clear()
                    hist_segs.clear()
                    repl = p.get("replacement_history")
                    if isinstance(repl, list):
                        for item in repl:
                            if isinstance(item, dict):
                                push(item)
                    elif p.get("message"):
                        push({"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": str(p.get("message"))}]})
                elif t == "response_item":
                    it = p.get("type")
                    if it not in _OUTPUT_ITEMS and it not in _INPUT_ITEMS and it != "message":
                        self.ctx.unknown(self.path, line, f"response_item {it!r}")
                    if _is_output(p):
                        if early is not None:
                            early["outputs"].append(p)  # its span is written; the items feed later prompts
                        else:
                            if call is not None and not has_token_counts and it == "reasoning" and \
                                    call.get("answered"):
                                # reasoning opens a response: one after an answer message is the next request
                                close_call(call, call["last_out"] or prev_ts, None, line)
                                call = None
                            if call is None:
                                call = open_call(trigger_ts if trigger_ts is not None else prev_ts, line)
                            call["outputs"].append(p)
                            if ts is not None:
                                call["last_out"] = ts
                                call["out_ts"].append(ts)
                            if it == "web_search_call":
                                call["web"] += 1
                            if it == "message":
                                call["answered"] = True
                        answered_at = ts if it == "message" else None
                        if it in _TOOL_CALLS:
                            cid = str(p.get("call_id") or p.get("id") or f"{line}")
                            own_calls.add(cid)
                            if not (self.forked and cid in seen_calls):  # else the parent's call, replayed
                                tools.setdefault(cid, {"name": p.get("name") or (
                                    "shell" if it == "local_shell_call" else it), "start": ts, "line": line,
                                    "sess": sess, "kind": it, "escalated": _escalated(p.get("arguments"))})
                        push(p)
                        if call is not None and not has_token_counts and it == "message" and \
                                p.get("phase") == "final_answer":
                            close_call(call, ts if ts is not None else call["last_out"], None, line)
                            call = None  # the final answer ends the response (and the turn)
                    else:
                        early = None
                        if p.get("type") == "message" and p.get("role") == "user":
                            text = content_text(p.get("content"))
                            turn_users.append(text)
                            if pending_user is not None and pending_user.strip() in text:
                                pending_user = None
                        end_response(line)
                        if p.get("type") == "message" and p.get("role") == "user":
                            user_turn(ts, line, "user message")
                        else:
                            answered_at = None  # a tool's output: the agent is still working
                        push(p)
                        if it in _INPUT_ITEMS:
                            cid = str(p.get("call_id") or "")
                            info = tools.get(cid)
                            if info is not None:
                                info["out"] = ts
                                info["out_line"] = line
                                d = _output_metadata_duration(p.get("output"))
                                if d is not None:
                                    info.setdefault("duration", d)
                                    info.setdefault("duration_end", ts)
                elif t == "token_usage_record":
                    if use_records:
                        key = json.dumps(["record", p.get("response_id"), p.get("thread_token_usage")],
                                         sort_keys=True)
                        replayed = self.forked and key in seen_counts
                        own_counts.add(key)
                        if not replayed:
                            c = call if call is not None else open_call(
                                trigger_ts if trigger_ts is not None else prev_ts, line)
                            close_call(c, ts, p.get("usage"), line)
                            early = c if call is None else None
                            call = None
                elif t == "event_msg":
                    et = p.get("type")
                    if et == "token_count":
                        info = p.get("info")
                        total = info.get("total_token_usage") if isinstance(info, dict) else None
                        last = info.get("last_token_usage") if isinstance(info, dict) else None
                        if last is None and isinstance(total, dict):
                            last = _usage_delta(total, last_tc_total)  # builds reporting the totals only
                        if last is not None:
                            key = _count_key(p)
                            replayed = self.forked and (key in seen_counts or _total_tokens(p) <= baseline)
                            own_counts.add(key)
                            if replayed or (total is not None and total == last_tc_total):
                                pass  # the parent's call replayed, or a repeated report of the same call
                            else:
                                last_tc_total = total
                                baseline = max(baseline, _total_tokens(p))
                                c = call if call is not None else open_call(
                                    trigger_ts if trigger_ts is not None else prev_ts, line)
                                close_call(c, ts, last, line)
                                early = c if call is None else None
                                call = None
                    elif et == "user_message" or (et == "item_completed" and isinstance(p.get("item"), dict)
                                                  and p["item"].get("type") == "UserMessage"):
                        # paginated history mode logs a user turn only as an ``item_completed`` UserMessage
                        early = None
                        msg = p.get("message") if et == "user_message" else content_text(p["item"].get("content"))
                        if isinstance(msg, str) and not any(msg.strip() in u for u in turn_users[-3:]):
                            pending_user = msg
                        end_response(line)
                        user_turn(ts, line, "user message")
                    elif et == "task_started":
                        end_response(line)
                        user_turn(ts, line, "task_started")
                        turn_first_call = None
                        turn_users = []
                    elif et in ("task_complete", "turn_aborted"):
                        if call is not None and call["outputs"]:
                            # a response that reported no usage (no token_count in this build, or the turn was
                            # interrupted while it streamed) ends with the turn, at its last output item
                            # (an interrupted request was in flight until the interruption)
                            aborted = et == "turn_aborted" and has_token_counts
                            close_call(call, (ts if aborted else None) or call["last_out"] or prev_ts, None, line,
                                       error=(p["reason"] if isinstance(p.get("reason"), str) and p["reason"]
                                              else "interrupted") if aborted else None)
                            call = None
                        ttft = p.get("time_to_first_token_ms")
                        if turn_first_call is not None and isinstance(ttft, (int, float)):
                            self._set_ttft(turn_first_call, ttft / 1000.0)
                        turn_idle_from, idle_after = ts, et
                    elif et == "exec_command_end":
                        cid = str(p.get("call_id") or "")
                        d = _duration(p.get("duration"))
                        if cid in tools and d is not None:
                            tools[cid]["duration"] = d
                            tools[cid]["duration_end"] = ts
                            if isinstance(p.get("exit_code"), int) and p["exit_code"] != 0:
                                tools[cid]["exit_code"] = p["exit_code"]
                    elif et in _APPROVALS:
                        cid = str(p.get("call_id") or p.get("id") or line)
                        if ts is not None:
                            approvals[cid] = (ts, et)
                    if et not in _APPROVALS:
                        cid = str(p.get("call_id") or "")
                        if cid in approvals and ts is not None:
                            start, asked = approvals.pop(cid)
                            self.approved.add(cid)
                            self.b.add(sess, "wait", f"wait {waits.APPROVAL}", key=("perm", cid), start_ns=start,
                                       end_ns=ts, timing="measured",
                                       attributes={sc.WAIT_REASON: waits.APPROVAL, sc.TOOL_CALL_ID: cid,
                                                   "agentprof.wait.after": asked, "agentprof.wait.until": et})
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                self.ctx.bad(self.path, line, f"{t} record has unexpected content ({type(e).__name__}: {e})")
                continue
            is_input = t in ("session_meta", "turn_context", "compacted") or (
                t == "response_item" and not _is_output(p)) or (t == "event_msg" and _is_turn_input(p))
            if is_input:
                early = None
            if ts is not None:
                prev_ts = ts if prev_ts is None else max(prev_ts, ts)
                if is_input:
                    trigger_ts = ts if trigger_ts is None else max(trigger_ts, ts)
        if call is not None:
            close_call(call, call["last_out"] or prev_ts, None, call["line"])
        seen_counts |= own_counts
        seen_calls |= own_calls
        for cid, info in tools.items():
            self._tool_span(cid, info)
        meta = TraceMeta(source_format=FORMAT, sources=[self.path],
                         extra={"agent_version": self.version} if self.version else {})
        return Trace(meta, self.b.finish(), [])

    def _set_ttft(self, span_id: str, ttft_s: float) -> None:
        cols = self.b.cols
        i = len(cols["span_id"]) - 1 - cols["span_id"][::-1].index(span_id)
        cols["ttft_s"][i] = ttft_s

    def _tool_span(self, cid: str, info: dict[str, Any]) -> None:
        name = str(info["name"])
        attrs: dict[str, Any] = {sc.TOOL_CALL_ID: cid, sc.TOOL_NAME: name, "agentprof.source.line": info["line"]}
        status, err = "ok", None
        if "exit_code" in info:
            status, err = "error", f"exit_code {info['exit_code']}"
            attrs["agentprof.tool.exit_code"] = info["exit_code"]
        if info.get("duration") is not None and info.get("duration_end") is not None:
            end = info["duration_end"]
            took = seconds_to_ns(info["duration"])  # inf/NaN: out of range, reported by the span builder
            start, timing = (end - took if took is not None else None), "measured"
            if info.get("out") is not None:
                attrs["agentprof.tool.output_returned_ns"] = info["out"]
        elif info.get("out") is not None:
            start, end, timing = info["start"], info["out"], "derived"
        else:
            start, end, timing = info["start"], None, "unknown"
            status, err = "error", "no_result"
        if info.get("escalated") and timing == "measured" and cid not in self.approved and \
                start is not None and info.get("start") is not None \
                and start - info["start"] >= int(ESCALATION_WAIT_MIN_S * 1e9):
            # the command asked to run outside the sandbox: the time before it ran was the user's decision
            self.b.add(info["sess"], "wait", f"wait {waits.APPROVAL}", key=("escalation", cid),
                       start_ns=info["start"], end_ns=start, timing="derived",
                       attributes={sc.WAIT_REASON: waits.APPROVAL, sc.TOOL_CALL_ID: cid,
                                   "agentprof.wait.after": "function_call with sandbox_permissions=require_escalated",
                                   "agentprof.wait.until": "the command's measured start (output end - duration)"})
            attrs["agentprof.tool.approval_wait_s"] = round((start - info["start"]) / 1e9, 3)
        self.b.add(info["sess"], "tool", sc.tool_span_name(name), key=("tool", cid), start_ns=start, end_ns=end,
                   timing=timing, status=status, error_type=err, attributes=attrs)


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one Codex rollout file."""
    return _Importer(Path(paths[0]), ctx).run()
