"""Chrome trace-event JSON (the format chrome://tracing and the Perfetto UI load).

Mapping: one process (``pid``) per session, in the report's order with subagents after their parent; one
thread (``tid``) per lane, where lanes are chosen so that the complete (``"X"``) events on a thread are
properly nested, as the format requires. Timestamps are integer microseconds from the trace's first instant
(floor of the nanosecond times, which keeps containment and disjointness exact). Metadata (``"M"``) events
name processes and threads; a counter (``"C"``) track per session plots prompt and cached tokens per model
call; each slice's ``args`` carry kind, model, token counts, status and timing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import polars as pl

from agentprof import __version__
from agentprof.report.lanes import pack_nested_lanes
from agentprof.report.timeline import session_table, span_depths
from agentprof.trace import Trace

_ARG_COLUMNS = ("provider", "model", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
                "reasoning_tokens", "ttft_s", "status", "error_type", "timing", "session_id", "span_id")


def to_trace_events(trace: Trace) -> dict[str, Any]:
    """The trace as a Chrome trace-event JSON object ``{"traceEvents": [...], ...}``."""
    spans = trace.spans
    timed = spans.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    events: list[dict[str, Any]] = []
    t0 = int(timed.get_column("start_ns").min()) if timed.height else 0
    sessions = session_table(spans)
    depth = span_depths(timed, clamp=False) if timed.height else []
    timed = timed.with_columns(pl.Series("_depth", depth, dtype=pl.Int64))
    groups = {k[0]: g for k, g in timed.group_by("session_id")}
    for pid, s in enumerate(sessions, start=1):
        label = s.label if s.role == "main" else f"{s.label} ({s.role})"
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        g = groups.get(s.session_id)
        if g is None or g.height == 0:
            continue
        g = g.sort("start_ns")
        start_us = [(v - t0) // 1000 for v in g.get_column("start_ns").to_list()]
        end_us = [(v - t0) // 1000 for v in g.get_column("end_ns").to_list()]
        lanes = pack_nested_lanes(start_us, end_us, g.get_column("_depth").to_list())
        for lane in range(max(lanes) + 1):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane + 1,
                           "args": {"name": "main" if lane == 0 else f"parallel {lane}"}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": lane + 1,
                           "args": {"sort_index": lane}})
        cols = {c: g.get_column(c).to_list() for c in ("name", "kind", "attributes", *_ARG_COLUMNS)}
        for i in range(g.height):
            args = {"kind": cols["kind"][i]}
            for c in _ARG_COLUMNS:
                v = cols[c][i]
                if v is not None:
                    args[c] = v
            events.append({"name": cols["name"][i], "cat": cols["kind"][i], "ph": "X", "ts": start_us[i],
                           "dur": end_us[i] - start_us[i], "pid": pid, "tid": lanes[i] + 1, "args": args})
            if cols["kind"][i] == "model" and cols["input_tokens"][i] is not None:
                counter = {"prompt": cols["input_tokens"][i]}
                if cols["cache_read_tokens"][i] is not None:
                    counter["cached"] = cols["cache_read_tokens"][i]
                events.append({"name": "prompt tokens", "ph": "C", "ts": start_us[i], "pid": pid, "args": counter})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": f"agentprof {__version__}",
            "source_format": trace.meta.source_format,
            "t0_epoch_ns": str(t0),
            "spans_without_times": spans.height - timed.height,
        },
    }


def write_perfetto(trace: Trace, path: str | os.PathLike[str]) -> dict[str, int]:
    """Write the Chrome trace-event JSON to ``path``; returns counts (slices, sessions, skipped untimed spans)."""
    data = to_trace_events(trace)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"), ensure_ascii=False)
    slices = sum(1 for e in data["traceEvents"] if e["ph"] == "X")
    return {"slices": slices, "sessions": sum(1 for e in data["traceEvents"] if e.get("name") == "process_name"),
            "skipped_untimed": data["otherData"]["spans_without_times"]}
