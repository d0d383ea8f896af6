"""The held-out DeepSeek R1 multi-turn family: its points derive from the logged counters, nothing is fitted on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.errors import TraceFormatError
from agentprof.replay.agentic import HEALTHY_HIT, MAX_CONC, predictions
from agentprof.replay.calibration import load_fitted
from agentprof.replay.multiturn import (
    BLOCK_TOKENS,
    MIN_INTERVALS,
    as_points,
    call_check,
    decode_check,
    load_decode,
    load_requests,
    load_runs,
    pool_tokens,
    ttft_check,
)

CAT = load_catalog()
FITTED = load_fitted()


@pytest.fixture(scope="module")
def runs() -> pl.DataFrame:
    return load_runs()


def test_points_are_the_logged_counters_divided(runs) -> None:
    pts = as_points(runs)
    assert 0 < pts.height <= runs.height and pts["hw"].unique().to_list() == ["b200"]
    row = runs.filter(pl.col("m_prompt_tokens").is_not_null() & (pl.col("requests") > 0)).row(0, named=True)
    got = pts.row(0, named=True)
    assert got["mean_input_tokens"] == pytest.approx(row["m_prompt_tokens"] / row["m_prefills"])
    assert got["server_gpu_cache_hit_rate"] == pytest.approx(1 - row["m_computed_tokens"] / row["m_prompt_tokens"])
    assert got["mean_output_tokens_actual"] == pytest.approx(row["m_generation_tokens"] / row["m_completed"])
    assert got["cycle_s"] == pytest.approx(row["conc"] * row["duration_seconds"] / row["requests"])
    # agent traffic: long, mostly cached prompts
    assert (pts["mean_input_tokens"] > 40_000).all() and (pts["server_gpu_cache_hit_rate"] < 1).all()


def test_ttft_is_checked_on_the_healthy_runs_with_borrowed_terms_only(runs) -> None:
    pts = as_points(runs)
    healthy = pts.filter((pl.col("server_gpu_cache_hit_rate") >= HEALTHY_HIT) & (pl.col("conc") <= MAX_CONC))
    t = ttft_check(runs, FITTED, CAT)
    assert t.height == healthy.height >= 8
    # no fitted group of vLLM DeepSeek R1 exists: the terms are the SGLang group's, attention at the AgentX figure
    assert all("sglang/deepseek-r1" in c for c in t["calibration"])
    assert (t["pred_ttft"] > 0).all() and (t["meas_ttft"] > 0).all()
    assert sorted(t["input_tokens"].to_list()) == pytest.approx(sorted(healthy["mean_input_tokens"].to_list()))


def test_a_longer_measured_cycle_leaves_fewer_users_in_the_server() -> None:
    row = {"hw": "b200", "model": "deepseek-r1", "framework": "vllm", "precision": "fp4", "tp": 4, "ep": 4,
           "conc": 8, "mean_input_tokens": 90_000.0, "mean_output_tokens_actual": 3000.0,
           "server_gpu_cache_hit_rate": 0.93, "mean_ttft": 2.0, "mean_itl": None}
    busy = predictions(pl.DataFrame([{**row, "cycle_s": 30.0}]), FITTED, CAT, 0.14, think_s=0.0)
    idle = predictions(pl.DataFrame([{**row, "cycle_s": 3000.0}]), FITTED, CAT, 0.14, think_s=0.0)
    alone = predictions(pl.DataFrame([{**row, "conc": 1, "cycle_s": 3000.0}]), FITTED, CAT, 0.14, think_s=0.0)
    assert busy["pred_ttft"][0] > idle["pred_ttft"][0] >= alone["pred_ttft"][0]
    assert busy["pred_itl"][0] > idle["pred_itl"][0]
    assert idle["pred_ttft"][0] == pytest.approx(alone["pred_ttft"][0], rel=0.05)


def test_decode_steps_at_the_measured_batch_and_the_context_its_kv_implies(runs) -> None:
    dec = load_decode()
    pools = pool_tokens(runs)
    assert set(pools) == {4, 8} and pools[8] > 1.5 * pools[4]
    d = decode_check(dec, runs, FITTED, CAT)
    assert d.height == dec.filter(pl.col("intervals") >= MIN_INTERVALS).height
    r = d.row(0, named=True)
    src = dec.filter((pl.col("tp") == r["tp"]) & (pl.col("running") == r["running"]) & (pl.col("conc") == r["conc"]))
    expect = (src["kv_usage_pct_median"] / 100 * pools[r["tp"]] / src["running"]).to_numpy()
    assert np.min(np.abs(expect - r["ctx"])) < 1e-6 * r["ctx"]
    # a step with more sequences, at about the same context, takes longer; the model and the measurement agree on that
    one = d.filter((pl.col("tp") == 4) & (pl.col("running") == 1))
    eight = d.filter((pl.col("tp") == 4) & (pl.col("running") == 8))
    assert eight["pred_itl"].min() > one["pred_itl"].max() and eight["meas_itl"].min() > one["meas_itl"].max()
    assert np.all(np.isfinite(d["pred_itl"].to_numpy()))


def test_a_runs_file_without_the_counters_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "runs.csv"
    bad.write_text("hardware,model\nb200,deepseek-r1\n")
    with pytest.raises(TraceFormatError, match="m_prompt_tokens"):
        load_runs(bad)


def test_measured_and_modelled_steps_are_flat_between_captured_graph_sizes(runs) -> None:
    # vLLM pads a decode batch to its next captured CUDA-graph size (8, 16, ...): 9 sequences cost what 16 do
    d = decode_check(load_decode(), runs, FITTED, CAT).filter(pl.col("tp") == 4)

    def med(lo: int, hi: int, col: str) -> float:
        return float(d.filter(pl.col("running").is_between(lo, hi))[col].median())

    # measured: 9-12 sequences cost what 13-16 do; modelled: a jump past 8 (the padded experts and GEMMs), then the
    # slope of the real sequences' KV alone
    assert med(9, 12, "meas_itl") > 1.3 * med(8, 8, "meas_itl")
    assert med(9, 12, "meas_itl") == pytest.approx(med(13, 16, "meas_itl"), rel=0.1)
    assert med(9, 12, "pred_itl") > 1.15 * med(8, 8, "pred_itl")


def test_the_request_records_are_the_runs_they_came_from(runs) -> None:
    # each one-user run's requests average to the mean TTFT its benchmark log printed, over the same count
    req, matched = load_requests(), 0
    for folder, g in req.group_by("run_folder"):
        row = runs.filter(pl.col("run_folder") == folder[0])
        if row.height and row["requests"][0] is not None:
            assert g.height == row["requests"][0]
            assert g["ttft"].mean() == pytest.approx(row["mean_ttft"][0], abs=0.006)
            matched += 1
    assert matched == 3  # the fourth run's benchmark log is missing (its row says so)
    # a prompt's blocks are its hit and missed blocks: kv-cache-tester hashes 64-token blocks
    blocks = (req["cache_hit_blocks"] + req["cache_miss_blocks"]).to_numpy()
    assert (np.abs(blocks * BLOCK_TOKENS - req["input_tokens"].to_numpy()) < BLOCK_TOKENS).all()


def test_each_call_is_priced_alone_from_its_own_tokens(runs) -> None:
    req = load_requests()
    t = call_check(req, runs, FITTED, CAT)
    assert t.height == req.height and t["first"].sum() == req["run_folder"].n_unique()
    # the frontend tokenizes the whole prompt, cached prefix included, inside each call's predicted TTFT
    tok = (t["pred_frontend"] / t["input_tokens"]).to_numpy()
    assert tok[0] > 0 and np.allclose(tok, tok[0])
    assert (t["pred_ttft"] > t["pred_frontend"]).all()
    # more new tokens at about the same prompt cost more; the same call on 8 GPUs costs less than on 4
    one = t.filter(pl.col("user_id") == "User-001")
    for tp in (4, 8):
        g = one.filter((pl.col("tp") == tp) & (pl.col("offload") == "none"))
        warm, cold = g.filter(pl.col("request_idx") == 120).row(0, named=True), g.filter(
            pl.col("request_idx") == 119).row(0, named=True)
        assert abs(warm["input_tokens"] - cold["input_tokens"]) < 1000 and cold["new"] > 10 * warm["new"]
        assert cold["pred_ttft"] > warm["pred_ttft"]
    both = one.filter(pl.col("offload") == "none").pivot("tp", index="request_idx", values="pred_ttft")
    assert (both["8"] < both["4"]).all()
