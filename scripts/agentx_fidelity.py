"""Print the AgentX Kimi K2.5 rows of docs/DEVICE_MODEL.md §10.1: the measured points through the serving
simulation (``agentprof devices check data/inferencex/agentic_kimi_points.csv --simulate``), median APE of mean TTFT
and mean ITL over the complete runs (the 4 that stopped serving before their 1,800-s window are left out for every
revision alike), the healthy ones (hit >= 0.9), the healthy ones at concurrency <= 8 (the 20 the attention efficiency
and the think time are fitted on), the rest (out of sample), per accelerator, on the cliff (hit < 0.5) with and
without LMCache; and the per-point ratios with ``--points``.

With ``--baseline REV`` (repeatable) the same figures for git revisions are computed in the same run (a temporary
worktree of each REV, its own code and fitted.toml), so a change's before and after come from one invocation.
About 15 s a revision.

With ``--eta-per-accelerator`` one more row for this checkout: the attention efficiency searched on each accelerator's
own healthy conc <= 8 points (``agentic.fit_attn_eff``) with this checkout's fitted terms — what ``devices fit`` now
ships in ``[global.attn_eff_by_accelerator]``, so the row reproduces the shipped one. ``--eta X`` adds a row with η
fixed at X on every accelerator (a sensitivity, not a fit). ``--jitter`` adds, for this checkout and each
``--baseline``, the median TTFT / ITL of the complete runs with every η scaled by 1 + k/1000, k = −5…5: the simulated
closed loops are chaotic in their parameters (a step 0.1 % longer reorders arrivals), so the median moves by a few
tenths of a point from nothing physical; a change to it smaller than that band is not resolved (docs/DEVICE_MODEL.md
§4, `lolo5`). About 11 × 8 s a revision.

    python scripts/agentx_fidelity.py [--baseline REV ...] [--eta-per-accelerator] [--eta X] [--jitter] [--points]
                                      [AGENTIC.csv]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENTIC = "data/inferencex/agentic_kimi_points.csv"

_CHILD = r"""
import json, sys
import polars as pl
from agentprof.catalog.hardware import load_catalog
from agentprof.replay.agentic import load_agentic
from agentprof.replay.calibration import load_fitted
from agentprof.replay.serving.benchpoint import simulate_agentic
f = load_fitted()
r = simulate_agentic(load_agentic(sys.argv[1]), f, load_catalog())
by = getattr(f, "attn_eff_by_accelerator", None)  # revisions before eta per accelerator have one global value
kinds = {f"{kind} {k}": v for kind, t in getattr(f, "attn_eff_by_attention", {}).items() for k, v in t.items()}
print(json.dumps({"attn_eff": {"pooled": f.attn_eff, **by, **kinds} if by else f.attn_eff, "table": r["table"]}))
"""

_CHILD_ETA = r"""
import dataclasses, json, sys
import polars as pl
from agentprof.catalog.hardware import load_catalog
from agentprof.replay.agentic import fit_attn_eff, load_agentic
from agentprof.replay.calibration import load_fitted
from agentprof.replay.serving.benchpoint import simulate_agentic, workload_reuse, workload_think_s
df, fitted, cat = load_agentic(sys.argv[1]), load_fitted(), load_catalog()
fixed = float(sys.argv[2])
think, reuse = workload_think_s(df), workload_reuse(df)
table, etas = [], {}
groups = [("all", df)] if fixed > 0 else [(str(k[0]), g) for k, g in df.group_by(pl.col("hw").str.split("-").list.first())]
for hw, sub in sorted(groups):
    eta = fixed if fixed > 0 else fit_attn_eff(sub, fitted, cat)[0]
    etas[hw] = eta
    kinds = {"attn_eff_by_attention": {}} if hasattr(fitted, "attn_eff_by_attention") else {}  # older revisions
    table += simulate_agentic(sub, dataclasses.replace(fitted, attn_eff=eta, attn_eff_by_accelerator={}, **kinds), cat,
                              think_s=think, reuse=reuse)["table"]
print(json.dumps({"attn_eff": etas, "table": table}))
"""

_CHILD_JITTER = r"""
import dataclasses, json, sys
from agentprof.catalog.hardware import load_catalog
from agentprof.replay.agentic import load_agentic
from agentprof.replay.calibration import load_fitted
from agentprof.replay.serving.benchpoint import simulate_agentic
df, f, cat = load_agentic(sys.argv[1]), load_fitted(), load_catalog()
by = getattr(f, "attn_eff_by_accelerator", None) or {}
out = []
for k in range(-5, 6):
    s = 1.0 + k / 1000.0
    g = dataclasses.replace(f, attn_eff=f.attn_eff * s, **({"attn_eff_by_accelerator": {a: v * s for a, v in by.items()}}
                                                           if hasattr(f, "attn_eff_by_accelerator") else {}))
    out.append(simulate_agentic(df, g, cat)["table"])
print(json.dumps({"tables": out}))
"""


def run(tree: Path, agentic: str, eta: float | None = None, jitter: bool = False) -> dict[str, Any]:
    """The simulated AgentX table of the code in ``tree`` (a subprocess, so each revision imports its own code);
    with ``eta`` this checkout's table with η per accelerator (0) or fixed (> 0); with ``jitter`` the 11 tables
    with η scaled by 1 + k/1000 (``tables``)."""
    code, args = (_CHILD, []) if eta is None else (_CHILD_ETA, [str(eta)])
    if jitter:
        code, args = _CHILD_JITTER, []
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / agentic), *args], cwd=tree, capture_output=True,
                         text=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def truncated_keys(agentic: str) -> set[tuple]:
    """(tp, conc, offloading, mean TTFT) of the runs that stopped serving before their 1,800-s window ended (the rule of
    ``benchpoint.COMPLETE_SHARE``, applied here so that revisions without it are compared on the same points)."""
    import csv

    with open(ROOT / agentic, newline="") as f:
        return {(int(r["tp"]), int(r["conc"]), r["offloading"], round(float(r["mean_ttft"]), 6))
                for r in csv.DictReader(f)
                if r["mean_ttft"] and float(r["duration_seconds"] or 0) < 0.9 * 1800.0}


def _key(r: dict[str, Any]) -> tuple:
    return (int(r["tp"]), int(r["conc"]), str(r.get("offloading")), round(float(r["meas_ttft"]), 6))


def slices(table: list[dict[str, Any]], cut: set[tuple] = frozenset()) -> dict[str, tuple[float | None, float | None, int]]:
    import numpy as np

    def med(rows: list[dict[str, Any]]) -> tuple[float | None, float | None, int]:
        if not rows:
            return None, None, 0
        t = [abs(r["pred_ttft"] - r["meas_ttft"]) / r["meas_ttft"] for r in rows]
        i = [abs(r["pred_itl"] - r["meas_itl"]) / r["meas_itl"] for r in rows]
        return float(np.median(t)), float(np.median(i)), len(rows)

    table = [r for r in table if _key(r) not in cut]
    healthy = [r for r in table if r["hit_rate"] >= 0.9]
    cliff = [r for r in table if r["hit_rate"] < 0.5]
    return {
        "all complete runs": med(table), "healthy (hit ≥ 0.9)": med(healthy),
        "healthy, conc ≤ 8 (η's points)": med([r for r in healthy if r["conc"] <= 8]),
        "out of sample (the rest)": med([r for r in table if not (r["hit_rate"] >= 0.9 and r["conc"] <= 8)]),
        "B200": med([r for r in table if r["hardware"] == "b200"]),
        "MI355X": med([r for r in table if r["hardware"] == "mi355x"]),
        "cliff (hit < 0.5), LMCache": med([r for r in cliff if r.get("offloading") == "lmcache"]),
        "cliff (hit < 0.5), no offload": med([r for r in cliff if r.get("offloading") != "lmcache"]),
    }


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def main(argv: list[str]) -> None:
    points = "--points" in argv
    baselines = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--baseline"]
    etas = [float(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--eta"]
    rest = [a for i, a in enumerate(argv)
            if not a.startswith("--") and (i == 0 or argv[i - 1] not in ("--baseline", "--eta"))]
    agentic = rest[0] if rest else AGENTIC
    results = {}
    jitter = "--jitter" in argv
    bands: dict[str, dict[str, Any]] = {}
    for rev in baselines:
        with tempfile.TemporaryDirectory() as d:
            wt = Path(d) / "base"
            subprocess.run(["git", "worktree", "add", "--detach", str(wt), rev], cwd=ROOT, check=True,
                           capture_output=True)
            try:
                results[f"at {rev}"] = run(wt, agentic)
                if jitter:
                    bands[f"at {rev}"] = run(wt, agentic, jitter=True)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=ROOT, capture_output=True)
    results["after (this checkout)"] = run(ROOT, agentic)
    if jitter:
        bands["after (this checkout)"] = run(ROOT, agentic, jitter=True)
    if "--eta-per-accelerator" in argv:
        results["η per accelerator (experiment)"] = run(ROOT, agentic, 0.0)
    for x in etas:
        results[f"η fixed at {x} (sensitivity)"] = run(ROOT, agentic, x)
    cut = truncated_keys(agentic)
    names = list(slices(next(iter(results.values()))["table"], cut))
    print("| | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for label, res in results.items():
        s = slices(res["table"], cut)
        cells = [f"{pct(s[n][0])} / {pct(s[n][1])} ({s[n][2]})" for n in names]
        eta = res["attn_eff"]
        eta = ", ".join(f"{k} {v:.3f}" for k, v in eta.items()) if isinstance(eta, dict) else f"{eta:.3f}"
        print(f"| {label}, η {eta} | " + " | ".join(cells) + " |")
    if bands:
        import numpy as np

        print("\n| η × (1 + k/1000), k = −5…5 | TTFT median APE: mean ± sd (min–max) | runs ≤ 20 % | ITL: mean (max) |")
        print("|---|---|---|---|")
        for label, res in bands.items():
            med = np.array([slices(t, cut)["all complete runs"][:2] for t in res["tables"]], dtype=float)
            tt, it = 100 * med[:, 0], 100 * med[:, 1]
            print(f"| {label} | {tt.mean():.2f} ± {tt.std(ddof=1):.2f} % ({tt.min():.1f}–{tt.max():.1f} %) | "
                  f"{int((tt <= 20.0).sum())} of {tt.size} | {it.mean():.2f} % ({it.max():.1f} %) |")
    if points:
        print("\n| hw | tp | conc | offload | hit | sim HBM / CPU hit | TTFT meas → pred | ITL meas → pred |")
        print("|---|---|---|---|---|---|---|---|")
        for r in sorted(results["after (this checkout)"]["table"],
                        key=lambda r: (r["hardware"], r["tp"], str(r.get("offloading")), r["conc"], r["hit_rate"])):
            sim = "—" if r.get("sim_hit") is None else f"{r['sim_hit']:.2f} / {r.get('sim_cpu_hit') or 0:.2f}"
            off = str(r.get("offloading")) + (" (truncated, left out)" if _key(r) in cut else "")
            print(f"| {r['hardware']} | {r['tp']} | {r['conc']} | {off} | {r['hit_rate']:.3f} | {sim} | "
                  f"{r['meas_ttft']:.3g} → {r['pred_ttft']:.3g} s ({r['pred_ttft'] / r['meas_ttft']:.2f}×) | "
                  f"{1e3 * r['meas_itl']:.1f} → {1e3 * r['pred_itl']:.1f} ms ({r['pred_itl'] / r['meas_itl']:.2f}×) |")


if __name__ == "__main__":
    main(sys.argv[1:])
