"""The report's first screen in words: where the time went, what each replayed system does to the task and why
not more, and the single biggest lever. Every figure is read from results computed elsewhere (the headline's
time split, the what-if panel's replay rows and bands); the sentences are written here once, so the page, its
JSON and the terminal show the same words and numbers.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from agentprof.report.formats import fmt_duration, fmt_x

_WAIT_WORDS = {"user_turn": "waiting for the user", "approval": "waiting for approvals", "idle": "idle",
               "unrecorded": "unrecorded time", "retry": "retry back-off"}
_PART_WORDS = {"tool_s": "tool time", "orchestration_s": "orchestration", "wait_s": "waiting"}
# what a ranged catalog number is, in words (the part after the owner's key)
_ATTR_WORDS = {"hbm_bw": "memory bandwidth", "hbm_bytes": "memory size", "bf16_flops": "compute",
               "fp8_flops": "compute", "fp4_flops": "compute", "scaleup_bw": "interconnect",
               "st_speed": "single-thread speed", "mt_speed": "multi-thread speed", "mem_bw": "memory bandwidth",
               "bw": "bandwidth", "overhead_scale": "fixed overheads"}
_MERGE = {frozenset({"memory bandwidth", "memory size"}): "memory bandwidth and size"}
_SHORT = re.compile(r"^(\d+x\s+)?(OpenAI|NVIDIA|AMD|Intel|Google)?\s*")


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _owner(key: str, catalog: Any) -> str:
    """A catalog item's short name ("Jalapeño" for ``jalapeno``); the link of a system is "the host link"."""
    if catalog is not None:
        for group in ("accelerators", "hosts"):
            item = getattr(catalog, group, {}).get(key)
            if item is not None and getattr(item, "display", None):
                return _SHORT.sub("", re.split(r"[(,]", item.display)[0]).strip() or key
        if key in getattr(catalog, "links", {}):
            return "the host link"
    return key


def band_causes(ranged: list[str], catalog: Any = None) -> str:
    """The estimates a band rests on in plain words: "Jalapeño's compute and memory bandwidth and the CPU-tier
    size are estimates" (the parameter names stay in the JSON and the disclosure)."""
    owners: dict[str, list[str]] = {}
    extra: list[str] = []
    for name in ranged:
        key, _, attr = name.partition(".")
        if key == "agentic":
            if "the CPU-tier size" not in extra:
                extra.append("the CPU-tier size")
            continue
        word = _ATTR_WORDS.get(attr, "efficiency factors" if attr.startswith("params.") else "figures")
        who = _owner(key, catalog)
        words = owners.setdefault(who, [])
        if word not in words:
            words.append(word)
    for words in owners.values():
        for pair, merged in _MERGE.items():
            if pair <= set(words):
                words[words.index(min(pair, key=words.index))] = merged
                words[:] = [w for w in words if w not in pair]
    ordered = sorted(owners.items(), key=lambda kv: -len(kv[1]))  # the part with most estimates first
    parts = [f"{who}'s {_and(words)}" for who, words in ordered] + extra
    if not parts:
        return ""
    n = sum(len(w) for w in owners.values()) + len(extra)
    return _and(parts) + (" are estimates" if n > 1 else " is an estimate")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _why_not(row: dict[str, Any], waits: dict[str, float]) -> str:
    """Why the task does not get faster on this system than it does, in one phrase."""
    e2e = row.get("e2e_s") or 0.0
    if e2e <= 0:
        return ""
    ms = row.get("model_speedup")
    if ms is not None and ms < 1:
        return f"its model calls are slower than the recorded ones ({fmt_x(ms)})"
    model = (row.get("model_s") or 0.0) / e2e
    part, secs = max(((k, row.get(k) or 0.0) for k in _PART_WORDS), key=lambda kv: kv[1])
    words = _PART_WORDS[part]
    if part == "wait_s" and waits:
        total = sum(v for v in waits.values() if v) or 0.0
        reason, v = max(waits.items(), key=lambda kv: kv[1] or 0.0)
        if total and (v or 0.0) >= 0.5 * total:  # one reason holds most of the waiting: name it
            secs, words = secs * v / total, _WAIT_WORDS.get(reason, "waiting")
    return f"model calls are {_pct(model)} of the task; {_pct(secs / e2e)} is {words}"


def _band(row: dict[str, Any]) -> list[float] | None:
    b = (row.get("band") or {}).get("speedup_vs_recorded")
    if not b or any(v is None for v in b) or fmt_x(min(b)) == fmt_x(max(b)):  # a range that does not show is none
        return None
    return [min(b), max(b)]


def parallel_tools_s(spans: pl.DataFrame) -> float:
    """Seconds top-level sessions would save if the tools one model response asked for ran side by side: per turn
    (the tool spans between a model call's end and the next call's start) the time they cover minus the longest
    one. An upper bound: tools that depend on each other cannot overlap."""
    cols = ("session_id", "parent_session_id", "kind", "start_ns", "end_ns")
    if spans.height == 0 or any(c not in spans.columns for c in cols):
        return 0.0
    df = (spans.select(*cols)
          .filter(pl.col("kind").is_in(["model", "tool"]) & pl.col("parent_session_id").is_null()
                  & pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
          .sort("session_id", "start_ns"))
    if df.height == 0:
        return 0.0
    df = df.with_columns(pl.col("kind").eq("model").cum_sum().over("session_id").alias("turn"))
    g = ["session_id", "turn"]
    tools = df.filter(pl.col("kind") == "tool").with_columns(  # sorted by start within each turn
        pl.col("end_ns").cum_max().shift(1).over(g).alias("_reach"))
    # the time the turn's tools cover (their union): each adds what reaches past every earlier one's end
    covered = (pl.col("end_ns") - pl.max_horizontal("start_ns", pl.col("_reach").fill_null(pl.col("start_ns"))))
    per_turn = tools.group_by(g).agg(
        pl.len().alias("n"), covered.clip(lower_bound=0).sum().alias("covered"),
        (pl.col("end_ns") - pl.col("start_ns")).max().alias("longest"))
    saved = per_turn.filter(pl.col("n") >= 2).select((pl.col("covered") - pl.col("longest")).clip(lower_bound=0)
                                                      .sum()).item() or 0
    return saved / 1e9


def answer(headline: dict[str, Any], whatif: dict[str, Any], spans: pl.DataFrame | None = None,
           catalog: Any = None) -> dict[str, Any]:
    """The first screen: ``split`` (one sentence on where the time went), ``systems`` (per replayed system its
    task time, speed-up, band as a range with its plain causes, and why not more), ``lever`` (the biggest one, with
    its effect) and ``ceiling`` (the Amdahl bound). Fields are ``None`` where their input is missing."""
    time = headline.get("time") or {}
    wall = time.get("wall_s") or headline.get("wall_s")
    waits = {k: float(v) for k, v in (headline.get("waits_by_reason") or {}).items() if v}
    out: dict[str, Any] = {"wall_s": wall, "split": None, "systems": [], "lever": None, "ceiling": None}
    shares = headline.get("shares") or {}
    if wall and shares:
        parts = [(k, shares.get(f"{k}_s")) for k in ("model", "tool", "wait", "orchestration", "parse")]
        parts = sorted([(k, v) for k, v in parts if v and v >= 0.005], key=lambda kv: -kv[1])
        names = {"model": "model calls", "tool": "tools", "wait": "waiting", "orchestration": "orchestration",
                 "parse": "parsing"}
        out["split"] = (f"{fmt_duration(wall)} end to end: "
                        + ", ".join(f"{names[k]} {_pct(v)}" for k, v in parts) + ".")
    rows = [r for r in (whatif.get("rows") or []) if isinstance(r, dict)] if whatif.get("status") == "ok" else []
    recorded = next((r for r in rows if r.get("name") == "recorded"), None)
    for r in rows:
        if r is recorded:
            continue
        if r.get("error"):
            out["systems"].append({"name": r["name"], "display": r.get("display"), "error": r["error"]})
            continue
        band = _band(r)
        out["systems"].append({
            "name": r["name"], "display": r.get("display"), "e2e_s": r.get("e2e_s"), "speedup": r.get("speedup"),
            "band": band, "band_causes": band_causes(r.get("band_ranged") or [], catalog) if band else None,
            "why_not": _why_not(r, waits)})
    out["lever"] = _lever(recorded, [r for r in rows if r is not recorded and not r.get("error")], spans,
                          time.get("startup_s") or 0.0)
    bound, ratio = headline.get("amdahl_bound_s"), headline.get("max_speedup")
    if bound and ratio:
        out["ceiling"] = {"e2e_s": bound, "speedup": ratio,
                          "text": f"instant model calls would give at most {fmt_x(ratio)} ({fmt_duration(bound)})"}
    return out


def _lever(recorded: dict[str, Any] | None, systems: list[dict[str, Any]],
           spans: pl.DataFrame | None, startup_s: float = 0.0) -> dict[str, Any] | None:
    """The candidate that saves the most task time: the fastest chip replayed, the fastest host replayed (its
    tool and orchestration time), the tools of one turn run side by side, or the time before the session's first
    span (the analysis' ``startup_s``: under ``agentprof run`` the interpreter, imports and set-up)."""
    if not recorded or not recorded.get("e2e_s"):
        return None
    e2e = float(recorded["e2e_s"])
    cands: list[tuple[float, str, str]] = []
    for r in systems:
        if r.get("e2e_s") is not None:
            saved = e2e - r["e2e_s"]
            host = (recorded.get("tool_s") or 0) + (recorded.get("orchestration_s") or 0) \
                - (r.get("tool_s") or 0) - (r.get("orchestration_s") or 0)
            if host > 1e-6 and host >= 0.5 * saved:
                cands.append((host, "host", f"a faster host ({r['name']}'s CPU on tools and orchestration)"))
            elif saved > 0:
                cands.append((saved, "chip", f"a faster chip ({r['name']})"))
    if spans is not None:
        par = parallel_tools_s(spans)
        if par > 0:
            cands.append((par, "parallel_tools", "running the tools of one model response side by side (at most)"))
    if startup_s > 0:
        cands.append((startup_s, "startup", f"starting faster (the {fmt_duration(startup_s)} before the first span, "
                                            "at most)"))
    cands = [c for c in cands if c[0] > 0.005 * e2e]
    if not cands:
        return None
    saved, kind, what = max(cands, key=lambda c: c[0])
    new = e2e - saved
    return {"kind": kind, "saved_s": saved, "e2e_s": new, "speedup": e2e / new if new > 0 else None,
            "text": f"{what}: the task in {fmt_duration(new)} instead of {fmt_duration(e2e)} "
                    f"({fmt_x(e2e / new) if new > 0 else '—'})"}
