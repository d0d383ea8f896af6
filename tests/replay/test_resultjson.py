"""InferenceX results as JSON: the API's points and a run's agg_bmk.json read as the CSV reads them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.errors import TraceFormatError
from agentprof.replay.calibration import load_fitted
from agentprof.replay.fidelity import check
from agentprof.replay.points import load_points

from .conftest import ROOT

OFFICIAL = ROOT / "data" / "inferencex" / "official_api_points.csv"


def _api_object(r: dict) -> dict:
    """One official point in the InferenceX API's shape: both pools' keys, the metrics nested, the run's URL."""
    dis = r["disagg"]
    pool = {f"{side}_{k}": r[f"{side}_{k}"] if dis else r[k] for side in ("prefill", "decode")
            for k in ("tp", "ep", "dp_attention")}
    return {"hardware": r["hardware"], "model": r["model_prefix"], "precision": r["precision"],
            "framework": "mori-sglang" if r["framework"] == "sglang-disagg" else r["framework"],
            "spec_method": r["spec_decoding"], "disagg": dis, "is_multinode": r["is_multinode"], **pool,
            "prefill_num_workers": r["prefill_num_workers"] if dis else 0,
            "decode_num_workers": r["decode_num_workers"] if dis else 0,
            "num_prefill_gpu": r["num_prefill_gpu"] if dis else r["num_gpus"],
            "num_decode_gpu": r["num_decode_gpu"] if dis else r["num_gpus"],
            "isl": r["isl"], "osl": r["osl"], "conc": r["conc"], "image": r["image"], "date": r["date"],
            "metrics": {"median_ttft": r["median_ttft_s"], "median_tpot": r["median_tpot_s"],
                        "median_e2el": r["median_e2el_s"], "tput_per_gpu": r["tput_per_gpu_tok_s"]},
            "run_url": f"https://github.com/SemiAnalysisAI/InferenceX/actions/runs/{r['run_id']}/attempts/1"}


@pytest.fixture(scope="module")
def official() -> pl.DataFrame:
    d = load_points(OFFICIAL).filter(pl.col("isl") == 8192)
    return pl.concat([d.filter(~pl.col("disagg")).head(12), d.filter(pl.col("disagg")).head(12)])


def test_the_apis_points_price_as_their_csv_does(official: pl.DataFrame, tmp_path: Path) -> None:
    # the same official points, once as the API serves them and once as the shipped CSV holds them: the same
    # configuration (MoRI's SGLang named as the catalog names it, each pool's data-parallel flag kept) and the
    # same measurements, so the same predictions
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps([_api_object(r) for r in official.iter_rows(named=True)]))
    got = load_points(path)
    assert got.height == official.height
    assert got["framework"].to_list() == official["framework"].to_list()
    assert got["run_id"].to_list() == official["run_id"].to_list()
    for c in ("decode_dp_attention", "prefill_dp_attention"):
        assert got[c].to_list() == official[c].to_list()
    np.testing.assert_array_equal(got["median_ttft_s"].to_numpy(), official["median_ttft_s"].to_numpy())
    cat, fit = load_catalog(), load_fitted()
    a, b = check(got, fit, cat).table, check(official, fit, cat).table
    assert a["covered"].all()
    for m in ("pred_ttft", "pred_tpot", "pred_e2e"):
        np.testing.assert_allclose(a[m].to_numpy(), b[m].to_numpy(), rtol=1e-12)


def test_a_runs_agg_bmk_json_is_read_too(tmp_path: Path) -> None:
    # a run artifact's flat shape: the runner's name, tp/ep/dp_attention as strings, metrics at the top level in
    # seconds, speculation as an "mtp" key
    rows = [{"hw": "b200-trt_3", "framework": "sglang", "model": "dsr1", "precision": "fp4", "tp": 8, "ep": 8,
             "dp_attention": "false", "mtp": "on", "isl": 8192, "osl": 1024, "conc": "16",
             "median_ttft": 0.43, "median_tpot": 0.0131, "median_e2el": 12.5}]
    path = tmp_path / "agg_bmk.json"
    path.write_text(json.dumps(rows))
    got = load_points(path).row(0, named=True)
    assert (got["hardware"], got["hw_raw"], got["spec_decoding"], got["conc"]) == ("b200", "b200-trt_3", "mtp", 16)
    assert got["dp_attention"] is False and got["num_gpus"] == 8 and got["median_tpot_s"] == 0.0131
    assert check(load_points(path), load_fitted(), load_catalog()).table["covered"][0]


@pytest.mark.parametrize(("text", "message"), [
    ('{"isl": 8192}', r"expected a JSON array of InferenceX result objects"),
    ('[{"hardware": "b200",', r"bad\.json:1: not valid JSON"),
    ('[{"hw": "b200", "precision": "fp4", "model": "dsr1", "tp": 8, "isl": 8192, "osl": 1024, "conc": 4},'
     ' {"hw": "b200", "precision": "fp4", "model": "dsr1", "tp": "eight", "isl": 8192, "osl": 1024, "conc": 4}]',
     r"entry 2: 'tp': expected a number, got 'eight'"),
    ('[{"hw": "b200", "precision": "fp4", "model": "dsr1", "tp": 8, "isl": 8192, "osl": 1024, "conc": 0}]',
     r"entry 1: 'conc': expected a positive number, got 0"),
])
def test_bad_results_json_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=message):
        load_points(path)
