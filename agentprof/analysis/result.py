"""The analysis result: per-call and per-session tables, corpus figures and cache-miss explanations.

``Analysis.to_dict()`` is exactly what ``agentprof analyze --json`` prints (keys documented in
``docs/ANALYSIS.md``). Its notebook display belongs to the report stage (:mod:`agentprof.report.notebook`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from agentprof.analysis.timesplit import TimeSplit
from agentprof.trace.schema import TraceMeta

TIME_KEYS = ("wall_s", "model_s", "model_ttft_s", "model_decode_s", "tool_s", "parse_s", "orchestration_s",
             "wait_s", "glue_s", "startup_s", "critical_path_s", "span_sum_s", "amdahl_bound_s", "agent_active_s",
             "amdahl_bound_active_s")


def capture_cost(meta: TraceMeta, wall_s: float | None) -> dict[str, Any] | None:
    """agentprof's own cost while capturing, from the trace's final meta record (None for imported traces):
    ``s`` on the agent's threads, ``background_cpu_s`` on its fingerprint thread (None in traces before it was
    kept), ``total_s`` their sum (the process CPU a run with and without agentprof differs by), and their shares
    of ``wall_s``. The agent's wall time grows by between ``s`` (the background work overlaps the agent's waits
    on a free core) and ``total_s`` (it holds the GIL while the agent runs Python, or no core is free)."""
    ns = meta.capture_overhead_ns
    if ns is None:
        return None
    bg = meta.capture_background_cpu_ns
    total = (ns + (bg or 0)) / 1e9
    return {"s": ns / 1e9, "background_cpu_s": bg / 1e9 if bg is not None else None, "total_s": total,
            "share_of_wall": (ns / 1e9 / wall_s) if wall_s else None,
            "total_share_of_wall": (total / wall_s) if wall_s else None}


@dataclass
class Analysis:
    """Everything ``agentprof analyze`` computes for one trace (or corpus)."""

    meta: TraceMeta
    calls: pl.DataFrame  # one row per model call (see docs/ANALYSIS.md, "Per-call table")
    sessions: pl.DataFrame  # one row per session
    conversations: pl.DataFrame  # one row per conversation line (kv-cache-tester hit rates)
    time: TimeSplit
    redundancy: dict[str, Any]
    cache_misses: list[dict[str, Any]]
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    n_conversations: int = 0
    failures: dict[str, Any] = field(default_factory=dict)  # failed model and tool calls (analysis.failures)
    tools: list[dict[str, Any]] = field(default_factory=list)  # per-tool figures (analysis.tools), by total time
    profile: Any = None  # CPU-bound shares and sampled hotspots (analysis.hotspots.Profile)
    conversation_time: dict[str, TimeSplit] = field(default_factory=dict, repr=False)
    """The timed top-level conversations' splits that ``time`` sums (in session order): what a partitioned
    run (``agentprof.distributed``) adds up again, in the same order."""

    @property
    def n_sessions(self) -> int:
        return self.sessions.height

    @property
    def n_model_calls(self) -> int:
        return self.calls.height

    def capture_overhead(self) -> dict[str, Any] | None:
        """agentprof's own cost while it captured this trace (:func:`capture_cost`; None for imported traces)."""
        return capture_cost(self.meta, self.time.wall_s)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document."""
        t = self.time.to_dict()
        time = {k: t[k] for k in TIME_KEYS}
        time["waits_by_reason"] = dict(sorted(t["wait_by_reason"].items()))
        time["shares"] = self.time.shares()
        prof = self.profile
        time["orchestration_cpu_s"] = prof.orchestration_cpu_s if prof is not None else None
        return {
            "source": {"format": self.meta.source_format, "tokenizer": self.meta.tokenizer,
                       "tokenizer_exact": self.meta.tokenizer_exact, "block_size": self.meta.block_size,
                       "hash_scheme": self.meta.extra.get("hash_scheme"), "files": len(self.meta.sources)},
            "sessions": self.n_sessions,
            "conversations": self.n_conversations,
            "model_calls": self.n_model_calls,
            "time": time,
            "redundancy": self.redundancy,
            "cache_misses": self.cache_misses,
            "failures": self.failures,
            "tools": self.tools,
            "capture_overhead": self.capture_overhead(),
            "cpu_bound": prof.to_dict() if prof is not None else None,
            "hotspots": _jsonable(prof.hotspots) if prof is not None else [],
            "per_session": _jsonable(self.sessions.to_dicts()),
            "per_conversation": _jsonable(self.conversations.to_dicts()),
            "diagnostics": self.diagnostics,
        }


def _jsonable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        out.append({k: (v if not isinstance(v, float) or v == v else None) for k, v in r.items()})
    return out
