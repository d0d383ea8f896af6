"""mini-swe-agent trajectories (``<instance>.traj.json``, ``trajectory_format: mini-swe-agent-1``).

Mapping (see ``docs/IMPORTING.md``): the linear ``messages`` history is the exact prompt of every call
(call *k* = ``messages[:i]`` where ``i`` is the *k*-th assistant message). Each assistant message with
``extra.response`` is a ``model`` span whose end is ``response.created`` (second resolution; the only time
in v1 logs) and whose start is the previous call's end (``derived``: the interval also holds the previous
command's execution). Usage from the OpenAI-style ``response.usage`` (``cached_tokens`` subset). Each
assistant message followed by an observation is one ``bash`` tool call without time.
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

FORMAT = "mini-swe-agent"


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one mini-swe-agent trajectory."""
    path = Path(paths[0])
    doc = load_json(path, "mini-swe-agent trajectory")
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise TraceFormatError(str(path), 1, "expected an object with a 'messages' list (a mini-swe-agent "
                               "trajectory)")
    msgs: list[Any] = doc["messages"]
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            ctx.bad(str(path), None, f"messages[{i}]: expected an object with a string 'role'")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    cfg = info.get("config") if isinstance(info.get("config"), dict) else {}
    cfg_model = (cfg.get("model") or {}).get("model_name") if isinstance(cfg.get("model"), dict) else None
    sid = str(doc.get("instance_id") or path.name.split(".")[0])
    b = SpanBuilder(FORMAT, f"{sid}\x1f{xxhash.xxh3_64_hexdigest(read_bytes(path))}", ctx)
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    b.session(sid, agent_name="mini-swe-agent", timing="derived",
              attributes={"agentprof.source.version": info.get("mini_version"), "agentprof.source.path": str(path),
                          "agentprof.exit_status": info.get("exit_status"),
                          "agentprof.cost_usd": stats.get("instance_cost"),
                          "agentprof.reported_api_calls": stats.get("api_calls")})
    prev_end: int | None = None
    clean = [m if isinstance(m, dict) else {} for m in msgs]
    prompt: list[dict[str, Any]] = []
    fper = ctx.fingerprinter()
    for i, m in enumerate(clean):
        if not m:
            continue
        if m.get("role") != "assistant":
            prompt.append({"role": m.get("role"), "content": m.get("content")})
            continue
        extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
        resp = extra.get("response") if isinstance(extra.get("response"), dict) else {}
        model = resp.get("model") or cfg_model
        end = epoch_s_to_ns(resp.get("created")) or epoch_s_to_ns(extra.get("timestamp"))
        usage = normalize_usage(resp.get("usage")) if isinstance(resp.get("usage"), dict) else None
        fp = fper.fingerprint(openai_chat_segments(prompt))
        provider = "openrouter" if resp.get("provider") and str(resp.get("id", "")).startswith("gen-") else \
            provider_for_model(model)
        attrs = {sc.RESPONSE_ID: resp.get("id"), "agentprof.upstream_provider": resp.get("provider"),
                 "agentprof.message_index": i,
                 "agentprof.timing.start": "previous call's end (includes the previous command's execution)"}
        mid = b.add_model_call(sid, model=model, provider=provider, usage=usage, fingerprint=fp, path=str(path),
                               line=None, key=("call", i), start_ns=prev_end, end_ns=end, timing="derived",
                               attributes=attrs)
        prev_end = end if end is not None else prev_end
        nxt = clean[i + 1] if i + 1 < len(clean) else None
        if nxt is not None and nxt.get("role") == "user":
            b.add(sid, "tool", sc.tool_span_name("bash"), key=("tool", i), timing="unknown",
                  attributes={sc.TOOL_NAME: "bash", "agentprof.tool.requested_by": mid})
        prompt.append({"role": "assistant", "content": m.get("content")})
    meta = TraceMeta(source_format=FORMAT, sources=[str(path)])
    return Trace(meta, b.finish(), [])
