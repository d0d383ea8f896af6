"""OpenHands per-call completion logs (``log_completions=true``): one JSON file per model call, in
``llm_completions/<instance>/`` (V0) or the V1 SDK's ``log_dir``; the folder is one session.

Mapping (see ``docs/IMPORTING.md``): each file -> a ``model`` span ending at the file's ``timestamp``. The V1
SDK also logs ``latency_sec``: the span then starts ``latency_sec`` earlier (``measured``); V0 logs no request
start, so the span starts at the previous call's end (``derived``: the interval also holds the tool execution
between the calls). Usage from the LiteLLM ``response.usage`` (cache fields appear only on some calls: missing
means unknown, not zero). The prompt is the exact ``messages`` list (or a Responses API ``input``) plus the
tools (``kwargs.tools`` in V0, top-level ``tools`` in V1; ``cache_control`` markers do not change hashes).
Tool calls of each response (``fncall_response`` with mocked function calling) become ``tool`` spans without
time. A V1 ``-error.json`` log is a failed call (``status`` error). Where the message count drops, the agent
restarted: each later attempt is a child session (role ``attempt``).
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
from agentprof.importers.timestamps import epoch_s_to_ns, seconds_to_ns
from agentprof.trace.prompt import openai_chat_segments, responses_segments
from agentprof.trace.schema import Trace, TraceMeta
from agentprof.trace.usage import normalize_usage

FORMAT = "openhands"


def _load(path: Path, ctx: ImportContext) -> dict[str, Any] | None:
    try:
        doc = load_json(path, "OpenHands completion log")
        if not isinstance(doc, dict):
            raise TraceFormatError(str(path), 1, "expected a JSON object (an OpenHands completion log)")
        if not isinstance(doc.get("messages"), list) and not isinstance(doc.get("input"), (list, str)):
            raise TraceFormatError(str(path), 1, "'messages' must be a list (not an OpenHands completion log?)")
        if not isinstance(doc.get("response"), dict) and not isinstance(doc.get("error"), dict):
            raise TraceFormatError(str(path), 1, "'response' must be an object (or 'error', for a failed call)")
        ts = doc.get("timestamp")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float))):
            raise TraceFormatError(str(path), 1, f"'timestamp' must be epoch seconds, got {type(ts).__name__}")
        return doc
    except TraceFormatError as e:
        if not ctx.skip_bad_lines:
            raise TraceFormatError(e.path, e.line, f"{e.reason}; use --skip-bad-lines to import the rest") from None
        ctx.skipped_lines += 1
        ctx.note("bad_file", f"{e.reason} (file skipped)", e.path, e.line)
        return None


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one instance folder of OpenHands completion logs (one file per model call)."""
    docs: list[tuple[float, str, dict[str, Any]]] = []
    digest = xxhash.xxh3_64()
    for p in paths:
        doc = _load(Path(p), ctx)
        if doc is None:
            continue
        digest.update(read_bytes(p))
        ts = doc.get("timestamp")
        if ts is None:
            resp = doc.get("response") if isinstance(doc.get("response"), dict) else {}
            ts = resp.get("created") if isinstance(resp.get("created"), (int, float)) else 0
        docs.append((float(ts), str(p), doc))
    docs.sort(key=lambda d: (d[0], d[1]))
    folder = Path(paths[0]).parent.name
    b = SpanBuilder(FORMAT, f"{folder}\x1f{digest.hexdigest()}", ctx)
    main = folder
    b.session(main, agent_name="openhands", timing="derived",
              attributes={"agentprof.source.path": str(Path(paths[0]).parent)})
    sess = main
    attempt = 1
    prev_len = -1
    prev_end: int | None = None
    fper = ctx.fingerprinter()
    for _ts, path, doc in docs:
        msgs = doc.get("messages") if isinstance(doc.get("messages"), list) else None
        n_msgs = len(msgs) if msgs is not None else len(doc["input"]) if isinstance(doc.get("input"), list) else 1
        if n_msgs < prev_len:  # the message history restarted: a new attempt
            attempt += 1
            sess = f"{main}/attempt-{attempt}"
            # a restart follows the earlier attempt: the time between them is neither attempt's
            b.session(sess, role="attempt", parent_session_id=main, agent_name="openhands", timing="derived",
                      attributes={"agentprof.attempt": attempt}, contained=False)
            prev_end = None
        prev_len = n_msgs
        resp = doc["response"] if isinstance(doc.get("response"), dict) else {}
        err = doc.get("error") if isinstance(doc.get("error"), dict) else None
        end = epoch_s_to_ns(doc.get("timestamp")) or epoch_s_to_ns(resp.get("created"))
        latency = seconds_to_ns(doc.get("latency_sec"))
        measured = end is not None and latency is not None and latency >= 0
        start = end - latency if measured else prev_end
        kwargs = doc.get("kwargs") if isinstance(doc.get("kwargs"), dict) else {}
        model = resp.get("model") or kwargs.get("model") or None
        # the V1 SDK logs the tools next to the messages; V0 inside kwargs
        tools = doc.get("tools") if isinstance(doc.get("tools"), list) else kwargs.get("tools")
        tools = tools if isinstance(tools, list) else None
        if msgs is not None:
            segs = openai_chat_segments(msgs, tools)
        else:  # a Responses API request (V1 SDK)
            segs = responses_segments(doc.get("instructions") or kwargs.get("instructions"), doc.get("input"), tools)
        fp = fper.fingerprint(segs)
        usage = normalize_usage(resp.get("usage")) if isinstance(resp.get("usage"), dict) else None
        choice = (resp.get("choices") or [{}])[0] if isinstance(resp.get("choices"), list) else {}
        attrs = {sc.RESPONSE_ID: resp.get("id"), "agentprof.cost_usd": doc.get("cost"),
                 "agentprof.source.path": path, sc.RESPONSE_FINISH_REASONS:
                 [choice.get("finish_reason")] if isinstance(choice, dict) and choice.get("finish_reason") else None,
                 "agentprof.timing.start": "timestamp - latency_sec" if measured else
                 "previous call's end (includes tool execution between the calls)"}
        mid = b.add_model_call(sess, model=model, provider=provider_for_model(model), usage=usage, fingerprint=fp,
                               path=path, line=1, key=("call", Path(path).name), start_ns=start, end_ns=end,
                               timing="measured" if measured else "derived", attributes=attrs,
                               status="error" if err else "ok",
                               error_type=str(err.get("type") or "error") if err else None)
        for i, (name, call_id) in enumerate(_tool_calls(doc)):
            b.add(sess, "tool", sc.tool_span_name(name), key=("tool", Path(path).name, i), timing="unknown",
                  attributes={sc.TOOL_NAME: name, sc.TOOL_CALL_ID: call_id, "agentprof.tool.requested_by": mid})
        prev_end = end
    meta = TraceMeta(source_format=FORMAT, sources=[str(p) for p in paths])
    return Trace(meta, b.finish(), [])


def _tool_calls(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(name, call id)`` of each tool call the response asked for.

    With mocked function calling (V0) ``response`` is the text form and ``fncall_response`` holds the calls;
    a Responses API response lists them as ``function_call`` output items.
    """
    resp = doc.get("fncall_response") if isinstance(doc.get("fncall_response"), dict) else doc.get("response")
    if not isinstance(resp, dict):
        return []
    out: list[tuple[str, Any]] = []
    if isinstance(resp.get("output"), list):
        for it in resp["output"]:
            if isinstance(it, dict) and it.get("type") in ("function_call", "custom_tool_call"):
                out.append((str(it.get("name") or "tool"), it.get("call_id") or it.get("id")))
        return out
    choice = (resp.get("choices") or [{}])[0] if isinstance(resp.get("choices"), list) else {}
    message = choice.get("message") if isinstance(choice, dict) else None
    for tc in (message.get("tool_calls") or []) if isinstance(message, dict) else []:
        fn = (tc.get("function") or {}) if isinstance(tc, dict) else {}
        out.append((str(fn.get("name") or "tool") if isinstance(fn, dict) else "tool",
                    tc.get("id") if isinstance(tc, dict) else None))
    return out
