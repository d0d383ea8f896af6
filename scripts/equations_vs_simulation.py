"""Two methods, one metric, at a prompt length nothing was fitted on: every 1k1k calibration configuration at
``--isl`` tokens (default 8,192; the points are never measured there), its median TTFT from the serving
equations and from the simulated benchmark (docs/DEVICE_MODEL.md §10.1). Prints equations / simulation by
serving kind and concurrency band. About half an hour on 2 cores.

    python scripts/equations_vs_simulation.py [--isl 8192]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
POINTS = ROOT / "data/inferencex/calibration_points.csv"


def main() -> int:
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import is_disaggregated, load_fitted
    from agentprof.replay.fidelity import check
    from agentprof.replay.points import load_points
    from agentprof.replay.serving.benchpoint import simulate_check

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isl", type=int, default=8192)
    args = ap.parse_args()
    pts = load_points(POINTS)
    grid = pts.filter((pl.col("isl") == 1024) & (pl.col("osl") == 1024)).with_columns(pl.lit(args.isl).alias("isl"))
    fitted, cat = load_fitted(), load_catalog()
    eq = check(grid, fitted, cat).table
    sim = simulate_check(grid, fitted, cat).table
    t = eq.select("framework", "conc", "covered", pl.col("pred_ttft").alias("eq")).with_columns(
        sim=sim["pred_ttft"], simulated=sim["simulated"]).filter(pl.col("covered") & pl.col("simulated"))
    t = t.with_columns(
        serving=pl.col("framework").map_elements(lambda f: "disaggregated" if is_disaggregated(f) else "aggregated",
                                                 return_dtype=pl.String),
        band=pl.when(pl.col("conc") <= 64).then(pl.lit("1-64")).when(pl.col("conc") <= 512)
        .then(pl.lit("128-512")).otherwise(pl.lit(">=1024")),
        ratio=pl.col("eq") / pl.col("sim"))
    print(f"median TTFT at {args.isl:,}-token prompts, equations / simulation (median, p10-p90; points)\n")
    print("| slice | points | median | p10-p90 |\n|---|---|---|---|")
    for name, part in [("all", t)] + [
            (f"{s}, concurrency {b}", t.filter((pl.col("serving") == s) & (pl.col("band") == b)))
            for s in ("aggregated", "disaggregated") for b in ("1-64", "128-512", ">=1024")]:
        if part.height:
            r = part["ratio"]
            print(f"| {name} | {part.height} | {r.median():.2f} | {r.quantile(0.1):.2f}-{r.quantile(0.9):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
