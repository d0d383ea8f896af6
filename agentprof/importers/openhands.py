"""OpenHands per-call completion logs (``log_completions=true``): one JSON file per model call, in
``llm_completions/<instance>/``; the folder is one session.

Mapping (see ``docs/IMPORTING.md``): each file -> a ``model`` span whose end is the file's ``timestamp`` and
whose start is the previous call's end (``derived``: the interval also holds the tool execution between the
calls; the log has no request-start or tool time). Usage from the LiteLLM ``response.usage`` (cache fields
appear only on some calls: missing means unknown, not zero). The prompt is the exact ``messages`` list plus
``kwargs.tools`` (``cache_control`` markers do not change hashes). Tool calls of each response become ``tool``
spans without time. Where the message count drops, the agent restarted: each later attempt is a child session
(role ``attempt``).
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
from agentprof.trace.prompt import openai_chat_segments
from agentprof.trace.schema import Trace, TraceMeta
from agentprof.trace.usage import normalize_usage

FORMAT = "openhands"


def _load(path: Path, ctx: ImportContext) -> dict[str, Any] | None:
    try:
        doc = load_json(path, "OpenHands completion log")
        if not isinstance(doc, dict):
            raise TraceFormatError(str(path), 1, "expected a JSON object (an OpenHands completion log)")
        if not isinstance(doc.get("messages"), list):
            raise TraceFormatError(str(path), 1, "'messages' must be a list (not an OpenHands completion log?)")
        if not isinstance(doc.get("response"), dict):
            raise TraceFormatError(str(path), 1, "'response' must be an object")
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
            ts = (doc.get("response") or {}).get("created") or 0
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
        msgs = doc["messages"]
        if len(msgs) < prev_len:  # the message history restarted: a new attempt
            attempt += 1
            sess = f"{main}/attempt-{attempt}"
            # a restart follows the earlier attempt: the time between them is neither attempt's
            b.session(sess, role="attempt", parent_session_id=main, agent_name="openhands", timing="derived",
                      attributes={"agentprof.attempt": attempt}, contained=False)
            prev_end = None
        prev_len = len(msgs)
        resp = doc["response"]
        end = epoch_s_to_ns(doc.get("timestamp")) or epoch_s_to_ns(resp.get("created"))
        model = resp.get("model") or None
        tools = (doc.get("kwargs") or {}).get("tools") if isinstance(doc.get("kwargs"), dict) else None
        fp = fper.fingerprint(openai_chat_segments(msgs, tools if isinstance(tools, list) else None))
        usage = normalize_usage(resp.get("usage")) if isinstance(resp.get("usage"), dict) else None
        choice = (resp.get("choices") or [{}])[0] if isinstance(resp.get("choices"), list) else {}
        message = choice.get("message") or {} if isinstance(choice, dict) else {}
        attrs = {sc.RESPONSE_ID: resp.get("id"), "agentprof.cost_usd": doc.get("cost"),
                 "agentprof.source.path": path, sc.RESPONSE_FINISH_REASONS:
                 [choice.get("finish_reason")] if isinstance(choice, dict) and choice.get("finish_reason") else None,
                 "agentprof.timing.start": "previous call's end (includes tool execution between the calls)"}
        mid = b.add_model_call(sess, model=model, provider=provider_for_model(model), usage=usage, fingerprint=fp,
                               path=path, line=1, key=("call", Path(path).name), start_ns=prev_end, end_ns=end,
                               timing="derived", attributes=attrs)
        for i, tc in enumerate(message.get("tool_calls") or [] if isinstance(message, dict) else []):
            fn = tc.get("function") or {} if isinstance(tc, dict) else {}
            name = str(fn.get("name") or "tool")
            b.add(sess, "tool", sc.tool_span_name(name), key=("tool", Path(path).name, i), timing="unknown",
                  attributes={sc.TOOL_NAME: name, sc.TOOL_CALL_ID: tc.get("id") if isinstance(tc, dict) else None,
                              "agentprof.tool.requested_by": mid})
        prev_end = end
    meta = TraceMeta(source_format=FORMAT, sources=[str(p) for p in paths])
    return Trace(meta, b.finish(), [])
