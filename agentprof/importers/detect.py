"""Recognize an input file's format from its name and first bytes (``--from auto``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("agentprof", "claude-code", "codex", "openhands", "mini-swe-agent", "swe-agent", "aider",
           "kv-cache-tester", "otlp-json", "tracelab")
"""Every format ``agentprof import --from`` accepts (besides ``auto``)."""

UNKNOWN = "unknown"
_HEAD = 1 << 16
_WHOLE_LIMIT = 64 << 20
_CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
_CC_TYPES = {"user", "assistant", "system", "progress", "summary", "file-history-snapshot", "queue-operation",
             "custom-title", "attachment"}
_SCAN_LINES = 64
"""JSON Lines records read past ones of no known kind before a file is called unknown: newer agent versions
open their logs with metadata records (Claude Code 2.1's ``mode``/``permission-mode``/``ai-title``)."""
_KVCT_HEAD = re.compile(rb'^\{\s*"(id|models|block_size|hash_id_scope|tool_tokens|system_tokens|requests)"\s*:')


def classify(obj: Any) -> str:
    """Format of one parsed JSON object: a whole document or the first record of a JSONL log."""
    if not isinstance(obj, dict):
        return UNKNOWN
    if obj.get("record") == "meta" and obj.get("format") == "agentprof-trace":
        return "agentprof"
    if "resourceSpans" in obj or "resourceLogs" in obj or "resourceMetrics" in obj:
        return "otlp-json"
    if "requests" in obj and ("block_size" in obj or "hash_id_scope" in obj or "models" in obj):
        return "kv-cache-tester"
    if "timing_events" in obj and "session_id" in obj and ("input_tokens_total" in obj or "prefix_tokens" in obj
                                                            or "round_index" in obj):
        return "tracelab"  # TraceLab's normalized round trace: one row per model call
    t = obj.get("type")
    if not isinstance(t, str):  # valid JSON of other types (a list or object as "type") is no known record
        t = None
    if t in _CODEX_TYPES and "payload" in obj:
        return "codex"
    if "payload" not in obj and "id" in obj and "timestamp" in obj and ("instructions" in obj or "git" in obj):
        return "codex"  # rollouts before 2025: a bare session header line
    if t in _CC_TYPES and ("sessionId" in obj or "parentUuid" in obj or "uuid" in obj or t in
                           ("summary", "file-history-snapshot", "queue-operation")):
        return "claude-code"
    if "messages" in obj and "response" in obj:
        return "openhands"
    if ("messages" in obj or "input" in obj) and ("response" in obj or "error" in obj) \
            and ("latency_sec" in obj or "timestamp" in obj or "kwargs" in obj):
        return "openhands"  # V1 SDK logs: Responses API calls (``input``) and failed calls (``-error.json``)
    fmt = str(obj.get("trajectory_format", ""))
    info = obj.get("info") if isinstance(obj.get("info"), dict) else {}
    if fmt.startswith("mini-swe-agent") or ("messages" in obj and ("mini_version" in info or "config" in info)):
        return "mini-swe-agent"
    if "trajectory" in obj and ("history" in obj or "info" in obj):
        return "swe-agent"
    attempts = obj.get("attempts")
    if isinstance(attempts, list) and attempts and all(isinstance(a, dict) and "trajectory" in a for a in attempts):
        return "swe-agent"  # the retry agent's file: one trajectory per attempt
    return UNKNOWN


@dataclass
class Detection:
    """What :func:`sniff` found: the format, the line that told it, the leading records it read past (their
    ``type`` or a short description), and why a file is ``unknown``."""

    format: str
    line: int | None = None
    skipped: list[str] = field(default_factory=list)
    reason: str | None = None


def detect_format(path: str | Path) -> str:
    """One of :data:`FORMATS`, or ``"unknown"`` for a file no importer reads."""
    return sniff(path).format


def sniff(path: str | Path) -> Detection:
    """Recognize a file's format from its first bytes; JSON Lines logs are read record by record past leading
    records of no known kind (up to :data:`_SCAN_LINES`), which are reported in ``skipped``."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            head = f.read(_HEAD)
    except OSError as e:
        return Detection(UNKNOWN, reason=f"cannot read: {e.strerror or e}")
    if head.startswith(b"PAR1"):
        return Detection("agentprof")
    stripped = head.lstrip()
    if not stripped:
        return Detection(UNKNOWN, reason="empty file")
    if stripped.startswith(b"TO LLM ") or p.name.endswith(".llm.history"):
        return Detection("aider")
    if stripped.startswith(b"[") and p.name.endswith(".traj.json"):
        fmt = _message_list(p)
        return Detection(fmt, reason=None if fmt != UNKNOWN else "a JSON list that is not a chat message list")
    if not stripped.startswith(b"{"):
        return Detection(UNKNOWN, reason="not JSON (nor an Aider history)")
    if _KVCT_HEAD.match(stripped) and b'"requests"' in head and (b'"hash_ids"' in head or b'"block_size"' in head):
        return Detection("kv-cache-tester")
    found = _scan_lines(p)
    if found.format != UNKNOWN:
        return found
    try:
        size = p.stat().st_size
        if size > _WHOLE_LIMIT:
            fmt = _sniff_large(p, head, size)
            return Detection(fmt) if fmt != UNKNOWN else found
        fmt = classify(json.loads(p.read_bytes()))
    except (OSError, ValueError, RecursionError):
        return found
    return Detection(fmt) if fmt != UNKNOWN else Detection(UNKNOWN, reason=found.reason or "a JSON document "
                                                           "of no known trace format")


def _scan_lines(p: Path) -> Detection:
    """Classify the first records of a JSON Lines file, reading past records of no known format."""
    skipped: list[str] = []
    try:
        with p.open("rb") as f:
            for n in range(1, _SCAN_LINES + 1):
                line = f.readline(_WHOLE_LIMIT)
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError):
                    if n == 1:
                        break  # not JSON Lines (a pretty-printed document): the caller reads it whole
                    skipped.append("a line that is not JSON")
                    continue
                fmt = classify(obj)
                if fmt != UNKNOWN:
                    return Detection(fmt, n, skipped)
                t = obj.get("type") if isinstance(obj, dict) else None
                skipped.append(f"type {t!r}" if isinstance(t, str) else
                               ("an object with keys " + ", ".join(sorted(obj)[:4])) if isinstance(obj, dict)
                               else f"a JSON {type(obj).__name__}")
    except OSError as e:
        return Detection(UNKNOWN, reason=f"cannot read: {e.strerror or e}")
    if not skipped:
        return Detection(UNKNOWN, reason="not a JSON object per line")
    kinds = sorted(set(skipped))
    return Detection(UNKNOWN, skipped=skipped, reason=f"its first {len(skipped)} record(s) are of no known "
                     f"trace format ({', '.join(kinds[:4])}{', …' if len(kinds) > 4 else ''})")


def _sniff_large(p: Path, head: bytes, size: int) -> str:
    """A one-document file too large to parse just to name its format (over 64 MiB): named by the keys its
    first and last 64 KiB show (the importer then parses it once, under its own size limit)."""
    try:
        with p.open("rb") as f:
            f.seek(max(0, size - _HEAD))
            tail = f.read(_HEAD)
    except OSError:
        return UNKNOWN
    both = head + tail
    if b'"resourceSpans"' in head or b'"resourceLogs"' in head:
        return "otlp-json"
    if b'"trajectory_format"' in both and b"mini-swe-agent" in both or b'"mini_version"' in both:
        return "mini-swe-agent"
    if b'"trajectory"' in both and (b'"history"' in both or b'"info"' in both):
        return "swe-agent"
    if b'"messages"' in both and b'"response"' in both:
        return "openhands"
    return UNKNOWN


def _message_list(p: Path) -> str:
    """A ``.traj.json`` holding only a list of chat messages: an early mini-swe-agent trajectory."""
    try:
        if p.stat().st_size > _WHOLE_LIMIT:
            with p.open("rb") as f:
                return "mini-swe-agent" if b'"role"' in f.read(_HEAD) else UNKNOWN
        obj = json.loads(p.read_bytes())
    except (OSError, ValueError, RecursionError):
        return UNKNOWN
    if isinstance(obj, list) and obj and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in obj):
        return "mini-swe-agent"
    return UNKNOWN
