"""TraceLab's normalized round trace (``uw-syfi/TraceLab``; the public dataset is CC BY 4.0): JSON Lines, one row
per model call ("round") of Claude Code or Codex sessions, with the provider's token split, the ordered
events the source log showed for the round, and the tool calls the round made.

Mapping (see ``docs/IMPORTING.md``):

- rows with the same ``session_id`` -> one session (``provider`` ``claude`` -> agent ``claude-code``, ``codex``
  -> ``codex``), rows in ``round_index`` order;
- each row -> a ``model`` span (``derived``): start = the latest input event (``user_message``,
  ``tool_result``) before the first output event (``reasoning``, ``text``, ``tool_call``), TraceLab's own
  "input ready" proxy, else the previous round's end; end = the ``usage_report`` event (Codex ``token_count``),
  else the last output event (Claude: the last content block). The same definitions the Claude Code and Codex
  importers use, so the same session gives the same spans from either source;
- tokens: ``input_tokens_total`` (= ``prefix_tokens`` + ``newly_append_tokens``), ``prefix_tokens`` as cache
  reads, Claude's ``claude_cache_creation_input_tokens`` as cache writes, ``output_tokens`` and
  ``reasoning_output_tokens`` (a part of the output, as Codex reports it);
- tools: each ``tools[]`` entry -> a ``tool`` span from ``emitted_at`` to ``result_at`` (``derived``), or,
  with ``tool_internal_latency_ms`` (the runner's own duration: Codex's ``Wall time``, Claude's
  ``durationMs``), a ``measured`` span of that length ending at ``result_at``; ``is_error`` -> an error;
- waits: a round opened by a ``user_message`` after a round that called no tools -> a ``user_turn`` wait from
  that round's end to the message;
- no block hashes: the format keeps token counts and sizes (``*_chars``), not prompt content, so prefix reuse
  and the KV-cache simulation have nothing to hash (the analysis says ``missing_hashes``); provider cache
  reads are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xxhash

from agentprof import semconv as sc
from agentprof.importers.context import ImportContext
from agentprof.importers.jsonl import iter_records, read_bytes
from agentprof.importers.spans import SpanBuilder
from agentprof.importers.timestamps import iso_to_ns, seconds_to_ns
from agentprof.trace import waits
from agentprof.trace.schema import Trace, TraceMeta
from agentprof.trace.usage import normalize_usage

FORMAT = "tracelab"
_INPUTS = {"user_message", "tool_result"}
_OUTPUTS = {"reasoning", "text", "tool_call"}
_AGENT = {"claude": "claude-code", "codex": "codex"}
_PROVIDER = {"claude": "anthropic", "codex": "openai"}
NO_HASHES = ("TraceLab rows keep token counts and sizes, not prompt content: no block hashes (prefix reuse and "
             "KV-cache simulation need them; provider cache reads are kept)")


def _int(v: Any) -> int | float | None:
    """A count as the log has it (a float out of range is reported by the usage normalizer, not dropped)."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _usage(row: dict[str, Any]):
    """The row's tokens in the trace model's meaning (input includes cached; reasoning is part of output)."""
    prov = row.get("provider")
    out, reasoning = _int(row.get("output_tokens")), _int(row.get("reasoning_output_tokens"))
    if prov == "claude" and _int(row.get("claude_cache_read_input_tokens")) is not None:
        return normalize_usage({"input_tokens": _int(row.get("claude_uncached_input_tokens")) or 0,
                                "cache_read_input_tokens": _int(row.get("claude_cache_read_input_tokens")),
                                "cache_creation_input_tokens": _int(row.get("claude_cache_creation_input_tokens")) or 0,
                                "output_tokens": out}, provider="anthropic")
    raw = {"input_tokens": _int(row.get("input_tokens_total")), "cached_input_tokens": _int(row.get("prefix_tokens")),
           "output_tokens": out}
    if reasoning is not None:
        raw["reasoning_output_tokens"] = reasoning
    return normalize_usage({k: v for k, v in raw.items() if v is not None}, provider="openai")


def _events(row: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    out = []
    for e in row.get("timing_events") or []:
        if isinstance(e, dict):
            ts = iso_to_ns(e.get("timestamp"))
            if ts is not None:
                out.append((ts, str(e.get("event_type")), e))
    return out


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one TraceLab round-trace file (any number of sessions)."""
    path = Path(paths[0])
    p = str(path)
    rows: list[tuple[int, dict[str, Any]]] = []
    for line, rec in iter_records(path, ctx, "TraceLab round trace"):
        if not isinstance(rec.get("session_id"), str) or not isinstance(rec.get("timing_events", []), list):
            ctx.bad(p, line, "TraceLab row without a string 'session_id' or with 'timing_events' not a list")
            continue
        rows.append((line, rec))
    b = SpanBuilder(FORMAT, xxhash.xxh3_64_hexdigest(read_bytes(path)), ctx, path=str(path))
    by_sess: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for line, r in rows:
        by_sess.setdefault(r["session_id"], []).append((line, r))
    for sid, srows in by_sess.items():
        srows.sort(key=lambda lr: (_int(lr[1].get("round_index")) or 0, lr[0]))
        first = srows[0][1]
        prov = str(first.get("provider") or "")
        times = [ts for _, r in srows for ts, _, _ in _events(r)]
        times += [t for _, r in srows for tool in r.get("tools") or [] if isinstance(tool, dict)
                  for t in (iso_to_ns(tool.get("emitted_at")), iso_to_ns(tool.get("result_at"))) if t is not None]
        b.session(sid, agent_name=_AGENT.get(prov, prov or None), start_ns=min(times) if times else None,
                  end_ns=max(times) if times else None,
                  attributes={"agentprof.tracelab.project": first.get("project"), "agentprof.tracelab.store":
                              first.get("store"), "agentprof.source.path": p})
        prev_end: int | None = None
        prev_tools = True  # the session's first round: no earlier answer to wait after
        for line, r in srows:
            ev = _events(r)
            first_out = next((i for i, (_, kind, _) in enumerate(ev) if kind in _OUTPUTS), None)
            inputs = [ts for ts, kind, _ in (ev[:first_out] if first_out is not None else ev) if kind in _INPUTS]
            start = max(inputs) if inputs else prev_end
            report = [ts for ts, kind, _ in ev if kind == "usage_report"]
            outs = [ts for ts, kind, _ in ev if kind in _OUTPUTS]
            end = report[-1] if report else (outs[-1] if outs else None)
            user = [ts for ts, kind, _ in ev if kind == "user_message"]
            if user and not prev_tools and prev_end is not None and user[0] > prev_end:
                b.add(sid, "wait", f"wait {waits.USER_TURN}", key=("wait", line), start_ns=prev_end,
                      end_ns=user[0], timing="measured",
                      attributes={sc.WAIT_REASON: waits.USER_TURN, "agentprof.wait.after": "answer",
                                  "agentprof.wait.until": "user_message", "agentprof.source.line": line})
            model = r.get("model") if isinstance(r.get("model"), str) else None
            attrs = {"agentprof.tracelab.round_id": r.get("round_id"), "agentprof.tracelab.turn_id": r.get("turn_id"),
                     "agentprof.tracelab.newly_append_tokens": _int(r.get("newly_append_tokens")),
                     "agentprof.prompt.trigger": r.get("first_input_event_type"),
                     "agentprof.tracelab.current_input_chars": _int(r.get("current_input_chars")),
                     "agentprof.source.line": line,
                     "agentprof.timing.start": "latest input event before the first output event"}
            b.add_model_call(sid, model=model, provider=_PROVIDER.get(prov), usage=_usage(r), path=p, line=line,
                             key=("call", r.get("round_id"), line), start_ns=start, end_ns=end,
                             timing="derived" if start is not None and end is not None else "unknown",
                             attributes=attrs, inner_ns=outs)
            tools = [t for t in r.get("tools") or [] if isinstance(t, dict)]
            for t in tools:
                _tool(b, sid, t, line)
            prev_end = end if end is not None else prev_end
            prev_tools = bool(tools)
    if rows:
        ctx.note("no_block_hashes", NO_HASHES, p)
    meta = TraceMeta(source_format=FORMAT, sources=[p], extra={"block_hashes": "none (TraceLab keeps no prompt "
                                                                               "content)"})
    return Trace(meta, b.finish(), [])


def _tool(b: SpanBuilder, sid: str, t: dict[str, Any], line: int) -> None:
    name = str(t.get("tool_name") or "tool")
    emitted, result = iso_to_ns(t.get("emitted_at")), iso_to_ns(t.get("result_at"))
    internal = t.get("tool_internal_latency_ms")
    attrs = {sc.TOOL_CALL_ID: t.get("tool_call_id"), sc.TOOL_NAME: name, "agentprof.source.line": line,
             "agentprof.tool.input_chars": _int(t.get("input_chars")),
             "agentprof.tool.result_chars": _int(t.get("result_chars")),
             "agentprof.tool.wall_latency_ms": t.get("tool_wall_latency_ms")}
    if result is not None and isinstance(internal, (int, float)) and not isinstance(internal, bool) and internal >= 0:
        start, end, timing = result - (seconds_to_ns(internal) or 0) // 1000, result, "measured"  # ms
    elif emitted is not None and result is not None:
        start, end, timing = emitted, result, "derived"
    else:
        start, end, timing = emitted, None, "unknown"
    err = t.get("is_error") is True
    b.add(sid, "tool", sc.tool_span_name(name), key=("tool", t.get("tool_call_id"), line), start_ns=start,
          end_ns=end, timing=timing, status="error" if err else "ok", error_type="tool_error" if err else None,
          attributes=attrs)
