"""``agentprof export --to speedscope``: sampled stacks as a speedscope file (https://www.speedscope.app).

One sampled profile per place and thread (orchestration on the agent's thread, each tool, parse, other
threads), in seconds, each sample weighted by the wall time it stands for; a second set weighted by on-CPU
time. Samples stay in time order, so speedscope's time-order view follows the run. Frames carry function and
file names only. The layout follows speedscope's file-format schema (checked against it in the tests).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from agentprof import __version__
from agentprof.analysis.hotspots import attribute
from agentprof.errors import AgentprofError
from agentprof.report.flame import place_frames
from agentprof.trace import Trace

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


def speedscope(trace: Trace, name: str | None = None) -> dict[str, Any]:
    """The speedscope document of ``trace``'s samples (an ``AgentprofError`` when it has none)."""
    a = attribute(trace)
    if a is None:
        raise AgentprofError("the trace has no stack samples: capture it with agentprof.profile(..., sample=True) "
                             "or `agentprof run --sample`")
    s = a.samples
    frames: list[dict[str, Any]] = []
    index: dict[int, int] = {}

    def fid(f: int) -> int:
        k = index.get(f)
        if k is None:
            k = index[f] = len(frames)
            frames.append({"name": s.frame_name[f], "file": s.frame_file[f]})
        return k

    groups: dict[tuple[str, str], list[int]] = {}
    for i in np.argsort(s.t_ns, kind="stable").tolist():
        thread = s.thread_name[int(s.thread[i])] or f"thread {int(s.thread[i])}"
        groups.setdefault((str(a.where[i]), thread), []).append(i)
    profiles = []
    t0 = int(s.t_ns.min())
    for weight in ("wall", "cpu"):
        ws = a.wall_s if weight == "wall" else a.cpu_s
        for (where, thread), rows in sorted(groups.items(), key=lambda kv: (kv[0][0] != "orchestration", kv[0])):
            stacks = [[fid(f) for f in place_frames(a, s.stack(int(s.node[i])), where)] for i in rows]
            weights = [float(ws[i]) for i in rows]
            if weight == "cpu" and not any(weights):
                continue
            start = (int(s.t_ns[rows[0]]) - t0) / 1e9
            profiles.append({"type": "sampled", "name": f"{where} · {thread} · {weight}", "unit": "seconds",
                             "startValue": start, "endValue": start + sum(weights), "samples": stacks,
                             "weights": weights})
    return {"$schema": SCHEMA_URL, "shared": {"frames": frames}, "profiles": profiles,
            "name": name or trace.meta.name or "agentprof samples", "activeProfileIndex": 0,
            "exporter": f"agentprof {__version__}"}


def write_speedscope(trace: Trace, path: str | os.PathLike[str]) -> dict[str, int]:
    """Write the speedscope file; returns counts for the CLI line."""
    doc = speedscope(trace)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    return {"profiles": len(doc["profiles"]), "frames": len(doc["shared"]["frames"]),
            "samples": len(trace.samples) if trace.samples is not None else 0}
