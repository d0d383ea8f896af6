"""A stored ``agentprof diff`` baseline: one side's figures in a compact JSON file, so CI can compare a pull
request's runs against the main branch's without keeping their traces.

It holds what :func:`agentprof.analysis.diff.compare` needs of BASE and nothing else: the run ids, one value
per run for every per-run figure, every per-call sample with the index of its run, and how many cache misses
each top-ranked cause explained. Names of tools, models and wait reasons are kept; no prompt or response text,
no tool arguments. Numbers are kept to 6 significant digits.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from agentprof.analysis.run_figures import SideFigures
from agentprof.errors import AgentprofError

MARK = "agentprof_baseline"
VERSION = 1


def _num(v: float) -> float | None:
    return float(f"{v:.6g}") if math.isfinite(v) else None


def to_dict(f: SideFigures) -> dict[str, Any]:
    """The baseline document of one side (``MARK`` first, so a reader can tell the file by its start)."""
    from agentprof import __version__

    return {
        MARK: VERSION, "agentprof": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "side": {k: v for k, v in f.info.items() if k != "label"}, "runs": f.runs,
        "untimed_runs": f.untimed_runs, "causes": f.causes,
        "per_run": [{"metric": m, "scope": s, "values": [_num(x) for x in v.tolist()]}
                    for (m, s), v in f.per_run.items()],
        "samples": [{"metric": m, "scope": s, "unit": f.sample_unit.get((m, s), "calls"),
                     "values": [_num(x) for x in v.tolist()], "runs": f.sample_runs[(m, s)].tolist()}
                    for (m, s), v in f.samples.items()],
    }


def save(f: SideFigures, path: str | os.PathLike[str]) -> Path:
    """Write one side's baseline to ``path`` (parent folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(to_dict(f), separators=(",", ":")) + "\n", encoding="utf-8")
    return out


def is_baseline(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file that starts like a stored baseline."""
    p = Path(path)
    if not p.is_file():
        return False
    with p.open("rb") as fh:
        return f'"{MARK}"'.encode() in fh.read(64)


def _floats(values: Any, where: str) -> np.ndarray:
    if not isinstance(values, list):
        raise ValueError(f"{where}: expected a list of numbers")
    try:
        return np.array([np.nan if x is None else float(x) for x in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected numbers or null") from None


def load(path: str | os.PathLike[str], label: str | None = None) -> SideFigures:
    """Read a baseline written by :func:`save`; a clear :class:`AgentprofError` (file, entry, what was expected)
    when it is not one."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise AgentprofError(f"{p}: cannot read the baseline: {e}") from None
    except json.JSONDecodeError as e:
        raise AgentprofError(f"{p}: line {e.lineno}: not JSON ({e.msg}); expected a baseline written by "
                             "`agentprof diff --save-baseline`") from None
    if not isinstance(doc, dict) or doc.get(MARK) != VERSION:
        raise AgentprofError(f"{p}: not an agentprof baseline of version {VERSION} (expected {{\"{MARK}\": "
                             f"{VERSION}, ...}} as written by `agentprof diff --save-baseline`)")
    try:
        runs = [str(r) for r in doc["runs"]]
        if not runs:
            raise ValueError("runs: the baseline has no runs")
        per_run, samples, sample_runs, unit = {}, {}, {}, {}
        for i, e in enumerate(doc["per_run"]):
            key = (str(e["metric"]), str(e["scope"]))
            per_run[key] = _floats(e["values"], f"per_run[{i}].values")
            if per_run[key].size != len(runs):
                raise ValueError(f"per_run[{i}]: {per_run[key].size} values for {len(runs)} runs")
        for i, e in enumerate(doc["samples"]):
            key = (str(e["metric"]), str(e["scope"]))
            samples[key] = _floats(e["values"], f"samples[{i}].values")
            r = np.asarray(e["runs"], dtype=np.int64)
            if r.size != samples[key].size or (r.size and (r.min() < 0 or r.max() >= len(runs))):
                raise ValueError(f"samples[{i}].runs: expected one run index (0 to {len(runs) - 1}) per value")
            sample_runs[key], unit[key] = r, str(e.get("unit", "calls"))
        causes = {str(k): int(v) for k, v in (doc.get("causes") or {}).items()}
        info = dict(doc.get("side") or {})
    except (KeyError, TypeError, ValueError) as e:
        what = f"missing entry {e}" if isinstance(e, KeyError) else str(e)
        raise AgentprofError(f"{p}: malformed baseline: {what}") from None
    info.update(label=label or p.name, runs=len(runs), baseline=str(p.name), created=doc.get("created"))
    return SideFigures(runs, per_run, samples, unit, None, [str(r) for r in doc.get("untimed_runs") or []],
                       sample_runs, info, causes)
