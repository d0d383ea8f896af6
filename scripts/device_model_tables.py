"""Print the fidelity tables of docs/DEVICE_MODEL.md §4 as markdown, computed from the calibration points.

ISL/OSL cross-validation (fit 1k1k, check 1k8k and back), leave-one-layout-out and leave-one-group-out with
the lookup baseline measured on the same points, sliced by hardware, framework, serving (aggregated or
disaggregated), concurrency band and calibration level. About two minutes on one core.

    python scripts/device_model_tables.py [POINTS.csv]
"""

from __future__ import annotations

import sys
from typing import Any

from agentprof.replay.fidelity import cross_validate, leave_out
from agentprof.replay.points import load_points


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def line(name: str, s: dict[str, Any]) -> str:
    cells = [f"{pct(s[m]['median_ape'])} / {pct(s[m]['p90_ape'])}" for m in ("ttft", "tpot", "e2e")]
    return f"| {name} | {s['points']} | " + " | ".join(cells) + " |"


def table(title: str, s: dict[str, Any]) -> None:
    print(f"\n**{title}** (median / p90 APE; worst miss {s.get('max_miss_factor') or 0:.1f}x)\n")
    print("| slice | points | TTFT | TPOT | E2E |\n|---|---|---|---|---|")
    print(line("all", s))
    for by in ("hardware", "framework", "serving", "conc_band", "level"):
        for k, v in s.get(f"by_{by}", {}).items():
            print(line(f"{by.replace('_', ' ')}: {k}", v))


def main(path: str = "data/inferencex/calibration_points.csv") -> None:
    df = load_points(path)
    cv = cross_validate(df)
    table("ISL/OSL cross-validation (fit on one setting, check on the other; pooled)", cv["pooled"])
    for fold in cv["folds"]:
        print(f"\nfold fit on {fold['fit_on']}: " + line("", fold))
    for unit in ("layout", "group"):
        r = leave_out(df, unit)
        table(f"leave one {unit} out", r["model"])
        print(f"\nlookup baseline on the same {r['baseline']['points']} points ({r['baseline']['method']}):")
        print("| | points | TTFT | TPOT | E2E |\n|---|---|---|---|---|")
        print(line("model", r["model_on_baseline_points"]))
        print(line("lookup baseline", r["baseline"]))


if __name__ == "__main__":
    main(*sys.argv[1:])
