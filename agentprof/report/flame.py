"""Flame (icicle) data of a sampled trace: one call tree per place (orchestration, parse, each tool), weighted
by sampled wall seconds with on-CPU seconds alongside, for the HTML view (``assets/flame.js``) and the
terminal's top-N table. Built from :mod:`agentprof.analysis.hotspots`' attribution, so the numbers match
``analyze --json``'s hotspots."""

from __future__ import annotations

from typing import Any

from agentprof.analysis.hotspots import Attributed, attribute
from agentprof.trace import Trace

MIN_SHARE = 0.002
"""Nodes below this share of their place's total are dropped (the page stays small)."""
MAX_DEPTH = 96
CAPTURE_DIR = "/agentprof/capture/"


def place_frames(a: Attributed, frames: list[int], where: str) -> list[int]:
    """A sample's frames for its place: a tool's or parse's stack starts after agentprof's wrapper frame, so
    the tree is rooted at the tool's own function."""
    if where == "orchestration":
        return frames
    files = a.samples.frame_file
    cut = -1
    for i in range(len(frames) - 1):
        if CAPTURE_DIR in files[frames[i]].replace("\\", "/") and CAPTURE_DIR not in \
                files[frames[i + 1]].replace("\\", "/"):
            cut = i
    return frames[cut + 1:] if cut >= 0 else frames


def flame_data(trace: Trace, a: Attributed | None = None) -> dict[str, Any] | None:
    """``{"frames": [[name, file], ...], "places": [{"where", "samples", "wall_s", "cpu_s", "tree"}]}`` where
    a tree node is ``[frame index, wall_s, cpu_s, [children], wait_s]`` (wait: runnable, waiting for a CPU;
    root: frame index -1); None when unsampled."""
    a = a if a is not None else attribute(trace)
    if a is None:
        return None
    s = a.samples
    roots: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    stacks: dict[int, list[int]] = {}
    for i in range(len(s)):
        where = str(a.where[i])
        nd = int(s.node[i])
        fr = stacks.get(nd)
        if fr is None:
            fr = stacks[nd] = s.stack(nd)
        fr = place_frames(a, fr, where)[:MAX_DEPTH]
        w, c, q = float(a.wall_s[i]), float(a.cpu_s[i]), float(s.runq_ns[i]) / 1e9
        node = roots.setdefault(where, [-1, 0.0, 0.0, {}, 0.0])
        counts[where] = counts.get(where, 0) + 1
        node[1] += w
        node[2] += c
        node[4] += q
        for f in fr:
            node = node[3].setdefault(f, [f, 0.0, 0.0, {}, 0.0])
            node[1] += w
            node[2] += c
            node[4] += q
    used: dict[int, int] = {}

    def pack(node: list[Any], floor: float) -> list[Any]:
        kids = [pack(k, floor) for k in sorted(node[3].values(), key=lambda k: -k[1]) if k[1] >= floor]
        idx = -1 if node[0] < 0 else used.setdefault(node[0], len(used))
        return [idx, round(node[1], 6), round(node[2], 6), kids, round(node[4], 6)]

    order = sorted(roots, key=lambda w: (w != "orchestration", -roots[w][1]))
    places = [{"where": w, "samples": counts[w], "wall_s": roots[w][1], "cpu_s": roots[w][2], "wait_s": roots[w][4],
               "tree": pack(roots[w], roots[w][1] * MIN_SHARE)} for w in order]
    names = [[""] * 2 for _ in used]
    for f, k in used.items():
        names[k] = [s.frame_name[f], s.frame_file[f]]
    return {"frames": names, "places": places}
