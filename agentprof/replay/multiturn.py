"""A second long-prompt family, held out whole: InferenceX's multi-turn DeepSeek R1 runs on B200 under vLLM.

``data/inferencex/multiturn_dsr1_runs.csv`` and ``multiturn_dsr1_decode.csv`` [S65]: DeepSeek-R1-0528 FP4 on 4 and
8 B200s (vLLM 0.19.1, FP8 KV, expert parallel), Claude Code traces replayed by kv-cache-tester (59–103K-token
prompts, reasoning outputs of 2–4K tokens) at 1–512 users. Nothing is fitted on them: the per-step terms are
DeepSeek R1's SGLang fit on B200 (1K prompts) and the prefill attention efficiency is the one the Kimi K2.5 AgentX
points set. Two checks:

- **TTFT** of the healthy runs (server hit rate >= :data:`~agentprof.replay.agentic.HEALTHY_HIT`, at most
  :data:`~agentprof.replay.agentic.MAX_CONC` users) through :func:`agentprof.replay.agentic.predictions`, the users
  in the server by Little's law from each run's own request rate;
- **decode steps**: where vLLM's 1-second metrics show only decoding, the time per token at that running batch and
  the context per sequence its KV usage implies (:func:`decode_check`);
- **single calls** of four one-user runs (``multiturn_dsr1_requests.csv``: kv-cache-tester's per-request records,
  the same Claude Code requests at 4 and 8 GPUs), each priced alone from its own cached and new tokens
  (:func:`call_check`): what a replay does with every call of a trace.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from agentprof.catalog.hardware import HardwareCatalog
from agentprof.replay.agentic import deployed_points, predictions, read_points_csv
from agentprof.replay.calibration import Fitted
from agentprof.replay.costmodel import Deployment, StepParams, call_times, decode_step_s

DATA = Path(__file__).resolve().parents[2] / "data" / "inferencex"
RUNS = DATA / "multiturn_dsr1_runs.csv"
DECODE = DATA / "multiturn_dsr1_decode.csv"
REQUESTS = DATA / "multiturn_dsr1_requests.csv"
REQUEST_COLUMNS = ("run_folder", "tp", "ep", "offload", "user_id", "request_idx", "input_tokens",
                   "output_tokens_actual", "cache_hit_blocks", "cache_miss_blocks", "ttft")
BLOCK_TOKENS = 64
"""Tokens per block in kv-cache-tester's ``cache_hit_blocks`` / ``cache_miss_blocks`` (its hashing block)."""
RUN_COLUMNS = ("hardware", "model", "framework", "precision", "tp", "ep", "conc", "duration_seconds", "requests",
               "mean_ttft", "m_prompt_tokens", "m_computed_tokens", "m_prefills", "m_generation_tokens",
               "m_completed", "gpu_kv_cache_tokens")
DECODE_COLUMNS = ("tp", "ep", "running", "intervals", "itl_ms", "kv_usage_pct_median")
MIN_INTERVALS = 8
"""Decode measurements resting on fewer 1-second intervals are left out (a handful of seconds is noise)."""


def load_runs(path: str | Path = RUNS) -> pl.DataFrame:
    """The runs, one row each (raw counters as the benchmark and vLLM logged them)."""
    return read_points_csv(path, RUN_COLUMNS)


def load_decode(path: str | Path = DECODE) -> pl.DataFrame:
    """The decode-rate measurements, one row per (run, running batch)."""
    return read_points_csv(path, DECODE_COLUMNS)


def load_requests(path: str | Path = REQUESTS) -> pl.DataFrame:
    """The one-user runs' requests, one row each, in the order each run sent them."""
    return read_points_csv(path, REQUEST_COLUMNS)


def as_points(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs in the AgentX points' columns (:data:`agentprof.replay.agentic.COLUMNS`): mean prompt = prompt tokens
    over prefills, the server's hit rate = 1 − computed / prompt tokens, mean output = generated tokens over completed
    requests, and ``cycle_s``, each user's measured cycle (users x duration / requests). Runs without vLLM's counters
    are left out."""
    r = runs.filter(pl.col("m_prompt_tokens").is_not_null() & (pl.col("m_prefills").fill_null(0) > 0)
                    & (pl.col("m_completed").fill_null(0) > 0) & pl.col("mean_ttft").is_not_null()
                    & (pl.col("requests").fill_null(0) > 0))
    return r.select(
        pl.col("hardware").alias("hw"), "model", "framework", "precision", "tp", "ep", "conc",
        (pl.col("m_prompt_tokens") / pl.col("m_prefills")).alias("mean_input_tokens"),
        (pl.col("m_generation_tokens") / pl.col("m_completed")).alias("mean_output_tokens_actual"),
        (1.0 - pl.col("m_computed_tokens") / pl.col("m_prompt_tokens")).alias("server_gpu_cache_hit_rate"),
        pl.col("mean_ttft").cast(pl.Float64), pl.lit(None, dtype=pl.Float64).alias("mean_itl"),
        "duration_seconds", pl.col("requests").alias("num_requests_successful"),
        (pl.col("conc") * pl.col("duration_seconds") / pl.col("requests")).alias("cycle_s"))


def ttft_check(runs: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog) -> pl.DataFrame:
    """Predicted against measured mean TTFT of the healthy runs (:func:`agentprof.replay.agentic.predictions`, with
    each accelerator's fitted attention efficiency; every row carries its measured ``cycle_s``, so no think time is
    assumed)."""
    pts = as_points(runs)
    return predictions(pts, fitted, cat, fitted.attn_eff, by_accelerator=fitted.attn_eff_by_accelerator, think_s=0.0,
                       by_attention=fitted.attn_eff_by_attention)


def pool_tokens(runs: pl.DataFrame) -> dict[int, float]:
    """KV-cache tokens per instance by tensor-parallel size, as the runs' servers logged them ("GPU KV cache size");
    runs that did not log it ran the same build and flags, so the logged size stands for them."""
    got = runs.filter(pl.col("gpu_kv_cache_tokens").is_not_null()).group_by("tp").agg(
        pl.col("gpu_kv_cache_tokens").median())
    return {int(tp): float(v) for tp, v in got.iter_rows()}


def _deployment(runs: pl.DataFrame, tp: int, ep: int, fitted: Fitted, cat: HardwareCatalog
                ) -> tuple[Deployment, StepParams, str] | None:
    """The runs' stack (their first row's hardware, model, framework, precision) at ``tp``/``ep`` as
    :func:`agentprof.replay.agentic.deployed_points` deploys it: (deployment, step terms, calibration level), or
    None where the catalog cannot place it."""
    first = runs.row(0, named=True)
    probe = pl.DataFrame([{"hw": first["hardware"], "model": first["model"], "framework": first["framework"],
                           "precision": first["precision"], "tp": tp, "ep": ep, "conc": 1, "mean_input_tokens": 0.0}])
    for _, _, dep, p, how in deployed_points(probe, fitted, cat, fitted.attn_eff_for(first["hardware"])):
        return dep, p, how
    return None


def decode_check(decode: pl.DataFrame, runs: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog) -> pl.DataFrame:
    """Each decode measurement with at least :data:`MIN_INTERVALS` intervals against the model's step at its running
    batch ``b`` (kernels at vLLM's captured CUDA-graph batch) and context ``kv usage x pool / b`` (the KV in use
    divided among the running sequences): ``meas_itl`` and ``pred_itl`` in seconds per token."""
    pools = pool_tokens(runs)
    rows = []
    for (tp, ep), g in decode.filter(pl.col("intervals") >= MIN_INTERVALS).group_by("tp", "ep"):
        if int(tp) not in pools:
            continue
        got = _deployment(runs, int(tp), int(ep), fitted, cat)
        if got is None:
            continue
        dep, p, how = got
        b = g["running"].cast(pl.Float64).to_numpy()
        ctx = g["kv_usage_pct_median"].cast(pl.Float64).to_numpy() / 100.0 * pools[int(tp)] / b
        pred = np.asarray(decode_step_s(dep, p, b, ctx, padded=True), dtype=float) / max(p.accept, 1.0)
        rows.append(g.select("tp", "conc", "running").with_columns(
            ctx=pl.Series(ctx), meas_itl=g["itl_ms"].cast(pl.Float64) / 1e3, pred_itl=pl.Series(pred),
            calibration=pl.lit(how)))
    return pl.concat(rows).sort("tp", "running", "conc") if rows else pl.DataFrame()


def call_check(requests: pl.DataFrame, runs: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog) -> pl.DataFrame:
    """Each request of the one-user runs priced alone, as a replay prices a trace's calls: ``new`` = the blocks
    kv-cache-tester counted as missed x :data:`BLOCK_TOKENS` (at most the prompt), the rest cached, one user in the
    server. Each run's first request is flagged ``first``: the server compiles and captures on its first prefill
    (16-18 s measured), which no per-call price holds. Returns the rows with ``new``, ``meas_ttft``, ``pred_ttft``
    and the predicted frontend (``pred_frontend``)."""
    out = []
    for (tp, ep), g in requests.group_by("tp", "ep", maintain_order=True):
        got = _deployment(runs, int(tp), int(ep), fitted, cat)
        if got is None:
            continue
        dep, p, how = got
        inp = g["input_tokens"].cast(pl.Float64).to_numpy()
        new = np.minimum(g["cache_miss_blocks"].cast(pl.Float64).to_numpy() * BLOCK_TOKENS, inp)
        t = call_times(dep, p, inp, inp - new, g["output_tokens_actual"].cast(pl.Float64).to_numpy())
        out.append(g.select("run_folder", "tp", "offload", "user_id", "request_idx", "input_tokens").with_columns(
            new=pl.Series(new), meas_ttft=g["ttft"].cast(pl.Float64), pred_ttft=pl.Series(t.ttft_s),
            pred_frontend=pl.Series(p.t_tok_s * inp), first=pl.int_range(pl.len()).over("run_folder") == 0,
            calibration=pl.lit(how)))
    return pl.concat(out) if out else pl.DataFrame()
