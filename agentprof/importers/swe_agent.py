"""SWE-agent trajectories (``*.traj``): 1.x ``trajectory[*].query`` (``messages`` in early 1.0) hold each
step's exact model input; 0.x files only have the whole ``history``. A ``RetryAgent`` file holds ``attempts``
(each a whole trajectory; the top-level one, if any, copies the chosen attempt): each attempt is a child
session (role ``attempt``).

Mapping (see ``docs/IMPORTING.md``): each trajectory step is one ``model`` span (its prompt from the step's
``messages``; for 0.x the history up to that step's assistant message, marked approximate) and one ``tool``
span for its ``action`` (``execution_time`` kept as ``agentprof.tool.duration_s``). The files carry no
timestamps, so every span's timing is ``unknown``; per-call token counts are not logged (the run's totals are
on the session). Replays (``replay_config``, zero cost) are marked.
"""

from __future__ import annotations

import json
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
from agentprof.trace.prompt import openai_chat_segments
from agentprof.trace.schema import Trace, TraceMeta

FORMAT = "swe-agent"


def _chat(messages: list[Any]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        c = {"role": m.get("role"), "content": m.get("content")}
        if m.get("tool_calls"):
            c["tool_calls"] = m["tool_calls"]
        if m.get("tool_call_ids"):
            c["tool_call_id"] = ",".join(str(x) for x in m["tool_call_ids"])
        out.append(c)
    return out


def _float(v: Any) -> float | None:
    try:
        return float(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def _model_name(doc: dict[str, Any]) -> str | None:
    """The model named in ``replay_config`` (1.x writes it as a JSON string), if any."""
    cfg = doc.get("replay_config")
    if isinstance(cfg, str):
        try:
            cfg = json.loads(cfg)
        except ValueError:
            return None
    agent = cfg.get("agent") if isinstance(cfg, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None


def _session_attrs(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    replay = "replay_config" in doc and not stats.get("tokens_sent") and not stats.get("instance_cost")
    return {"agentprof.source.path": str(path), "agentprof.exit_status": info.get("exit_status"),
            "agentprof.cost_usd": stats.get("instance_cost"), "agentprof.reported_api_calls": stats.get("api_calls"),
            "agentprof.reported_tokens_sent": stats.get("tokens_sent"),
            "agentprof.reported_tokens_received": stats.get("tokens_received"),
            "agentprof.swe_agent.replay": True if replay else None}


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import one SWE-agent trajectory (a ``RetryAgent`` file: every attempt, each as a child session)."""
    path = Path(paths[0])
    doc = load_json(path, "SWE-agent trajectory")
    attempts = doc.get("attempts") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not (isinstance(doc.get("trajectory"), list) or isinstance(attempts, list)):
        raise TraceFormatError(str(path), 1, "expected an object with a 'trajectory' list (a SWE-agent .traj)")
    sid = path.name.split(".")[0]
    b = SpanBuilder(FORMAT, f"{sid}\x1f{xxhash.xxh3_64_hexdigest(read_bytes(path))}", ctx, path=str(path))
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    b.session(sid, agent_name="swe-agent", attributes={
        **_session_attrs(doc, path), "agentprof.swe_agent.best_attempt": info.get("best_attempt_idx")})
    fper = ctx.fingerprinter()
    model = _model_name(doc)
    if isinstance(attempts, list):
        # RetryAgent: the top-level trajectory, if any, is a copy of the chosen attempt; the attempts hold all
        for n, att in enumerate(attempts, start=1):
            if not isinstance(att, dict) or not isinstance(att.get("trajectory"), list):
                ctx.bad(str(path), None, f"attempts[{n - 1}]: expected an object with a 'trajectory' list")
                continue
            sess = f"{sid}/attempt-{n}"
            b.session(sess, role="attempt", parent_session_id=sid, agent_name="swe-agent", contained=False,
                      attributes={**_session_attrs(att, path), "agentprof.attempt": n})
            _steps(b, sess, att, model or _model_name(att), fper, path, ctx, f"attempts[{n - 1}].")
    else:
        _steps(b, sid, doc, model, fper, path, ctx, "")
    meta = TraceMeta(source_format=FORMAT, sources=[str(path)])
    return Trace(meta, b.finish(), [])


def _steps(b: SpanBuilder, sess: str, doc: dict[str, Any], model: str | None, fper: Any, path: Path,
           ctx: ImportContext, where: str) -> None:
    """One model span per trajectory step (prompt: the step's ``query``/``messages``), one tool per action."""
    history = _chat(doc.get("history") or []) if isinstance(doc.get("history"), list) else []
    assistant_at = [i for i, m in enumerate(history) if m.get("role") == "assistant"]
    for k, step in enumerate(doc["trajectory"]):
        if not isinstance(step, dict):
            ctx.bad(str(path), None, f"{where}trajectory[{k}]: expected an object, got {type(step).__name__}")
            continue
        attrs: dict[str, Any] = {"agentprof.step": k}
        exact = step.get("query") if isinstance(step.get("query"), list) else step.get("messages")
        if isinstance(exact, list):
            prompt = _chat(exact)
        elif k < len(assistant_at):
            prompt = history[:assistant_at[k]]
            attrs["agentprof.prompt.approximate"] = "history before history processors (SWE-agent 0.x)"
        else:
            prompt = []
        fp = fper.fingerprint(openai_chat_segments(prompt)) if prompt else None
        mid = b.add_model_call(sess, model=model, provider=provider_for_model(model), fingerprint=fp,
                               path=str(path), key=("call", k), timing="unknown", attributes=attrs)
        action = step.get("action")
        if isinstance(action, str) and action.strip():
            name = action.strip().split()[0]
            b.add(sess, "tool", sc.tool_span_name(name), key=("tool", k), timing="unknown",
                  attributes={sc.TOOL_NAME: name, "agentprof.tool.duration_s": _float(step.get("execution_time")),
                              "agentprof.tool.requested_by": mid})
