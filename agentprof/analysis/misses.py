"""Cache-miss explainer: for each call whose reusable prefix broke, or whose provider cache read fell well
below what was reusable, where the prompt diverged and the likely causes, ranked, each with a one-line fix.

A call is examined when

- **prefix break**: its prompt keeps fewer leading blocks of the previous call's prompt than that prompt had
  (something before the end of the previous prompt changed). A break confined to the previous prompt's last
  ``boundary_blocks`` (1) full block is left out: tokenizers re-merge tokens where new content is appended
  (kv-cache-tester ids come from one tokenization of the whole prompt), so that block often differs without
  any edit; the per-call table still shows it; or
- **provider miss**: the provider reported ``cache_read_tokens`` below ``miss_ratio`` (0.5) × the reusable
  prefix (``reusable_tokens``; when a source has no hashes, the previous call's input stands in).

When the prompt extends an *earlier* call's prompt further than the previous call's (prompts of several
streams interleave in one line: a side request on another model, parallel sub-agent requests logged in one
conversation, Aider's architect/editor), that earlier call is the reference: a prompt that repeats an earlier
one in full is no prefix break, and location and model switch are judged against the reference.

The first diverging block is located with the prompt ``segments`` (tools, system, history message k, new
content) when the source has them, else with the session's recorded tool/system token counts (a block that
straddles the end of the tool definitions names both candidates).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from agentprof.analysis.calls import CallBlocks
from agentprof.analysis.provider_cache import family_of, provider_cache
from agentprof.analysis.redundancy import common_prefix

FIXES: dict[str, str] = {
    "model_switch": "Keep one model per conversation (provider caches are per model and per deployment); "
                    "switch only at natural breaks, expecting one cold prompt.",
    "idle_gap_ttl": "Keep pauses under the cache TTL (or send a cheap keep-alive before it lapses), or use a "
                    "longer TTL such as Anthropic's 1-hour cache for slow turns.",
    "system_changed": "Keep the system prompt byte-stable: move dates, timestamps, paths and other per-call "
                      "values to the end of the prompt.",
    "tools_changed": "Keep the tool set and its order fixed for the whole conversation (load every tool up "
                     "front, sort them).",
    "history_compacted": "Compaction rewrites the history: compact less often, and keep tools and system "
                         "prompt as an unchanged prefix so they still hit.",
    "history_truncated": "Dropping old messages invalidates everything after them: truncate rarely and in "
                         "large steps instead of sliding the window every turn.",
    "history_edited": "Only append to the history: don't re-render, reorder or strip earlier messages (tool "
                      "results, thinking blocks, reminders).",
    "below_minimum": "The prompt is shorter than the provider's minimum cacheable length, so nothing is cached "
                     "until the stable prefix grows past it.",
    "thinking_stripped": "With extended thinking, a user turn that is not a tool result makes Anthropic drop "
                         "earlier thinking blocks, so the cached prefix changes: deliver interjections "
                         "(notifications, reminders) as tool results, or expect one re-write after them.",
    "provider_miss": "The prefix was unchanged but the provider did not serve it (routing, eviction or "
                     "best-effort caching): pin routing (e.g. prompt_cache_key, session affinity) or set "
                     "explicit cache breakpoints.",
}

MISS_RATIO = 0.5
BOUNDARY_BLOCKS = 1


@dataclass
class _Seg:
    kind: str
    role: str
    tokens: int
    hash: int | None


def _n(x: Any) -> str:
    """A count as the reports print counts (thousands separated); anything else as it is."""
    return f"{x:,}" if isinstance(x, int | np.integer) and not isinstance(x, bool) else str(x)


def _segs(value: Any) -> list[_Seg] | None:
    if not value:
        return None
    return [_Seg(str(s.get("kind") or ""), str(s.get("role") or ""), int(s.get("tokens") or 0), s.get("hash"))
            for s in value]


def _layout(attrs: str | None) -> tuple[int, int] | None:
    """(tool tokens, system tokens) recorded on a session's agent span (e.g. by the kv-cache-tester import)."""
    if not attrs or "agentprof.prompt.tool_tokens" not in attrs:
        return None
    try:
        a = json.loads(attrs)
    except ValueError:
        return None
    t, s = a.get("agentprof.prompt.tool_tokens"), a.get("agentprof.prompt.system_tokens")
    if isinstance(t, int) and isinstance(s, int):
        return t, s
    return None


def _locate(cur: list[_Seg] | None, prev: list[_Seg] | None, token: int | None,
            layout: tuple[int, int] | None, block_size: int = 0) -> dict[str, Any]:
    """Where the prompt diverged: segment kind, role, history message index and token offset."""
    if cur is not None and prev is not None:
        k = 0
        while k < len(cur) and k < len(prev) and (cur[k].kind, cur[k].role, cur[k].hash) == \
                (prev[k].kind, prev[k].role, prev[k].hash):
            k += 1
        offset = sum(s.tokens for s in cur[:k])
        if k >= len(prev):
            return {"where": "new content", "segment_index": k, "token_offset": offset}
        seg = cur[k] if k < len(cur) else prev[k]
        out: dict[str, Any] = {"segment_index": k, "token_offset": offset, "role": seg.role}
        if seg.kind == "tools":
            out["where"] = "tool definitions"
        elif seg.kind == "system":
            out["where"] = "system prompt"
        else:
            msg = sum(1 for s in prev[:k] if s.kind == "message")
            out["where"] = f"history message {msg}"
            out["message_index"] = msg
        if k >= len(cur):
            out["removed"] = True
        return out
    if token is not None and layout is not None:
        tools, system = layout
        end = token + block_size  # the diverging block covers [token, end)
        if token < tools < end and system > 0:
            where = "tool definitions or system prompt"  # the block holds the end of one and the start of the other
        elif token < tools:
            where = "tool definitions"
        elif token < tools + system:
            where = "system prompt" if end <= tools + system else "system prompt or history"
        else:
            where = "history"
        return {"where": where, "token_offset": token}
    return {"where": "unknown", "token_offset": token}


def _message_overlap(cur: list[_Seg] | None, prev: list[_Seg] | None) -> float | None:
    """Share of the previous prompt's history messages that still appear (by hash) in this prompt."""
    if cur is None or prev is None:
        return None
    prev_h = [s.hash for s in prev if s.kind == "message"]
    if not prev_h:
        return None
    cur_h = {s.hash for s in cur if s.kind == "message"}
    return sum(1 for h in prev_h if h in cur_h) / len(prev_h)


def _attrs(raw: str | None) -> dict[str, Any]:
    try:
        v = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _one_hour_ttl(attrs: str | None) -> bool:
    """True when a call's attributes show 1-hour cache writes (Anthropic ``ephemeral_1h_input_tokens``)."""
    if not attrs or "1h" not in attrs:
        return False
    try:
        a = json.loads(attrs)
    except ValueError:
        return False
    return any("1h" in k and isinstance(v, (int, float)) and v > 0 for k, v in a.items())


FINAL_REASONS = frozenset({"stop", "end_turn", "completed", "stop_sequence"})
"""Finish reasons of a model response that ends the agent's turn (no tool call asked for): OpenAI chat and
responses, Anthropic."""


def _new_conversation(loc: dict[str, Any], cur: list[_Seg] | None, overlap: float | None, prev_attrs: str | None
                      ) -> bool:
    """Whether a prompt that broke at the first history message starts a new conversation (a second agent run in
    the same profile) rather than rewriting the old one: it keeps none of the previous prompt's messages and
    holds no model reply yet, and the previous call ended its run with a final answer (its recorded finish reason;
    without one, a compaction down to one message looks the same and stays a miss). Its prefix can then share only
    the tools and system prompt: no miss, nothing to fix."""
    if loc.get("where") != "history message 0" or cur is None or overlap not in (None, 0.0):
        return False
    if any(sg.kind == "message" and sg.role == "assistant" for sg in cur):
        return False
    reasons = _attrs(prev_attrs).get("gen_ai.response.finish_reasons")
    if isinstance(reasons, str):
        reasons = [reasons]
    return isinstance(reasons, list) and any(str(r).lower() in FINAL_REASONS for r in reasons)


def explain(cb: CallBlocks, red: pl.DataFrame, prev: np.ndarray, layouts: dict[str, tuple[int, int]] | None = None,
            miss_ratio: float = MISS_RATIO, boundary_blocks: int = BOUNDARY_BLOCKS,
            ) -> tuple[list[dict[str, Any]], list[str | None], list[dict[str, Any]]]:
    """Examine every call; return the miss records (ranked causes), each call's top cause (or None) and the
    calls that start a new conversation in the same session (:func:`_new_conversation`; not misses)."""
    calls = cb.calls
    n = calls.height
    top: list[str | None] = [None] * n
    if n == 0:
        return [], top, []
    bs = cb.block_size
    c = calls.select("session_id", "line_id", "role", "span_id", "call_index", "line_index", "model", "provider",
                     "start_ns", "end_ns", "prompt_tokens", "input_tokens", "cache_read_tokens", "has_hashes",
                     "n_blocks").to_dict(as_series=False)
    r = red.to_dict(as_series=False)
    attrs = calls.get_column("attributes").to_list()
    seg_col = calls.get_column("segments")

    def segments_of(row: int) -> list[_Seg] | None:
        v = seg_col[row]
        return _segs(v.to_list() if isinstance(v, pl.Series) else v)

    one_hour_lines = {line for line, a in zip(c["line_id"], attrs, strict=True) if _one_hour_ttl(a)}
    starts: list[int] = []  # calls that begin a new conversation in the same session (not misses)
    keys: np.ndarray | None = None
    records: list[dict[str, Any]] = []
    for i in range(n):
        p = int(prev[i])
        if p < 0:
            continue
        shared = r["prefix_blocks_prev"][i]
        q = p  # the reference call: the previous one, or an earlier one this prompt extends further
        if shared is not None and r["best_blocks"][i] is not None and (
                r["best_blocks"][i] > shared or (c["model"][i] != c["model"][p] and c["line_index"][i] > 1)):
            if keys is None:
                keys = cb.prefix_keys()
            earlier = np.arange(i - int(c["line_index"][i]), i, dtype=np.int64)
            common = common_prefix(keys, cb.offsets, np.full(earlier.size, i, dtype=np.int64), earlier)
            tied = earlier[common == common.max()].tolist()
            same_model = [k for k in tied if c["model"][k] == c["model"][i]]
            q = int((same_model or tied)[-1])  # the latest, on the same model when one ties
            shared = int(common.max())
        textual = bool(c["has_hashes"][i] and c["has_hashes"][q] and c["n_blocks"][q] > 0
                       and shared is not None and shared < c["n_blocks"][q] - boundary_blocks)
        cached = c["cache_read_tokens"][i]
        reusable = r["reusable_tokens"][i]
        estimated = False
        if reusable is None and cached is not None and c["input_tokens"][p]:
            reusable = min(c["input_tokens"][p], c["input_tokens"][i] or 0)
            estimated = True
        pc = provider_cache(c["model"][i], c["provider"][i], one_hour=c["line_id"][i] in one_hour_lines)
        provider_miss = bool(cached is not None and reusable is not None and reusable > 0
                             and cached < miss_ratio * reusable)
        if not (textual or provider_miss):
            continue
        causes: list[dict[str, Any]] = []

        def add(cause: str, score: float, detail: str, out: list[dict[str, Any]] = causes) -> None:
            out.append({"cause": cause, "score": round(score, 2), "detail": detail, "fix": FIXES[cause]})

        cur_segs, prev_segs = segments_of(i), segments_of(q)
        token = int(shared) * bs if textual else None
        loc = _locate(cur_segs, prev_segs, token, (layouts or {}).get(c["line_id"][i]), bs) if textual else None
        pt, ppt = c["prompt_tokens"][i] or 0, c["prompt_tokens"][q] or 0
        shrink = pt / ppt if ppt else None
        if textual and loc is not None:
            where = loc["where"]
            if where == "tool definitions":
                add("tools_changed", 0.9, f"the tool definitions differ from the previous call's at token "
                    f"{_n(loc.get('token_offset'))}")
            elif where == "system prompt":
                add("system_changed", 0.9, f"the system prompt differs from the previous call's at token "
                    f"{_n(loc.get('token_offset'))}")
            elif where == "tool definitions or system prompt":
                for cause, what in (("tools_changed", "end of the tool definitions"),
                                    ("system_changed", "start of the system prompt")):
                    add(cause, 0.6, f"the block at token {_n(loc.get('token_offset'))} differs; it holds the {what} "
                        "(and the other), so either changed")
            else:
                overlap = _message_overlap(cur_segs, prev_segs)
                compaction_role = c["role"][i] in ("compaction",) and c["session_id"][i] != c["session_id"][p]
                if not compaction_role and _new_conversation(loc, cur_segs, overlap, attrs[q]):
                    starts.append(i)
                    continue
                if compaction_role or (shrink is not None and shrink < 0.6 and (overlap is None or overlap < 0.5)):
                    add("history_compacted", 0.95 if compaction_role else 0.85,
                        f"the prompt went from {ppt:,} to {pt:,} tokens" + (" after a compaction boundary"
                                                                         if compaction_role else ""))
                elif shrink is not None and shrink < 0.9 and overlap is not None and overlap >= 0.5:
                    add("history_truncated", 0.85, f"{overlap:.0%} of the previous messages remain but the "
                        f"prompt shrank from {ppt:,} to {pt:,} tokens")
                else:
                    add("history_edited", 0.8 if where != "unknown" else 0.6,
                        f"{where} differs from the previous call's (first diverging block "
                        f"{_n(r['prefix_blocks_prev'][i])} of {_n(c['n_blocks'][p])})")
        if c["model"][i] and c["model"][q] and c["model"][i] != c["model"][q]:
            add("model_switch", 0.95 if provider_miss else 0.5,
                f"model changed from {c['model'][q]} to {c['model'][i]}")
        gap_s = None
        if c["start_ns"][i] is not None:
            ref = c["end_ns"][p] if c["end_ns"][p] is not None else c["start_ns"][p]
            if ref is not None:
                gap_s = max(0.0, (c["start_ns"][i] - ref) / 1e9)
        if gap_s is not None and pc.ttl_s is not None and gap_s > pc.ttl_s:
            add("idle_gap_ttl", 0.85 if provider_miss else 0.4,
                f"{gap_s:.0f} s since the previous call, longer than the {pc.ttl_s:.0f} s cache TTL")
        sizes = [x for x in (c["input_tokens"][i], c["input_tokens"][p]) if x is not None]
        if provider_miss and sizes and min(sizes) < pc.min_tokens:
            add("below_minimum", 0.9, f"{min(sizes):,} input tokens (this call or the previous one), below the "
                f"{pc.min_tokens:,}-token minimum for {c['model'][i]}")
        if provider_miss and not textual and family_of(c["model"][i], c["provider"][i]) == "anthropic":
            a = _attrs(attrs[i])
            if a.get("agentprof.prompt.trigger") in ("user_text", "tool_result+user_text") \
                    and a.get("agentprof.prompt.thinking"):
                add("thinking_stripped", 0.6, "the triggering user turn holds text, not only tool results, in a "
                    "conversation with extended thinking (a hypothesis from real Claude Code traces: the read "
                    "covers only the tools and system prompt)")
        if provider_miss and not textual and not causes:
            add("provider_miss", 0.7, f"reusable {_n(reusable)} tokens, provider read {_n(cached)}"
                + (" (reusable estimated from the previous call's input)" if estimated else ""))
        elif provider_miss and not any(x["cause"] in ("model_switch", "idle_gap_ttl", "below_minimum")
                                       for x in causes):
            add("provider_miss", 0.3, f"reusable {_n(reusable)} tokens, provider read {_n(cached)}")
        causes.sort(key=lambda x: -x["score"])
        top[i] = causes[0]["cause"] if causes else None
        records.append({
            "session_id": c["session_id"][i], "span_id": c["span_id"][i], "call_index": c["call_index"][i],
            "line_index": c["line_index"][i], "previous_span_id": c["span_id"][p],
            "reference_span_id": c["span_id"][q], "model": c["model"][i],
            "provider_family": family_of(c["model"][i], c["provider"][i]), "start_ns": c["start_ns"][i],
            "trigger": [t for t, on in (("prefix_break", textual), ("provider_miss", provider_miss)) if on],
            "prompt_tokens": pt, "previous_prompt_tokens": ppt,
            "prefix_reuse_prev": r["prefix_reuse_prev"][i], "reusable_tokens": reusable,
            "cached_tokens": cached, "gap_tokens": (reusable - cached) if reusable is not None and cached is not None
            else None,
            "first_diverging_block": shared if textual else None,
            "diverging_token": token, "location": loc, "idle_gap_s": gap_s,
            "cache_ttl_s": pc.ttl_s, "causes": causes,
        })
    return records, top, [{"session_id": c["session_id"][i], "span_id": c["span_id"][i],
                            "call_index": c["call_index"][i]} for i in starts]


def by_cause(misses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Misses grouped by their most likely cause (and its fix), largest group first: what a reader acts on once,
    instead of the same fix once per call. Each group: ``cause``, ``score`` (its highest), ``fix``, ``misses``
    (the records, in trace order) and ``sessions``."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for m in misses:
        top = max(m.get("causes") or [{}], key=lambda c: c.get("score") or 0)
        key = (str(top.get("cause") or "unexplained"), str(top.get("fix") or ""))
        g = groups.setdefault(key, {"cause": key[0], "fix": key[1], "score": 0.0, "misses": [], "sessions": set()})
        g["score"] = max(g["score"], float(top.get("score") or 0.0))
        g["misses"].append(m)
        g["sessions"].add(m.get("session_id"))
    out = sorted(groups.values(), key=lambda g: (-len(g["misses"]), -g["score"], g["cause"]))
    return [{**g, "sessions": len(g["sessions"])} for g in out]
