"""Build ``data/inferencex/calibration_points.csv``: the run-artifact points (the 33 runs of Dec 2025 – Jan 2026)
and the official API's 1,024-token-prompt points (1k1k, 1k8k) of every other run, so the fit sees each engine
version the API measured at short prompts. The API's 8k1k points stay out: they are the held-out prompt-length
family (``scripts/error_by_slice.py`` family 7). Rows of the API whose disaggregated pools have 0 workers (the
API records none for some Dec 2025 runs) cannot be sized and are left out, counted. Idempotent: the API rows
already in the file are rebuilt from ``official_api_points.csv``.

    python scripts/merge_api_points.py
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from agentprof.replay.points import from_run_artifacts, load_points, unsized_pools

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = ROOT / "data/inferencex/calibration_points.csv"
API = ROOT / "data/inferencex/official_api_points.csv"
FROM_API = "official InferenceX API point (InferenceX-app a369c398 benchmarks.json; official_api_points.csv)"


def merged() -> tuple[pl.DataFrame, dict[str, int]]:
    """The calibration table and counts: artifact rows, API rows added, API rows of artifact runs, unsized."""
    cal = pl.read_csv(CALIBRATION, infer_schema_length=0)
    cal = from_run_artifacts(cal)
    # the API's rows as text (written back as they are), and as the fit reads them (which pools can be sized)
    api = pl.read_csv(API, infer_schema_length=0).with_columns(
        unsized=pl.Series([unsized_pools(r) for r in load_points(API).iter_rows(named=True)]))
    api = api.filter(pl.col("isl") == "1024")
    runs = set(cal["run_id"].to_list())
    same_run = api.filter(pl.col("run_id").is_in(list(runs)))
    api = api.filter(~pl.col("run_id").is_in(list(runs)))
    unsized = api.filter(pl.col("unsized"))
    api = api.filter(~pl.col("unsized")).with_columns(
        source_file=pl.concat_str([pl.lit("InferenceX run "), pl.col("run_id"), pl.lit(f" via {API.name}")]),
        provenance=pl.lit(FROM_API), benchmark_type=pl.lit("fixed_seq_len"), quality_flag=pl.lit("ok"),
        hw_raw=pl.col("hardware"))
    out = pl.concat([cal, api], how="diagonal").select(cal.columns)  # the API's attempt, date, image: in its file
    counts = {"artifact": cal.height, "api": api.height, "api_of_artifact_runs": same_run.height,
              "unsized": unsized.height}
    return out, counts


def main() -> None:
    out, n = merged()
    out.write_csv(CALIBRATION)
    print(f"{CALIBRATION.relative_to(ROOT)}: {out.height} points: {n['artifact']} from run artifacts, {n['api']} "
          f"from the API's 1K-prompt points of other runs ({n['api_of_artifact_runs']} API points of the artifact "
          f"runs already there; {n['unsized']} left out: a disaggregated point with 0 prefill or decode workers)")


if __name__ == "__main__":
    main()
