"""The AgentX Kimi K2.5 deployments as their runs logged them: FP8 KV and the frontend's tokenization time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.kvcache import kv_bytes, tokenize_s_per_token
from agentprof.errors import TraceFormatError
from agentprof.replay.agentic import accelerator_of, deployed_points, frontend_time, load_agentic
from agentprof.replay.calibration import load_fitted
from agentprof.replay.costmodel import Deployment, StepParams, call_times
from agentprof.replay.serving.benchpoint import simulate_point
from agentprof.replay.serving.stepcost import StepCost

ROOT = Path(__file__).resolve().parents[2]
AGENTIC = ROOT / "data" / "inferencex" / "agentic_kimi_points.csv"
REQUESTS = ROOT / "data" / "inferencex" / "agentx_requests.csv"
METRICS = ROOT / "data" / "inferencex" / "agentx_server_metrics.csv"
CAT = load_catalog()


@pytest.mark.parametrize("hw", ["b200", "mi355x"])
def test_vllm_kimi_kv_is_fp8_as_the_servers_logged(hw: str) -> None:
    # the runs' vllm_command.txt set --kv-cache-dtype fp8; the B200 TP4 server logged 17.16 GiB of KV memory for
    # 524,480 tokens, the MI355X TP4 one 119.18 GiB for 3,642,081 tokens: 35,136 B per token on every GPU
    # (61 layers x 576 latent elements x 1 B, the MLA latent replicated on each TP rank)
    b, src = kv_bytes("vllm", "kimi-k2.5", hw)
    assert b == 1 and "S47" in src
    dep = Deployment(CAT.models["kimi-k2.5"], CAT.accelerators[hw], "fp4", 4, kv_dtype_bytes=b)
    per_gpu = dep.kv_token_bytes / dep.kv_divisor
    assert per_gpu == 35136
    for gib, tokens in ((17.16, 524_480), (119.18, 3_642_081)):
        assert gib * 2**30 / tokens == pytest.approx(per_gpu, rel=2e-3)
    # SGLang DeepSeek on B200 keeps its own recipe's FP8; an unlisted pairing stays BF16
    assert kv_bytes("vllm", "kimi-k2.5", "h100")[0] == 2


def test_every_agentx_deployment_uses_the_logged_kv_dtype_and_its_own_frontend_time() -> None:
    df = load_agentic(AGENTIC, METRICS)
    got = list(deployed_points(df, load_fitted(), CAT, 0.5))
    assert len(got) == df.filter(pl.col("framework").is_not_null()).height >= 60
    # a deployment without a measurement of its own takes the tokenizer figure of S48
    tok, src = tokenize_s_per_token("vllm", "kimi-k2.5")
    assert tok == pytest.approx(308e-3 / 80_000) and "S48" in src
    assert tokenize_s_per_token("vllm", "kimi-k2.5", "h200") == (tok, src)
    seen = set()
    for _, hw, dep, p, _ in got:
        own, own_src = tokenize_s_per_token("vllm", "kimi-k2.5", hw)
        assert dep.kv_dtype_bytes == 1 and p.t_tok_s == own and "agentx_requests.csv" in own_src
        seen.add(hw)
    assert seen == {"b200", "mi355x"}
    # a model without a figure of its own takes the catalog's default (a fast tokenizer), below Kimi's slow one
    assert 0.0 < tokenize_s_per_token("sglang", "deepseek-r1")[0] < tok


def test_each_deployments_frontend_time_is_what_its_runs_requests_measure() -> None:
    # the catalog's per-hardware figures are the per-request exports' least squares, not typed in: B200's frontend
    # (DGX B200 host, vLLM's CUDA build) takes about twice MI355X's per prompt token
    got = frontend_time(pl.read_csv(REQUESTS))
    assert set(got) == {"b200-dgxc", "mi355x"}
    for hw, f in got.items():
        listed, src = tokenize_s_per_token("vllm", "kimi-k2.5", accelerator_of(hw, CAT))
        assert listed == pytest.approx(f["s_per_token"], rel=5e-3) and "S47" in src
        assert f["calls"] >= 50 and f["residual_sd_s"] < 0.05 and 0.0 < f["s_fixed"] < 0.1
    assert got["b200-dgxc"]["s_per_token"] > 1.5 * got["mi355x"]["s_per_token"]


def test_frontend_time_leaves_out_calls_that_queued_behind_another() -> None:
    # four calls alone at 10 ms + 5 us per token, and two whose windows overlap (the second waited for the first)
    start = [0, 10**9, 2 * 10**9, 3 * 10**9, 4 * 10**9, 4 * 10**9 + 10**6]
    tokens = [10_000, 20_000, 40_000, 80_000, 50_000, 50_000]
    ack = [s + int((0.010 + 5e-6 * t) * 1e9) for s, t in zip(start, tokens, strict=True)]
    ack[5] += 10**8
    df = pl.DataFrame({"hw": ["b200-dgxc"] * 6, "tp": [8] * 6, "conc": [2] * 6, "offloading": ["none"] * 6,
                       "conversation_id": list("abcdef"), "turn_index": [1] * 6, "request_start_ns": start,
                       "request_ack_ns": ack, "input_sequence_length": tokens})
    f = frontend_time(df)["b200-dgxc"]
    assert (f["calls"], f["calls_total"]) == (4, 6)
    assert f["s_per_token"] == pytest.approx(5e-6, rel=1e-6) and f["s_fixed"] == pytest.approx(0.010, abs=1e-6)
    with pytest.raises(TraceFormatError, match="input_sequence_length"):
        frontend_time(df.drop("input_sequence_length"))


def test_tokenization_is_paid_per_prompt_token_before_the_scheduler() -> None:
    # the frontend tokenizes the whole prompt, the cached prefix included: TTFT grows by t_tok x input tokens
    # whatever the cache holds, in the equations and in the simulation alike
    dep = Deployment(CAT.models["kimi-k2.5"], CAT.accelerators["b200"], "fp4", 8, kv_dtype_bytes=1)
    p0 = StepParams(t_fixed_s=0.006, mbu=0.7, mfu=0.33, t0_s=0.08, t_req_s=0.004, mfu_pf=0.15, attn_eff=0.7)
    tok = 308e-3 / 80_000
    p1 = p0.with_(t_tok_s=tok)
    inp, cached, out = np.array([80_000.0, 80_000.0]), np.array([76_000.0, 0.0]), np.array([500.0, 500.0])
    d = call_times(dep, p1, inp, cached, out).ttft_s - call_times(dep, p0, inp, cached, out).ttft_s
    assert d == pytest.approx([0.308, 0.308], abs=1e-9)
    assert float(p1.request_s(80_000)) == pytest.approx(0.08 + 0.308)
    assert StepCost(dep, p1, 0.9, 64e9, 25e9).arrival_s(80_000) == pytest.approx(0.388)
    # one client, one request at a time: the simulated first token moves by the same 0.308 s
    t0, _, _ = simulate_point(dep, p0, 1, 80_000, 500, 8192, shared_fraction=0.95, spread=0.0, per_client=3)
    t1, _, _ = simulate_point(dep, p1, 1, 80_000, 500, 8192, shared_fraction=0.95, spread=0.0, per_client=3)
    assert t1 - t0 == pytest.approx(0.308, abs=1e-6)


def test_a_tokenize_entry_without_a_source_is_one_clear_error(serving_catalog) -> None:
    serving_catalog("SCHED_PATH", '[[tokenize]]\nframework = "vllm"\nmodel = "kimi-k2.5"\ns_per_token = 3e-6\n')
    with pytest.raises(CatalogError, match=r"tokenize\[0\]\.s_per_token"):
        tokenize_s_per_token("vllm", "kimi-k2.5")


def test_lmcache_rows_get_the_recipes_cpu_tier_and_it_serves_the_users_contexts() -> None:
    # B200 TP4, 12 users, LMCache: the HBM pool holds ~5 of the users' ~92K-token contexts, so the GPU hit rate
    # collapses (measured 0.0005); the recipe's 2,500 GB CPU tier holds them all, and its hits (not reported by the
    # run) load over PCIe instead of being prefilled again. The same row without the tier recomputes them.
    from agentprof.replay.serving.benchpoint import AGENTX_LMCACHE_CPU_BYTES, simulate_agentic, workload_reuse

    df = load_agentic(AGENTIC, METRICS)
    row = df.filter((pl.col("hw") == "b200-dgxc") & (pl.col("tp") == 4) & (pl.col("conc") == 12)
                    & (pl.col("offloading") == "lmcache"))
    assert row.height == 1
    fitted, reuse = load_fitted(), workload_reuse(df)
    with_tier = simulate_agentic(row, fitted, reuse=reuse)["table"][0]
    without = simulate_agentic(row.with_columns(pl.lit("none").alias("offloading")), fitted, prefixes="private",
                               reuse=reuse)["table"][0]
    assert AGENTX_LMCACHE_CPU_BYTES / 35136 > 64 * 150_000  # every user's context, many times over
    # (the HBM pool is the server's logged 524,480 tokens, memory.toml: ~5.7 of the 12 contexts, and the simulated
    # HBM serves 41 % of the prompts where the run's prefix cache reported 0.05 %; below 0.2 while the catalog's
    # 180e9 B of HBM under-counted the pool at 13.7 GB per GPU)
    assert with_tier["sim_hit"] < 0.5 and with_tier["sim_cpu_hit"] > 0.5
    assert without["sim_cpu_hit"] == 0.0
    assert with_tier["pred_ttft"] < 0.5 * without["pred_ttft"]


def test_a_fitted_file_from_before_attention_had_its_own_efficiency_is_refused(tmp_path: Path) -> None:
    # attn_eff used to scale each group's prefill GEMM efficiency (0.53 meant ~7 % of the peak); read as a fraction
    # of the BF16 peak it would make attention 6x faster, so an old file is one clear error asking for a refit
    from agentprof.replay.calibration import FITTED_PATH, load_fitted

    text = FITTED_PATH.read_text()
    assert 'attn_eff_basis = "bf16_peak"' in text and 0.02 < load_fitted().attn_eff < 0.5
    old = tmp_path / "fitted.toml"
    old.write_text(text.replace('attn_eff_basis = "bf16_peak"\n', ""))
    with pytest.raises(CatalogError, match=r"global\.attn_eff_basis.*refit"):
        load_fitted(str(old))


def _own_points(df: pl.DataFrame, hw: str) -> pl.Series:
    return df["hw"].str.to_lowercase().str.starts_with(hw)


def test_attention_efficiency_per_accelerator_is_fitted_on_its_own_points_only() -> None:
    # each accelerator's eta comes from its own healthy conc <= 8 points: scaling another accelerator's measured
    # TTFT, or any point outside the fit set, leaves it unchanged; scaling its own moves it (slower -> lower eta)
    import dataclasses

    from agentprof.replay.agentic import fit_attn_eff_per_accelerator, fit_rows, split_measured

    fitted = dataclasses.replace(load_fitted(), attn_eff_by_accelerator={})
    df = load_agentic(AGENTIC, METRICS)
    etas, info = fit_attn_eff_per_accelerator(df, fitted, CAT)
    assert set(etas) == {"b200", "mi355x"}
    rows = split_measured(fit_rows(df), CAT)
    for hw in etas:
        assert info[f"{hw}_attn_eff_points"] == int(_own_points(rows, hw).sum()) > 0
    # the shipped fitted.toml carries the same values (refit with `agentprof devices fit`)
    shipped = load_fitted()
    for hw, eta in etas.items():
        assert shipped.attn_eff_for(hw) == pytest.approx(eta, rel=0.02)
    in_fit = (pl.col("server_gpu_cache_hit_rate") >= 0.9) & (pl.col("conc") <= 8)
    slow_mi = df.with_columns(pl.when(_own_points(df, "mi355x") & in_fit).then(pl.col("mean_ttft") * 2.0)
                              .otherwise(pl.col("mean_ttft")).alias("mean_ttft"))
    e2, _ = fit_attn_eff_per_accelerator(slow_mi, fitted, CAT)
    assert e2["b200"] == pytest.approx(etas["b200"], rel=1e-9)
    assert e2["mi355x"] < 0.8 * etas["mi355x"]
    outside = df.with_columns(pl.when(in_fit).then(pl.col("mean_ttft")).otherwise(pl.col("mean_ttft") * 10.0)
                              .alias("mean_ttft"))
    e3, _ = fit_attn_eff_per_accelerator(outside, fitted, CAT)
    assert e3 == pytest.approx(etas, rel=1e-9)


def test_an_accelerator_without_agentx_points_takes_the_pooled_efficiency() -> None:
    import dataclasses

    from agentprof.replay.calibration import _parse_fitted, to_toml
    from agentprof.replay.systems import resolve

    base = load_fitted()
    fitted = dataclasses.replace(base, attn_eff=0.08, attn_eff_by_accelerator={"b200": 0.2},
                                 agentic={**base.agentic, "b200_attn_eff_points": 4})
    assert fitted.attn_eff_for("b200") == 0.2 and fitted.attn_eff_for("h200") == 0.08
    model = CAT.models["deepseek-r1"]
    own = resolve(CAT.system("b200+x86"), model, CAT, fitted)
    other = resolve(CAT.system("h200+x86"), model, CAT, fitted)
    assert own.params.attn_eff == 0.2 and "b200's own 4 AgentX points" in own.calibration
    assert other.params.attn_eff == 0.08 and "pooled" in other.calibration
    # stored and read back; a non-positive value is refused with the key named
    import tomllib

    text = to_toml(fitted)
    assert "[global.attn_eff_by_accelerator]" in text
    back = _parse_fitted(tomllib.loads(text), "x.toml")
    assert back.attn_eff_by_accelerator == {"b200": 0.2} and back.attn_eff == 0.08
    with pytest.raises(CatalogError, match=r"attn_eff_by_accelerator\.b200"):
        _parse_fitted(tomllib.loads(text.replace("b200 = 0.2", "b200 = -1")), "x.toml")


# the MI355X TP4 concurrency-1 run without offload [S47 profile_export.jsonl]: warm turns 5-11 and 13 as
# (prompt tokens, new tokens since the previous prompt, time_to_first_token - (request_ack - request_start) in s)
MI355X_WARM_TURNS = [(89_389, 885, 0.665), (89_981, 592, 0.6555), (90_668, 687, 0.666), (95_192, 4_524, 1.438),
                     (101_132, 5_940, 1.479), (103_529, 2_397, 1.148), (103_764, 235, 0.730), (104_458, 578, 0.735)]


def test_the_mi355x_per_block_host_time_is_the_records_regression() -> None:
    # every MI355X AgentX server runs --block-size=1, so the KV manager walks one block per prompt token; the
    # catalog's 6.5 us per block is the least-squares slope of the warm turns' engine time on the prompt length,
    # with attention (new x prompt) as the other term
    from agentprof.catalog.kvcache import block_host_s_per_token

    per_tok, src = block_host_s_per_token("vllm", "kimi-k2.5", "mi355x")
    assert "--block-size=1" in src and "S47" in src and "S58" in src
    rows = np.array(MI355X_WARM_TURNS)
    a = np.c_[rows[:, 0], rows[:, 1] * rows[:, 0]]
    (b, c), *_ = np.linalg.lstsq(a, rows[:, 2], rcond=None)
    assert per_tok == pytest.approx(b, rel=0.01)
    assert np.abs(a @ (b, c) - rows[:, 2]).max() < 0.15
    # the attention term is the kernels' rate: 64 heads x (192 + 128) dims x 2 FLOPs x 61 layers per new-token x
    # prompt-token pair over four GPUs, at 0.1-0.2 of MI355X's BF16 peak
    dep = Deployment(CAT.models["kimi-k2.5"], CAT.accelerators["mi355x"], "fp4", 4, kv_dtype_bytes=1)
    eta = 64 * 640 * 61 / 4 / c / dep.attn_peak
    assert 0.1 < eta < 0.2
    # B200's recipe keeps vLLM's default blocks, and nothing else is listed
    assert block_host_s_per_token("vllm", "kimi-k2.5", "b200")[0] == 0.0
    assert block_host_s_per_token("sglang", "deepseek-r1", "mi355x")[0] == 0.0


def test_the_block_host_time_is_a_per_prefill_overhead_on_mi355x_rows_only() -> None:
    from agentprof.catalog.kvcache import block_host_s_per_token

    df = load_agentic(AGENTIC, METRICS)
    fitted = load_fitted()
    per_tok = block_host_s_per_token("vllm", "kimi-k2.5", "mi355x")[0]
    on = list(deployed_points(df, fitted, CAT, 0.1))
    off = list(deployed_points(df, fitted, CAT, 0.1, block_host=False))
    assert len(on) == len(off) > 60
    for (r, hw, _, p1, _), (_, _, _, p0, _) in zip(on, off, strict=True):
        extra = per_tok * float(r["mean_input_tokens"]) if hw == "mi355x" else 0.0
        assert p1.t_req_s - p0.t_req_s == pytest.approx(extra, abs=1e-12)
    # paid once per request: a lone user's first token moves by exactly that time, in the equations and the
    # simulation alike; the engine loop stalls with it, so a second user's decode steps stretch too
    r, _, dep, p1, _ = next(x for x in on if x[1] == "mi355x")
    p0 = next(x for x in off if x[1] == "mi355x")[3]
    inp, extra = float(r["mean_input_tokens"]), per_tok * float(r["mean_input_tokens"])
    assert extra > 0.4
    d = call_times(dep, p1, np.array([inp]), np.array([0.95 * inp]), np.array([500.0])).ttft_s[0] \
        - call_times(dep, p0, np.array([inp]), np.array([0.95 * inp]), np.array([500.0])).ttft_s[0]
    assert d == pytest.approx(extra, rel=1e-6)
    t0, _, _ = simulate_point(dep, p0, 1, inp, 500, 8192, shared_fraction=0.95, spread=0.0, per_client=3)
    t1, _, _ = simulate_point(dep, p1, 1, inp, 500, 8192, shared_fraction=0.95, spread=0.0, per_client=3)
    assert t1 - t0 == pytest.approx(extra, rel=1e-3)
    _, i0, _ = simulate_point(dep, p0, 2, inp, 500, 8192, shared_fraction=0.95, spread=0.0, per_client=4)
    _, i1, _ = simulate_point(dep, p1, 2, inp, 500, 8192, shared_fraction=0.95, spread=0.0, per_client=4)
    assert i1 > i0


def test_a_block_host_entry_without_a_source_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    from agentprof.catalog import kvcache

    bad = tmp_path / "scheduling.toml"
    bad.write_text('[[block_host]]\nframework = "vllm"\nmodel = "kimi-k2.5"\nhardware = "mi355x"\n'
                   'block_tokens = { value = 1, source = "x" }\ns_per_block = 6e-6\n')
    monkeypatch.setattr(kvcache, "SCHED_PATH", bad)
    kvcache._block_host_entries.cache_clear()
    try:
        with pytest.raises(CatalogError, match=r"block_host\[0\]\.s_per_block"):
            kvcache.block_host_s_per_token("vllm", "kimi-k2.5", "mi355x")
    finally:
        kvcache._block_host_entries.cache_clear()


def test_users_who_think_between_calls_leave_the_decode_batch() -> None:
    # AgentX users wait between a reply and their next call (tool runs): the measured cycle less the measured E2E
    # (workload_think_s, 6-18 s per point). Fewer users are in the server at a time, so decode steps carry fewer
    # sequences and prefills; one user alone is unchanged
    from agentprof.replay.agentic import fit_rows, predictions, workload_think_s

    df = fit_rows(load_agentic(AGENTIC, METRICS)).filter(pl.col("hw").str.starts_with("mi355x"))
    assert 5.0 < workload_think_s(df) < 20.0
    fitted = load_fitted()
    eta = fitted.attn_eff_for("mi355x")
    busy = predictions(df, fitted, CAT, eta, think_s=0.0)
    idle = predictions(df, fitted, CAT, eta, think_s=10.0)
    one, many = busy["conc"] == 1, busy["conc"] >= 4
    assert np.allclose(idle.filter(one)["pred_itl"], busy.filter(one)["pred_itl"], rtol=1e-12)
    assert (idle.filter(many)["pred_itl"] < busy.filter(many)["pred_itl"]).all()
    assert (idle.filter(many)["pred_ttft"] <= busy.filter(many)["pred_ttft"]).all()


def test_the_shipped_held_out_long_prompt_error_is_recomputed_from_the_points() -> None:
    """fitted.toml's held-out AgentX error is what predicting each accelerator from the others' efficiency and
    decode steps gives now (the figure the demo quotes, error_by_slice's family 3), and each accelerator was
    predicted with an efficiency it did not set; MI355X's vLLM decode step without its own points is another."""
    from agentprof.replay.agentic import held_out_predictions, held_out_summary
    from agentprof.replay.enginestep import refit_with

    fitted, cat = load_fitted(), load_catalog()
    df = load_agentic(AGENTIC, METRICS)
    refit = refit_with(fitted, cat, [load_agentic(OTHER)])
    got = held_out_summary(df, fitted, cat, refit)
    stored = fitted.agentic
    assert got["held_out_points"] == stored["held_out_points"] == stored["points"]
    for k in ("held_out_median_ape_ttft", "held_out_median_ape_itl"):
        assert got[k] == pytest.approx(stored[k], rel=1e-4)
    for own, p in held_out_predictions(df, fitted, cat, refit):
        hw = p["hardware"][0]
        assert p.height == own.height and float(p["eta"][0]) != pytest.approx(stored[f"{hw}_attn_eff"], rel=1e-3)
    b200_only = df.filter(~pl.col("hw").str.starts_with("mi355x"))
    assert refit(b200_only).engine_steps["vllm/mi355x"]["tau_s"] != pytest.approx(
        fitted.engine_steps["vllm/mi355x"]["tau_s"], rel=1e-4)
    # without the refit (the step fitted on every point) MI355X's inter-token error is lower: the hold-out matters
    assert held_out_summary(df, fitted, cat)["held_out_median_ape_itl"] < got["held_out_median_ape_itl"]


def test_the_longest_prompts_are_predicted_from_the_shorter_ones_only() -> None:
    """The literal proxy (docs/DEVICE_MODEL.md §4, family 3b): the healthy points above the median prompt are held
    out, and what predicts them moves with the shorter points' measurements, never with their own."""
    from agentprof.replay.agentic import fit_rows, held_out_longest

    fitted = load_fitted()
    df = load_agentic(AGENTIC, METRICS)
    healthy = fit_rows(df)
    own, p, cut = held_out_longest(df, fitted, CAT)
    assert cut == pytest.approx(float(healthy["mean_input_tokens"].median()))
    assert own.height == p.height == (healthy["mean_input_tokens"] > cut).sum() > 0
    assert (own["mean_input_tokens"] > cut).all()
    assert (p["meas_ttft"].to_numpy() == own["mean_ttft"].to_numpy()).all()

    def scaled(long_side: bool) -> pl.DataFrame:
        hit = (pl.col("mean_input_tokens") > cut) if long_side else (pl.col("mean_input_tokens") <= cut)
        return df.with_columns(mean_ttft=pl.when(hit).then(pl.col("mean_ttft") * 3.0).otherwise(pl.col("mean_ttft")))

    same = held_out_longest(scaled(True), fitted, CAT)[1]
    assert np.allclose(same["pred_ttft"], p["pred_ttft"], rtol=1e-12)
    moved = held_out_longest(scaled(False), fitted, CAT)[1]
    assert (moved["eta"] < p["eta"]).all() and (moved["pred_ttft"] > p["pred_ttft"]).all()
    # with a refit (the decode steps), it sees the shorter points only and its terms price the longer ones
    from agentprof.replay.enginestep import refit_with

    seen: list[pl.DataFrame] = []
    steps = refit_with(fitted, CAT, [load_agentic(OTHER)])

    def refit(rows: pl.DataFrame):
        seen.append(rows)
        return steps(rows)

    refitted = held_out_longest(df, fitted, CAT, refit)[1]
    assert len(seen) == 1 and (seen[0]["mean_input_tokens"] <= cut).all() and seen[0].height == healthy.height - own.height
    mi = refitted["hardware"] == "mi355x"
    assert not np.allclose(refitted.filter(mi)["pred_itl"], p.filter(mi)["pred_itl"], rtol=1e-6)


def test_predicted_ttft_carries_its_parts_and_any_healthy_row_can_be_priced() -> None:
    # the parts that vLLM's own metrics split a first token into (scripts/agentx_ttft_parts.py): the prefill queue,
    # the prefill alone and the frontend, each inside the predicted TTFT
    from agentprof.replay.agentic import predictions, workload_think_s

    df, fitted = load_agentic(AGENTIC, METRICS), load_fitted()
    few = predictions(df, fitted, CAT, fitted.attn_eff, fitted.attn_eff_by_accelerator)
    every = predictions(df, fitted, CAT, fitted.attn_eff, fitted.attn_eff_by_accelerator,
                        think_s=workload_think_s(df), max_conc=10**6)
    assert few.height == 20 and every.height > few.height and every["conc"].max() > 8
    assert (every["pred_ttft"] >= every["pred_queue"] + every["pred_prefill"] + every["pred_frontend"] - 1e-9).all()
    assert (every["pred_queue"] >= 0).all() and (every["pred_prefill"] > 0).all()
    prompt = {(accelerator_of(r["hw"], CAT), r["mean_ttft"]): r["mean_input_tokens"] for r in df.iter_rows(named=True)}
    for p in every.iter_rows(named=True):
        tok = tokenize_s_per_token("vllm", "kimi-k2.5", p["hardware"])[0]
        assert p["pred_frontend"] == pytest.approx(tok * prompt[(p["hardware"], p["meas_ttft"])])


def _synthetic_requests(eta: float, stalls: int = 6) -> tuple[pl.DataFrame, float]:
    """One user's calls on B200 TP8, one after another, whose engine time is exactly a + b·new + c·pairs + d·prompt
    with c set by ``eta`` through the deployment's attention cost; plus ``stalls`` calls 20 s late."""
    pts = load_agentic(AGENTIC, METRICS)
    probe = pts.filter((pl.col("hw") == "b200-dgxc") & (pl.col("tp") == 8)).head(1)
    _, _, dep, _, _ = next(iter(deployed_points(probe, load_fitted(), CAT, 1.0)))
    pair_s = float(dep.prefill_peak_s(1.0, 1000.0, 1.0) - dep.prefill_peak_s(1.0, 0.0, 1.0)
                   - dep.context_expand_flops(1.0, 1000.0) / dep.attn_peak / dep.gpus) / 1000.0
    rng = np.random.default_rng(7)
    rows, t, prompt, out = [], 0, 30_000, 200
    for turn in range(120):
        new = int(rng.choice([150, 400, 900, 3000, 12_000]))
        prompt = prompt + out + new
        engine = 0.06 + 1.5e-5 * new + pair_s / eta * new * (prompt - new / 2) + 4e-7 * prompt
        engine += 20.0 if turn % 20 == 5 and turn // 20 < stalls else 0.0
        ack = 0.3
        rows.append({"hw": "b200-dgxc", "tp": 8, "conc": 1, "offloading": "none", "conversation_id": "c",
                     "turn_index": turn, "request_start_ns": t, "request_ack_ns": t + int(ack * 1e9),
                     "input_sequence_length": prompt, "output_sequence_length": out,
                     "ttft_ms": (ack + engine) * 1e3})
        t += int((ack + engine + 30.0) * 1e9)
    return pl.DataFrame(rows), pair_s


def test_per_call_attention_efficiency_is_recovered_past_stalls() -> None:
    from agentprof.replay.agentic import call_attn_eff

    req, _ = _synthetic_requests(0.3)
    got = call_attn_eff(req, load_agentic(AGENTIC, METRICS), load_fitted(), CAT)["b200-dgxc"]
    # the first call has no previous turn: 119 of 120 calls enter; six 20 s stalls do not move the fit
    assert got["calls"] == 119 and got["eta_call"] == pytest.approx(0.3, rel=0.02)
    assert got["mean_engine_s"] > got["median_engine_s"] + 0.5


def test_a_runs_mean_sets_a_slower_attention_than_its_single_calls_on_b200() -> None:
    from agentprof.replay.agentic import call_attn_eff

    fitted = load_fitted()
    got = call_attn_eff(pl.read_csv(REQUESTS), load_agentic(AGENTIC, METRICS), fitted, CAT)
    # B200: the mean-fitted η (the server's queue left out) still prices the run's first-call compile and stalls;
    # MI355X's calls put it at 0.143 whatever the fit (the mean-fitted one, 0.27, sits above them since the fit
    # took the API's runs: the borrowed DeepSeek prefill GEMMs leave less of the mean to attention)
    assert got["b200-dgxc"]["eta_call"] > 1.9 * fitted.attn_eff_for("b200")
    assert got["mi355x"]["eta_call"] == pytest.approx(0.143, abs=0.005)
    assert got["mi355x"]["eta_call"] < fitted.attn_eff_for("mi355x")
    with pytest.raises(TraceFormatError, match="ttft_ms"):
        call_attn_eff(pl.read_csv(REQUESTS).drop("ttft_ms"), load_agentic(AGENTIC, METRICS), fitted, CAT)


OTHER = ROOT / "data" / "inferencex" / "agentic_other_points.csv"


def test_minimax_entry_matches_what_its_agentx_server_logged() -> None:
    # the MXFP4 TP1 server (vLLM 0.22.0, --kv-cache-dtype fp8) logged 152.53 GiB of KV for 1,289,856 tokens and
    # 118.75 GiB of weights: the config's 62 layers x 8 KV heads x 128 x 2 at 1 B, and MXFP4 experts + BF16 rest
    from agentprof.catalog import find_model

    m = find_model("amd/MiniMax-M2.5-MXFP4")
    assert m is not None and m.key == "minimax-m2.5" and find_model("MiniMaxAI/MiniMax-M2.5") is m
    b, src = kv_bytes("vllm", m.key, "mi355x")
    assert b == 1 and "S47" in src
    dep = Deployment(m, CAT.accelerators["mi355x"], "fp4", 1, kv_dtype_bytes=b)
    assert dep.kv_token_bytes == pytest.approx(152.53 * 2**30 / 1_289_856, rel=1e-3)
    assert dep.weight_bytes_per_gpu == pytest.approx(118.75 * 2**30, rel=0.01)


def test_every_healthy_minimax_point_is_priced_by_the_shipped_terms() -> None:
    # the GQA model of the AgentX runs (scripts/error_by_slice.py family 6): every healthy vLLM point is placed,
    # each TTFT has its parts, and the single-user TTFT is mostly the prefill of the uncached tail
    from agentprof.replay.agentic import attention_rows, fit_rows, predictions

    fitted = load_fitted()
    own = fit_rows(attention_rows(load_agentic(OTHER), CAT, "gqa"))
    assert own.height >= 30 and set(own["tp"].to_list()) == {1, 2}
    assert own["model"].str.contains("MiniMax").all()
    p = predictions(own, fitted, CAT, fitted.attn_eff_for("mi355x", "gqa"))
    assert p.height == own.height
    assert (p["pred_ttft"] > 0).all() and (p["pred_itl"] > 0).all()
    parts = p["pred_queue"] + p["pred_prefill"] + p["pred_frontend"]
    assert np.allclose(parts.to_numpy(), p["pred_ttft"].to_numpy(), rtol=0, atol=0.05)  # + per-request host time
    one = p.filter(pl.col("conc") == 1)
    assert (one["pred_queue"] == 0).all() and (one["pred_prefill"] > one["pred_frontend"]).all()


def test_the_engines_time_per_prompt_token_is_recovered_past_stalls_and_replays() -> None:
    # engine time = 0.06 s + 4e-7 s per prompt token + the calls' prefill (GEMMs, attention); taking the prefill
    # out (``modelled``) leaves the per-token and fixed parts, which six 20 s stalls do not set; a prompt replayed
    # in the run (fully cached) is left out, as are calls adding more than SMALL_NEW tokens
    from agentprof.replay.agentic import SMALL_NEW, engine_host_time

    eta = 0.3
    req, pair_s = _synthetic_requests(eta)

    def prefill(hw: str, tp: int, prompt: np.ndarray, new: np.ndarray) -> np.ndarray:
        assert hw == "b200-dgxc" and tp == 8 and (new <= SMALL_NEW).all()
        return 1.5e-5 * new + pair_s / eta * new * (prompt - new / 2)

    got = engine_host_time(req, prefill)["b200-dgxc"]
    # each call's new tokens: its prompt less the previous prompt and output (the first call has no previous turn)
    small = int((np.diff(req["input_sequence_length"].to_numpy()) - 200 <= SMALL_NEW).sum())
    assert got["calls"] == small and got["calls_total"] == 120
    assert got["s_per_token"] == pytest.approx(4e-7, rel=0.02) and got["s_fixed"] == pytest.approx(0.06, abs=2e-3)
    # without the prefill taken out the per-token figure also carries the attention over the prompt
    assert engine_host_time(req)["b200-dgxc"]["s_per_token"] > 1.5 * got["s_per_token"]
    # the conversation sent again later (every prompt cached: 5 ms each) adds no first-time call
    shift = int(req["request_start_ns"].max()) + 10**12
    again = req.with_columns(pl.col("request_start_ns") + shift, pl.col("request_ack_ns") + shift,
                             ttft_ms=pl.lit(305.0))
    twice = engine_host_time(pl.concat([req, again]), prefill)["b200-dgxc"]
    assert twice["calls"] == small and twice["s_per_token"] == pytest.approx(got["s_per_token"], rel=1e-6)


def test_the_servers_measured_queue_is_left_out_of_the_attention_fit() -> None:
    """A wait vLLM measured in its own queue (a slot held by another call, the scheduler) is not prefill: adding
    seconds to a point's first token and to its measured queue leaves the fitted efficiency where it was, while
    the same seconds on a point without a measured queue slow it down where no point of that accelerator has
    one. Where some have, the others are not fitted at all, and the fitted efficiency is the one whose whole
    predicted first token best matches the measured one less vLLM's queue."""
    import math

    from agentprof.replay.agentic import (
        fit_attn_eff,
        fit_rows,
        predictions,
        split_measured,
        with_server_queue,
    )

    fitted = load_fitted()
    rows = fit_rows(load_agentic(AGENTIC, METRICS)).filter(pl.col("hw").str.starts_with("mi355x"))
    known = rows["meas_queue"].is_not_null()
    # the runs with vLLM's metrics (0603) are matched, the others (0601) are not; the 2-user run queued 2.16 s
    assert 0 < known.sum() < rows.height
    two = rows.filter(known & (pl.col("conc") == 2) & (pl.col("offloading") == "lmcache"))
    assert two["meas_queue"][0] == pytest.approx(2.16, abs=0.01)
    # vLLM's prefill phase and its own first token come along; its first token holds the queue and the prefill
    assert two["meas_prefill"][0] == pytest.approx(1.08, abs=0.01)
    assert (rows.filter(known)["meas_server_ttft"] > rows.filter(known)["meas_queue"]
            + rows.filter(known)["meas_prefill"] - 0.05).all()
    bare = with_server_queue(rows.drop("meas_queue", "meas_prefill", "meas_server_ttft"),
                             pl.read_csv(METRICS).drop("request_prefill_time_seconds_sum"))
    assert bare["meas_prefill"].is_null().all() and bare["meas_queue"].to_list() == rows["meas_queue"].to_list()
    base, _ = fit_attn_eff(rows, fitted, CAT)
    hit = known & (pl.col("conc") == 4)
    later = rows.with_columns(mean_ttft=pl.when(hit).then(pl.col("mean_ttft") + 3.0).otherwise(pl.col("mean_ttft")),
                              meas_queue=pl.when(hit).then(pl.col("meas_queue") + 3.0).otherwise(pl.col("meas_queue")))
    assert fit_attn_eff(later, fitted, CAT)[0] == pytest.approx(base, rel=2e-3)
    unmeasured = rows.with_columns(meas_queue=pl.lit(None, dtype=pl.Float64),
                                   mean_ttft=pl.when(hit).then(pl.col("mean_ttft") + 3.0).otherwise(pl.col("mean_ttft")))
    assert fit_attn_eff(unmeasured, fitted, CAT)[0] < 0.9 * base
    # the points without vLLM's split are left out while others of the same accelerator have it
    kept = split_measured(rows, CAT)
    assert kept.height == int(known.sum()) and kept["meas_queue"].is_not_null().all()
    assert split_measured(unmeasured, CAT).height == rows.height
    slower = rows.with_columns(mean_ttft=pl.when(known).then(pl.col("mean_ttft")).otherwise(pl.col("mean_ttft") * 3))
    assert fit_attn_eff(slower, fitted, CAT)[0] == pytest.approx(base, rel=1e-9)

    # the fitted value minimises the log error of the whole prediction against the first token less the queue
    def cost(eta: float) -> float:
        p = predictions(kept, fitted, CAT, eta)
        r = (p["pred_ttft"] / (p["meas_ttft"] - p["meas_queue"])).log().to_numpy()
        return float(r @ r)

    assert cost(base) < min(cost(base * 1.03), cost(base / 1.03))
    assert math.isfinite(cost(base))
    with pytest.raises(TraceFormatError, match="request_queue_time_seconds_sum"):
        with_server_queue(rows, pl.read_csv(METRICS).drop("request_queue_time_seconds_sum"))
