"""Agent-active time on the shipped kv-cache-tester samples: the waits by reason against the raw files' gaps,
classified independently here by the documented rule. Some requests' ``think_time`` reaches back before the
previous request (counted from an earlier response), so gaps overlap: on the critical path each instant counts
once, and the union of each class's gap intervals is what the split can show at most."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentprof.analysis import analyze
from agentprof.importers import load_any
from agentprof.trace.waits import IDLE_GAP_S

KVCT = Path(__file__).resolve().parents[2] / "traces" / "samples" / "kv-cache-tester"


def test_kv_cache_tester_waits_by_reason_and_agent_active_time():
    want: dict[str, list[tuple[float, float]]] = {"user_turn": [], "idle": [], "tool": []}
    for k, f in enumerate(sorted(KVCT.glob("*.json"))):
        base = k * 1e7  # conversations side by side on one axis
        reqs = [r for r in json.loads(f.read_text())["requests"] if r.get("type") != "subagent"]
        for i, r in enumerate(reqs):
            gap = r.get("think_time") or 0
            if gap <= 0:
                continue
            types = r.get("input_types") or []
            prev_stop = reqs[i - 1].get("stop") if i else None
            cls = "user_turn" if prev_stop == "end_turn" or ("text" in types and "tool_result" not in types) \
                else "idle" if gap >= IDLE_GAP_S else "tool"
            want[cls].append((base + r["t"] - gap, base + r["t"]))
    t = analyze(load_any(KVCT)).to_dict()["time"]
    w = t["waits_by_reason"]
    for cls, got in (("user_turn", w["user_turn"]), ("idle", w["idle"]), ("tool", t["tool_s"])):
        assert 0.9 * _union(want[cls]) < got <= _union(want[cls]) + (2000.0 if cls == "idle" else 1.0), cls
    assert w["user_turn"] == pytest.approx(_union(want["user_turn"]), rel=1e-3)  # no other gap hides these
    everything = _union(want["user_turn"] + want["idle"] + want["tool"])
    # every gap instant is on the path once; idle also holds long stretches nothing covers (trace_0494: a
    # request at t=351 s whose next request comes 1,900 s later, too long for its 684 output tokens)
    assert everything - 1.0 <= w["user_turn"] + w["idle"] + t["tool_s"] <= everything + 2000.0
    assert set(w) <= {"user_turn", "idle", "residue"} and w["residue"] < 0.01 * t["wall_s"]
    assert t["agent_active_s"] == pytest.approx(t["wall_s"] - w["user_turn"] - w["idle"])
    assert t["amdahl_bound_active_s"] == pytest.approx(t["amdahl_bound_s"] - w["user_turn"] - w["idle"])
    # most of these sessions' time is their users'; of the agent's own time, tools take more than the model
    assert t["agent_active_s"] < 0.5 * t["wall_s"]
    sh = t["shares"]["of_agent_active"]
    assert sh["tool"] > sh["model"] > t["shares"]["of_wall"]["model"]


def _union(iv: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(iv):
        if b > end:
            total += b - max(a, end)
            end = b
    return total
