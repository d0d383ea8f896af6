"""mini-swe-agent trajectories (``<instance>.traj.json``, ``trajectory_format: mini-swe-agent-1`` and ``-1.1``;
also a bare list of messages, as early versions and the project's test data store them).

Mapping (see ``docs/IMPORTING.md``): the linear ``messages`` history is the exact prompt of every call
(call *k* = every message before the *k*-th model message, ``exit`` messages left out). A model message is an
``assistant`` message (chat completions; ``extra.response`` holds the provider response) or, with the
Responses API models of v2, the response object itself (``object: "response"``, its ``output`` items are what
later prompts repeat).

- Timing. v2 stamps every message it appends (``extra.timestamp``, epoch seconds, sub-second): a model
  call ends at its message's stamp and starts at the stamp of the last message before it (the observation
  whose arrival sent the request); each observation (a ``tool`` message, a ``function_call_output`` item, or a
  ``user`` message carrying ``extra.returncode``) is a ``bash`` tool span from the previous stamp to its own.
  v1 logs only ``response.created`` (second resolution): a call then reaches back to the previous call's end
  and also holds the previous command's execution, and each assistant message followed by a ``user``
  observation is one ``bash`` call without time (a format-error reply is not: no command ran). Both are
  ``derived``.
- Several commands of one response run one after another and are stamped together once all have finished,
  so the first span holds the whole batch (``agentprof.tool.batch_size``) and the others have no time.
  Commands never run (``returncode`` -1, ``exception_info`` "action was not executed") are errors without
  time. The submitting command of v2 leaves no observation, only the ``exit`` message: one untimed span.
- Usage: ``extra.response.usage`` (chat) or the response object's ``usage`` (Responses API), normalized.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xxhash

from agentprof import semconv as sc
from agentprof.errors import TraceFormatError
from agentprof.importers.context import ImportContext
from agentprof.importers.jsonl import load_json, read_bytes
from agentprof.importers.providers import provider_for_model
from agentprof.importers.spans import SpanBuilder
from agentprof.importers.timestamps import epoch_s_to_ns
from agentprof.trace.prompt import openai_chat_segments, responses_segments
from agentprof.trace.schema import Trace, TraceMeta
from agentprof.trace.usage import normalize_usage

FORMAT = "mini-swe-agent"


def _extra(m: dict[str, Any]) -> dict[str, Any]:
    return m["extra"] if isinstance(m.get("extra"), dict) else {}


def _kind(m: dict[str, Any]) -> str:
    """``call`` (a model response), ``observation`` (a command's output), ``exit`` or ``input``."""
    role = m.get("role")
    if m.get("object") == "response" or role == "assistant":
        return "call"
    if role == "exit":
        return "exit"
    if role == "tool" or m.get("type") == "function_call_output":
        return "observation"
    ex = _extra(m)
    if role == "user" and ("returncode" in ex or "raw_output" in ex):
        return "observation"
    return "input"


def _stamp(m: dict[str, Any]) -> int | None:
    """When mini-swe-agent appended the message (v2), epoch ns."""
    return epoch_s_to_ns(_extra(m).get("timestamp"))


# What mini-swe-agent 1.x writes in place of an observation when the response held no single command, and
# when a command timed out (``format_error_template`` / ``timeout_template`` defaults; a trajectory's own
# templates in ``info.config.agent`` take precedence).
_FORMAT_ERROR_DEFAULT = "Please always provide EXACTLY ONE action"
_TIMEOUT_DEFAULT = "The last command <command>"
_NOT_EXECUTED = "action was not executed"
_SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _template_prefix(template: Any, default: str) -> str:
    """The literal text a Jinja template starts with (up to its first tag), or ``default``."""
    if not isinstance(template, str):
        return default
    cut = min([k for k in (template.find("{{"), template.find("{%")) if k >= 0], default=len(template))
    prefix = template[:cut].strip()
    return prefix if len(prefix) >= 12 else default


def _content_text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # content blocks
        return "".join(b.get("text", "") for b in c if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _api_items(m: dict[str, Any]) -> list[dict[str, Any]]:
    """What a message contributes to later Responses API prompts (a response object: its output items)."""
    if m.get("object") == "response":
        return [{k: v for k, v in it.items() if k != "extra"} for it in m.get("output") or [] if isinstance(it, dict)]
    return [{k: v for k, v in m.items() if k != "extra"}]


def _chat_message(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in ("role", "content", "tool_calls", "tool_call_id") if m.get(k) is not None}


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one mini-swe-agent trajectory."""
    path = Path(paths[0])
    doc = load_json(path, "mini-swe-agent trajectory")
    if isinstance(doc, list) and all(isinstance(m, dict) and "role" in m for m in doc):
        doc = {"messages": doc}  # the message history alone: no info, no timing, no usage
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise TraceFormatError(str(path), 1, "expected an object with a 'messages' list (a mini-swe-agent "
                               "trajectory)")
    msgs: list[Any] = doc["messages"]
    clean: list[dict[str, Any]] = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not (isinstance(m.get("role"), str) or m.get("object") == "response"
                                           or isinstance(m.get("type"), str)):
            ctx.bad(str(path), None, f"messages[{i}]: expected a message object (a string 'role', or a Responses "
                    "API response or item)")
            clean.append({})
        else:
            clean.append(m)
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    cfg = info.get("config") if isinstance(info.get("config"), dict) else {}
    cfg_model = (cfg.get("model") or {}).get("model_name") if isinstance(cfg.get("model"), dict) else None
    sid = str(doc.get("instance_id") or path.name.split(".")[0])
    b = SpanBuilder(FORMAT, f"{sid}\x1f{xxhash.xxh3_64_hexdigest(read_bytes(path))}", ctx, path=str(path))
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    b.session(sid, agent_name="mini-swe-agent", timing="derived",
              attributes={"agentprof.source.version": info.get("mini_version"), "agentprof.source.path": str(path),
                          "agentprof.exit_status": info.get("exit_status"),
                          "agentprof.cost_usd": stats.get("instance_cost"),
                          "agentprof.reported_api_calls": stats.get("api_calls")})
    responses_api = any(m.get("object") == "response" for m in clean)
    kinds = [_kind(m) if m else "" for m in clean]
    agent_cfg = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    v1_texts = (_template_prefix(agent_cfg.get("format_error_template"), _FORMAT_ERROR_DEFAULT),
                _template_prefix(agent_cfg.get("timeout_template"), _TIMEOUT_DEFAULT))
    prev_end: int | None = None       # the previous call's end
    last_stamp: int | None = None     # the latest v2 message stamp so far
    prompt: list[dict[str, Any]] = []
    fper = ctx.fingerprinter()
    for i, m in enumerate(clean):
        if not m or kinds[i] == "exit":
            continue
        if kinds[i] != "call":
            prompt.extend(_api_items(m) if responses_api else [_chat_message(m)])
            last_stamp = _stamp(m) or last_stamp
            continue
        ex = _extra(m)
        if m.get("object") == "response":
            resp = m
            end = _stamp(m) or epoch_s_to_ns(m.get("completed_at"))
            usage_raw = m.get("usage")
        else:
            resp = ex.get("response") if isinstance(ex.get("response"), dict) else {}
            end = _stamp(m) or epoch_s_to_ns(resp.get("created"))
            usage_raw = resp.get("usage")
        model = resp.get("model") or cfg_model
        usage = normalize_usage(usage_raw) if isinstance(usage_raw, dict) else None
        segs = responses_segments(None, prompt) if responses_api else openai_chat_segments(prompt)
        fp = fper.fingerprint(segs)
        provider = "openrouter" if resp.get("provider") and str(resp.get("id", "")).startswith("gen-") else \
            provider_for_model(model)
        stamped = _stamp(m) is not None and last_stamp is not None
        start = last_stamp if stamped else prev_end
        attrs = {sc.RESPONSE_ID: resp.get("id"), "agentprof.upstream_provider": resp.get("provider"),
                 "agentprof.message_index": i,
                 "agentprof.timing.start": "stamp of the last message before the request" if stamped else
                 "previous call's end (includes the previous command's execution)"}
        mid = b.add_model_call(sid, model=model, provider=provider, usage=usage, fingerprint=fp, path=str(path),
                               line=None, key=("call", i), start_ns=start, end_ns=end, timing="derived",
                               attributes=attrs)
        prev_end = end if end is not None else prev_end
        last_stamp = _stamp(m) or last_stamp
        _tools(b, sid, clean, kinds, i, mid, v1_texts)
        prompt.extend(_api_items(m) if responses_api else [_chat_message(m)])
    meta = TraceMeta(source_format=FORMAT, sources=[str(path)])
    return Trace(meta, b.finish(), [])


def _tools(b: SpanBuilder, sid: str, msgs: list[dict[str, Any]], kinds: list[str], i: int, model_span: str,
           v1_texts: tuple[str, str]) -> None:
    """The commands run after model message ``i``: one ``bash`` span per observation that follows it."""
    obs = []
    for j in range(i + 1, len(msgs)):
        if kinds[j] != "observation":
            break
        obs.append(j)
    base = {sc.TOOL_NAME: "bash", "agentprof.tool.requested_by": model_span}
    if not obs:
        nxt = msgs[i + 1] if i + 1 < len(msgs) else {}
        if kinds[i + 1 if nxt else i] == "input" and nxt.get("role") == "user" and not _extra(nxt):
            # v1: the observation is a plain user message right after the call, unless it is the format
            # error the agent answers with when the response held no single command (nothing ran then)
            text = _content_text(nxt).lstrip()
            format_error, timeout = v1_texts
            if not text.startswith(format_error):
                timed_out = text.startswith(timeout)
                b.add(sid, "tool", sc.tool_span_name("bash"), key=("tool", i), timing="unknown",
                      status="error" if timed_out else "ok", error_type="timeout" if timed_out else None,
                      attributes=base)
        elif nxt.get("role") == "exit" and _extra(nxt).get("exit_status") == "Submitted":
            # v2: the submitting command raises instead of leaving an observation; it ran all the same
            b.add(sid, "tool", sc.tool_span_name("bash"), key=("tool", i), timing="unknown",
                  attributes={**base, "agentprof.tool.submitted": True})
        return
    start = _stamp(msgs[i])
    ran = [j for j in obs if _extra(msgs[j]).get("exception_info") != _NOT_EXECUTED]
    for j in obs:
        end = _stamp(msgs[j])
        ex = _extra(msgs[j])
        rc = ex.get("returncode")
        attrs: dict[str, Any] = {**base, "agentprof.message_index": j}
        call_id = msgs[j].get("tool_call_id") or msgs[j].get("call_id")
        if call_id:
            attrs[sc.TOOL_CALL_ID] = call_id
        if rc is not None:
            attrs["agentprof.tool.exit_code"] = rc
        if j not in ran:
            b.add(sid, "tool", sc.tool_span_name("bash"), key=("tool", j), timing="unknown", status="error",
                  error_type="not_executed", attributes=attrs)
            continue
        failed = isinstance(rc, int) and not isinstance(rc, bool) and rc != 0
        # the commands of one response run in turn and are all stamped after the last one finished: the
        # first span holds the batch, the others have no time of their own
        timed = start is not None and end is not None and j == ran[0]
        if timed and len(ran) > 1:
            attrs["agentprof.tool.batch_size"] = len(ran)
        b.add(sid, "tool", sc.tool_span_name("bash"), key=("tool", j), start_ns=start if timed else None,
              end_ns=end if timed else None, timing="derived" if timed else "unknown",
              status="error" if failed else "ok", error_type=f"exit_code {rc}" if failed else None,
              attributes=attrs)
