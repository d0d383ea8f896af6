"""Print the fidelity tables of docs/DEVICE_MODEL.md §10.1 as markdown: InferenceX points and AgentX points
through the serving simulation, computed from the shipped data.

ISL/OSL cross-validation through the simulation (fit on one setting, simulate the other; pooled, aggregated and
disaggregated points apart, the concurrency >= 64 slice and its aggregated and disaggregated parts, per fold),
the analytic cross-validation on the same folds for comparison, and the AgentX Kimi K2.5 points with measured
hits put in and with the cache deciding. About twenty minutes on one core (the disaggregated points run
whole, up to 15,000 clients).

    python scripts/serving_fidelity.py [POINTS.csv [AGENTIC.csv]]
    SERVING_FIDELITY_TABLE=/tmp/sim.parquet python scripts/serving_fidelity.py   # also the per-point table
"""

from __future__ import annotations

import os
import sys
from typing import Any

import polars as pl

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.agentic import load_agentic
from agentprof.replay.calibration import fit, load_fitted
from agentprof.replay.fidelity import METRICS, check, summarize
from agentprof.replay.points import load_points
from agentprof.replay.serving.benchpoint import simulate_agentic, simulate_check


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def line(name: str, s: dict[str, Any]) -> str:
    cells = [f"{pct(s[m]['median_ape'])} / {pct(s[m]['p90_ape'])}" for m in METRICS]
    return f"| {name} | {s['covered']} | " + " | ".join(cells) + " |"


def main(points: str = "data/inferencex/calibration_points.csv",
         agentic: str = "data/inferencex/agentic_kimi_points.csv") -> None:
    cat = load_catalog()
    df = load_points(points)
    attn_eff = load_fitted().attn_eff
    sims, anas = [], []
    for s in df.select("isl", "osl").unique().sort("isl", "osl").rows():
        same = (pl.col("isl") == s[0]) & (pl.col("osl") == s[1])
        train, test = df.filter(same), df.filter(~same)
        fitted = fit(train, cat, attn_eff)
        tag = pl.lit(f"{s[0]}/{s[1]}").alias("fit_on")
        sims.append(simulate_check(test, fitted, cat).table.with_columns(tag))
        anas.append(check(test, fitted, cat).table.with_columns(tag))
    sim, ana = pl.concat(sims), pl.concat(anas)
    hi = pl.col("conc") >= 64
    dis = pl.col("layout").str.starts_with("p")
    print("**Through the simulation** (median / p90 APE, cross-validated)\n")
    print("| slice | points | TTFT | TPOT | E2E |\n|---|---|---|---|---|")
    print(line("pooled", summarize(sim)))
    print(line("aggregated points", summarize(sim.filter(~dis))))
    print(line("disaggregated points (on their pools)", summarize(sim.filter(dis))))
    print(line("concurrency ≥ 64, all", summarize(sim.filter(hi))))
    print(line("concurrency ≥ 64, aggregated", summarize(sim.filter(hi & ~dis))))
    print(line("concurrency ≥ 64, disaggregated", summarize(sim.filter(hi & dis))))
    left = sim.filter(pl.col("covered") & ~pl.col("simulated")).height
    print(f"\n({left} covered point(s) not simulated, keeping the analytic prediction)")
    for f in sim["fit_on"].unique().sort():
        print(line(f"fold: fit on {f}", summarize(sim.filter(pl.col("fit_on") == f))))
    print("\n**Analytic, same folds**\n")
    print("| slice | points | TTFT | TPOT | E2E |\n|---|---|---|---|---|")
    print(line("pooled", summarize(ana)))
    print(line("aggregated points only", summarize(ana.filter(~dis))))
    print(line("disaggregated points", summarize(ana.filter(dis))))
    print(line("concurrency ≥ 64, all", summarize(ana.filter(hi))))
    print(line("concurrency ≥ 64, disaggregated", summarize(ana.filter(hi & dis))))
    if os.environ.get("SERVING_FIDELITY_TABLE"):  # the per-point simulated table, for looking at the misses
        sim.join(ana.select("row", "fit_on", *(pl.col(f"pred_{m}").alias(f"ana_{m}") for m in METRICS)),
                 on=["row", "fit_on"], how="left").write_parquet(os.environ["SERVING_FIDELITY_TABLE"])
    adf = load_agentic(agentic)
    print("\n**AgentX Kimi K2.5** (median APE of mean TTFT / mean ITL; complete runs, closed-loop users)\n")
    print("| prefixes | all | healthy (hit ≥ 0.9) | healthy, conc ≤ 8 | B200 | MI355X |\n|---|---|---|---|---|---|")
    for mode in ("measured", "private"):
        r = simulate_agentic(adf, load_fitted(), cat, prefixes=mode)

        def cell(s: dict[str, Any]) -> str:
            return f"{pct(s['median_ape_ttft'])} / {pct(s['median_ape_itl'])} ({s['points']})"

        hw = r["by_hardware"]
        print(f"| {mode} | {cell(r)} | {cell(r['healthy'])} | {cell(r['healthy_conc_le_8'])} | "
              f"{cell(hw.get('b200', {'points': 0, 'median_ape_ttft': None, 'median_ape_itl': None}))} | "
              f"{cell(hw.get('mi355x', {'points': 0, 'median_ape_ttft': None, 'median_ape_itl': None}))} |")
        if mode == "private":
            t = pl.DataFrame(r["table"]).filter(~pl.col("truncated"))  # the complete runs, as the medians
            agree = t.filter((pl.col("sim_hit") >= 0.5) == (pl.col("hit_rate") >= 0.5)).height
            print(f"\nprivate prefixes (workload reuse {r['workload_reuse']:.3f}): the simulated hit rate is on the "
                  f"measured side of 0.5 at {agree} of {t.height} points")


if __name__ == "__main__":
    main(*sys.argv[1:])
