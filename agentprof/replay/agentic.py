"""Long-prompt calibration and check on the AgentX Kimi K2.5 trace-replay points.

The official fixed-sequence points all have 1K-token prompts; agent calls have 75-120K-token prompts that are
mostly a cached prefix. The AgentX points (``data/inferencex/agentic_kimi_points.csv``: Kimi K2.5 on B200 and
MI355X under vLLM, with measured server prefix-cache hit rates) are the only long-prompt measurements. Their
healthy region (hit rate >= 0.9, concurrency <= 8, so the KV capacity does not bind) fits one global term,
the efficiency of prefill attention as a fraction of the BF16 peak, and checks decode at long context (ITL)
out of sample. Kimi K2.5 has no fixed-sequence calibration of its own: its per-step terms are DeepSeek R1's
(same 61-layer MLA MoE) on the same accelerator, as in the replay.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from agentprof.catalog import find_model
from agentprof.catalog.hardware import HardwareCatalog
from agentprof.catalog.kvcache import (
    block_host_s_per_token,
    kv_bytes,
    tokenize_s_per_token,
    usable_fraction,
)
from agentprof.errors import TraceFormatError
from agentprof.replay.calibration import Fitted, attn_eff_lookup, deployment_params
from agentprof.replay.costmodel import Deployment, StepParams, call_times
from agentprof.replay.points import PointKey

HEALTHY_HIT = 0.9
THINK_ITERATIONS = 4
"""Fixed-point steps for the users in the server (:func:`predictions`); the map contracts fast (E2E moves little
with one user more or less)."""
MAX_CONC = 8
COLUMNS = ("hw", "model", "framework", "precision", "tp", "ep", "conc", "mean_input_tokens",
           "mean_output_tokens_actual", "server_gpu_cache_hit_rate", "mean_ttft", "mean_itl")


AGENTX_BENCHMARK_S = 1800.0
"""Every AgentX run's profiling window: ``aiperf profile ... --benchmark-duration 1800`` [S47 benchmark_command.txt];
the run then waits 30 s for the requests in flight and cancels them (aiperf.log)."""
COMPLETE_SHARE = 0.9
"""A run whose successful requests span less than this share of :data:`AGENTX_BENCHMARK_S` stopped serving before its
window ended (the B200 TP4 LMCache run at 16 users: 176 done by 9:24, then ``queue=0r/16w`` until the window closed and
its 16 requests in flight were cancelled [S47 aiperf.log]); its means come from the part before the stall, without the
stalled requests, so it is not checked. Complete runs span 1,708–1,830 s."""


def truncated(df: pl.DataFrame) -> pl.Series:
    """Per row: the run stopped completing requests well before its profiling window ended (:data:`COMPLETE_SHARE`)."""
    return (df["duration_seconds"].fill_null(0.0) < COMPLETE_SHARE * AGENTX_BENCHMARK_S).alias("truncated")


def workload_think_s(df: pl.DataFrame) -> float:
    """The users' mean time between a reply and their next call (tool runs and thinking; the AgentX scenario caps idle
    time at 10 s), from the healthy points at concurrency <= 8 — the ones the attention efficiency is fitted on, where
    the server keeps up: each user's cycle ``conc · duration / requests`` less the mean end-to-end latency; the
    median over those points (9.6 s on the shipped data; 6–18 s per point)."""
    ok = df.filter(pl.col("mean_e2el").is_not_null() & (pl.col("num_requests_successful").fill_null(0) > 0)
                   & (pl.col("server_gpu_cache_hit_rate") >= HEALTHY_HIT) & (pl.col("conc") <= MAX_CONC))
    ok = ok.filter(~truncated(ok))
    if not ok.height:
        return 0.0
    z = ok["conc"] * ok["duration_seconds"] / ok["num_requests_successful"] - ok["mean_e2el"]
    return max(float(z.median()), 0.0)


def read_points_csv(path: str | Path, needed: tuple[str, ...]) -> pl.DataFrame:
    """Read a points CSV; unreadable input or missing ``needed`` columns are a one-line error naming the file."""
    p = str(path)
    try:
        df = pl.read_csv(p, infer_schema_length=10000)
    except (OSError, pl.exceptions.ComputeError, pl.exceptions.NoDataError) as e:
        raise TraceFormatError(p, None, f"not a readable CSV ({str(e).splitlines()[0]})") from None
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise TraceFormatError(p, 1, f"missing column(s): {', '.join(missing)}")
    return df


def load_agentic(path: str | Path, server_metrics: str | Path | None = None) -> pl.DataFrame:
    """Read the AgentX points CSV (:data:`COLUMNS` required); with ``server_metrics`` (vLLM's own metrics of the
    runs, ``agentx_server_metrics.csv``) each point carries the mean time its requests waited in the server's
    queue, ``meas_queue`` (:func:`with_server_queue`)."""
    df = read_points_csv(path, COLUMNS)
    return with_server_queue(df, pl.read_csv(server_metrics)) if server_metrics is not None else df


QUEUE_MATCH = 0.03
"""How close a server-metrics run's mean prompt must be to a point's to be that point's run (relative)."""


def with_server_queue(df: pl.DataFrame, metrics: pl.DataFrame) -> pl.DataFrame:
    """``df`` with ``meas_queue``: the mean seconds a request of the point's run spent waiting in vLLM's queue
    (``request_queue_time_seconds`` sum / count), the run being the same hardware, TP, users and offload whose mean
    prompt is within :data:`QUEUE_MATCH` of the point's; null where no run matches. A wait for a running slot or
    for the scheduler is measured there, not modelled: the attention efficiency is fitted without it. Where the
    metrics have them, the same run's mean prefill phase (``meas_prefill``) and first token as vLLM times it from
    its frontend's arrival (``meas_server_ttft``) come along; null otherwise."""
    need = ("hw", "tp", "conc", "offloading", "request_queue_time_seconds_sum", "request_queue_time_seconds_count",
            "request_prompt_tokens_sum", "request_prompt_tokens_count")
    missing = [c for c in need if c not in metrics.columns]
    if missing:
        raise TraceFormatError("agentx server metrics", 1, f"missing column(s): {', '.join(missing)}")

    def mean(metric: str) -> pl.Expr:
        if f"{metric}_sum" not in metrics.columns or f"{metric}_count" not in metrics.columns:
            return pl.lit(None, dtype=pl.Float64)
        return pl.col(f"{metric}_sum") / pl.col(f"{metric}_count")

    m = metrics.with_columns(q=mean("request_queue_time_seconds"), prompt=mean("request_prompt_tokens"),
                             pf=mean("request_prefill_time_seconds"), ttft=mean("time_to_first_token_seconds"))
    out: dict[str, list[float | None]] = {"meas_queue": [], "meas_prefill": [], "meas_server_ttft": []}
    for r in df.iter_rows(named=True):
        c = m.filter((pl.col("hw") == r["hw"]) & (pl.col("tp") == r["tp"]) & (pl.col("conc") == r["conc"])
                     & (pl.col("offloading") == r["offloading"]))
        got: tuple[float | None, ...] = (None, None, None)
        if c.height and r["mean_input_tokens"] is not None:
            c = c.with_columns(d=(r["mean_input_tokens"] / pl.col("prompt") - 1.0).abs()).sort("d")
            if float(c["d"][0]) <= QUEUE_MATCH and c["q"][0] is not None:
                got = (float(c["q"][0]), c["pf"][0], c["ttft"][0])
        for k, v in zip(out, got, strict=True):
            out[k].append(None if v is None else float(v))
    return df.with_columns(*(pl.Series(k, v, dtype=pl.Float64) for k, v in out.items()))


def _params_entry(fitted: Fitted, cat: HardwareCatalog, hw: str, fw: str, model_key: str, prec: str, tp: int,
                  ep: int) -> tuple[Any, str] | None:
    acc = cat.accelerators[hw]
    model = cat.models[model_key]
    cands = [model_key] + [m.key for m in cat.models.values() if m.key != model_key and m.attention == model.attention
                           and bool(m.get("experts")) == bool(model.get("experts"))]
    for mk in cands:
        e, how = fitted.lookup(PointKey(acc.family, hw, fw, mk, prec, "none", f"tp{tp}-ep{ep}"), cat)
        if how.split(" ")[0] not in ("hardware", "family", "prior"):
            return e, f"{e.key} ({how})"
    return None


def accelerator_of(hw: str, cat: HardwareCatalog) -> str:
    """The catalog's accelerator key for a row's ``hw`` (``b200-dgxc`` -> ``b200``)."""
    hw = str(hw).lower()
    return hw if hw in cat.accelerators else hw.split("-")[0]


def deployed_points(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog, attn_eff: float,
                    by_accelerator: Mapping[str, float] | None = None, block_host: bool = True,
                    by_attention: Mapping[str, Mapping[str, float]] | None = None,
                    ) -> Iterator[tuple[dict[str, Any], str, Deployment, StepParams, str]]:
    """Each AgentX row the catalog can place, with its hardware key, its deployment (KV in the dtype the
    framework deployed), the fitted step terms (with the frontend's tokenization time per prompt token the
    catalog lists for the framework and model, measured on the row's hardware where it lists that, and the
    engine's per-block host time over the row's mean prompt added to the per-prefill overhead where the recipe
    runs small KV blocks: ``scheduling.toml [block_host]``) and the calibration level they came from. Attention
    runs at ``by_accelerator[hw]`` where given, else at ``attn_eff``; a model whose attention kind ``by_attention``
    lists (``{"gqa": {"pooled": η, hw: η}}``, ``Fitted.attn_eff_by_attention``) at that kind's instead
    (:func:`~agentprof.replay.calibration.attn_eff_lookup`). ``block_host=False`` leaves the per-block host time
    out (the model before that term, for before/after comparisons)."""
    by_accelerator, by_attention = by_accelerator or {}, by_attention or {}
    for r in df.iter_rows(named=True):
        hw = accelerator_of(r["hw"], cat)
        m = find_model(str(r["model"])) or (cat.models.get("kimi-k2.5") if "kimi" in str(r["model"]).lower() else None)
        prec = str(r["precision"]).lower()
        if hw not in cat.accelerators or m is None or prec not in m.formats:
            continue
        tp, ep = int(r["tp"]), int(r["ep"] or 1)
        got = _params_entry(fitted, cat, hw, str(r["framework"]).lower(), m.key, prec, tp, ep)
        if got is None:
            continue
        entry, how = got
        fw = str(r["framework"]).lower()
        dep = Deployment.as_deployed(m, cat.accelerators[hw], prec, tp, fw,
                                     kv_dtype_bytes=kv_bytes(fw, m.key, hw, prec)[0], expert_parallel=ep)
        p = deployment_params(entry.theta, dep, accept=1.0)
        # the engine's per-block host work over the prompt's blocks holds up the loop like the per-prefill overhead
        per_tok = block_host_s_per_token(fw, m.key, hw)[0] if block_host else 0.0
        blocks_s = per_tok * float(r["mean_input_tokens"] or 0.0)
        eta = attn_eff_lookup(hw, m.attention, attn_eff, by_accelerator, by_attention)
        p = p.with_(attn_eff=eta, t_tok_s=tokenize_s_per_token(fw, m.key, hw)[0],
                    t_req_s=p.t_req_s + blocks_s, attn_fresh_eff=cat.accelerators[hw].attn_fwd_eff or 0.0,
                    dec_attn_eff=dep.decode_attn_eff or 0.0)
        yield r, hw, dep, p, how


def row_mem_util(r: Mapping[str, Any], hw: str, dep: Deployment) -> float:
    """The share of HBM the row's engine gave weights and KV (``catalog/memory.toml``: the AgentX servers' logged KV
    pools), as :func:`agentprof.catalog.kvcache.usable_fraction` states it."""
    return usable_fraction(str(r["framework"]).lower(), dep.model.key, hw, dep.accel.hbm_bytes,
                           dep.weight_bytes_per_gpu, str(r["precision"]).lower(), dep.gpus)[0]


def fit_rows(df: pl.DataFrame, max_conc: int = MAX_CONC) -> pl.DataFrame:
    """The points the attention efficiency is fitted on: healthy (hit rate >= 0.9), concurrency <= ``max_conc``
    (8), measured."""
    return df.filter((pl.col("server_gpu_cache_hit_rate") >= HEALTHY_HIT) & (pl.col("conc") <= max_conc)
                     & pl.col("mean_ttft").is_not_null())


def predictions(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog, attn_eff: float,
                by_accelerator: Mapping[str, float] | None = None, think_s: float | None = None,
                max_conc: int = MAX_CONC, by_attention: Mapping[str, Mapping[str, float]] | None = None,
                ) -> pl.DataFrame:
    """Predicted mean TTFT and ITL for the healthy points up to ``max_conc`` users (the server's measured hit rate
    sets the cached part).
    Each user waits ``think_s`` between a reply and its next call (default :func:`workload_think_s` of ``df``), so
    by Little's law only ``1 + (conc - 1)·E2E/(E2E + think)`` of the ``conc`` users are in the server at a time:
    they make the decode batch, the prefills riding it and the prefill queue (a fixed point on the predicted E2E).
    A row with ``cycle_s`` (each user's measured time from one call to the next) uses ``E2E/cycle`` instead.
    The TTFT's parts come along: the prefill queue (``pred_queue``), the prefill alone with its per-prefill host
    time (``pred_prefill``) and the frontend (``pred_frontend``)."""
    think = workload_think_s(df) if think_s is None else think_s
    rows = []
    for r, hw, dep, p, how in deployed_points(fit_rows(df, max_conc), fitted, cat, attn_eff, by_accelerator,
                                              by_attention=by_attention):
        inp, out, conc = float(r["mean_input_tokens"]), float(r["mean_output_tokens_actual"]), float(r["conc"])
        cached = np.array([r["server_gpu_cache_hit_rate"] * inp])
        inside, cycle = conc, r.get("cycle_s")
        for _ in range(THINK_ITERATIONS + 1):
            t = call_times(dep, p, np.array([inp]), cached, np.array([out]), batch=inside,
                           mem_util=row_mem_util(r, hw, dep))
            e2e = float(t.ttft_s[0] + t.decode_s[0])
            busy = min(e2e / cycle, 1.0) if cycle else e2e / max(e2e + think, 1e-9)
            inside = 1.0 + (conc - 1.0) * busy
        rows.append({"hardware": hw, "tp": dep.gpus, "conc": int(conc), "input_tokens": inp, "calibration": how,
                     "meas_ttft": r["mean_ttft"], "pred_ttft": float(t.ttft_s[0]), "meas_itl": r["mean_itl"],
                     "pred_itl": float(t.decode_s[0]) / max(out - 1.0, 1.0),
                     "pred_queue": float(t.queue_s[0]), "pred_prefill": float(t.prefill_s[0]),
                     "pred_frontend": p.t_tok_s * inp, "meas_queue": r.get("meas_queue")})
    return pl.DataFrame(rows, schema_overrides={"meas_queue": pl.Float64}) if rows else pl.DataFrame()


def summarize(t: pl.DataFrame) -> dict[str, Any]:
    """Median absolute percentage errors of TTFT and ITL, overall and per hardware."""
    if not t.height:
        return {"points": 0}
    t = t.with_columns(((pl.col("pred_ttft") - pl.col("meas_ttft")).abs() / pl.col("meas_ttft")).alias("a_ttft"),
                       ((pl.col("pred_itl") - pl.col("meas_itl")).abs() / pl.col("meas_itl")).alias("a_itl"))
    out: dict[str, Any] = {"points": t.height, "median_ape_ttft": float(t["a_ttft"].median()),
                           "median_ape_itl": float(t["a_itl"].median())}
    for (hw,), g in sorted(t.group_by("hardware"), key=lambda kv: str(kv[0][0])):
        out[f"{hw}_points"] = g.height
        out[f"{hw}_median_ape_ttft"] = float(g["a_ttft"].median())
        out[f"{hw}_median_ape_itl"] = float(g["a_itl"].median())
    return out


def fit_attn_eff(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog) -> tuple[float, dict[str, Any]]:
    """The attention efficiency that best predicts the healthy points' TTFT (least squares on log TTFT,
    golden-section search over [0.02, 2]); returns it with the resulting errors (``points``: how many the
    catalog could place). The recipes' per-block host time (``scheduling.toml [block_host]``) is its own term,
    not absorbed as slower attention. Where an accelerator's runs carry the server's measured queue
    (``meas_queue``, :func:`with_server_queue`), only those points are fitted (:func:`split_measured`), each
    on its first token less that wait against the model's whole first token. vLLM starts a request's queue
    when its engine adds it to the scheduler, between steps [S70]: a wait for another call's prefill falls
    before that (the step in progress) or after it (the step that prefills both), outside the queue, as in the
    model's; what falls inside are waits the model does not price, for a free sequence slot or token budget."""
    df = split_measured(df, cat)

    def cost(log_eta: float) -> float:
        t = predictions(df, fitted, cat, math.exp(log_eta))
        if not t.height:
            return 0.0
        pred, meas = t["pred_ttft"].to_numpy(), t["meas_ttft"].to_numpy()
        q = t["meas_queue"].to_numpy().astype(float)
        known = np.isfinite(q) & (meas - np.nan_to_num(q) > 0)
        # where the server measured its queue (slot and token-budget waits), the first token without it
        meas = np.where(known, meas - np.nan_to_num(q), meas)
        r = np.log(pred / meas)
        return float(r @ r)

    lo, hi = math.log(0.02), math.log(2.0)
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = cost(a), cost(b)
    for _ in range(40):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = cost(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = cost(b)
        if hi - lo < 1e-3:
            break
    eta = math.exp((lo + hi) / 2)
    return eta, {"attn_eff": eta, "healthy_hit_rate_min": HEALTHY_HIT, "max_concurrency": MAX_CONC,
                 **summarize(predictions(df, fitted, cat, eta))}


def split_measured(df: pl.DataFrame, cat: HardwareCatalog) -> pl.DataFrame:
    """The rows whose first token the server split itself: where any of an accelerator's rows carry the measured
    queue (``meas_queue``), only those rows of it; an accelerator without any keeps all of its rows. A run
    without the server's metrics cannot tell a prefill from a wait for a sequence slot (sub-agents fan out past
    ``--max-num-seqs`` = users: 2.2 s of MI355X's 3.8 s at 2 users), which the model does not price."""
    if "meas_queue" not in df.columns or not df.height:
        return df
    acc = pl.Series([accelerator_of(h, cat) for h in df["hw"].to_list()])
    has = df["meas_queue"].is_not_null()
    split = set(acc.filter(has).to_list())
    return df.filter(has | ~acc.is_in(sorted(split)))


Refit = Callable[[pl.DataFrame], Fitted]
"""The fitted terms refitted on the rows a hold-out keeps (``enginestep.refit_with``: the engine decode steps)."""


def held_out_predictions(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog, refit: Refit | None = None
                         ) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    """Each accelerator's healthy points predicted as if never measured: the attention efficiency fitted on the
    other accelerators' points (:func:`fit_attn_eff`) and their users' think time, and with ``refit`` the terms it
    gives for those points (an engine's decode step that the held-out points set otherwise). Returns (its rows, its
    predictions with the ``eta`` used) per accelerator; none where only one accelerator has points."""
    rows = fit_rows(df)
    keys = pl.Series([accelerator_of(h, cat) for h in rows["hw"].to_list()])
    return [(own, p) for _, own, p in _leave_one_out(rows, keys, fitted, cat, refit=refit)]


def held_out_longest(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog, refit: Refit | None = None
                     ) -> tuple[pl.DataFrame, pl.DataFrame, float]:
    """The longest prompts predicted from the shorter ones: the healthy points whose mean prompt is above the
    median are held out; each accelerator's attention efficiency (:func:`fit_attn_eff`) and the users' think time
    come from its points at or below it, and with ``refit`` the terms it gives for those points (an engine's decode
    step). Returns (held-out rows, their predictions with the ``eta`` used, the cut in tokens); an accelerator
    without shorter points takes the pooled efficiency of all shorter points."""
    rows = fit_rows(df)
    cut = float(rows["mean_input_tokens"].cast(pl.Float64).median() or 0.0)
    short, long_ = rows.filter(pl.col("mean_input_tokens") <= cut), rows.filter(pl.col("mean_input_tokens") > cut)
    if not short.height or not long_.height:
        return long_, pl.DataFrame(), cut
    terms = refit(short) if refit is not None else fitted
    keys = pl.Series([accelerator_of(h, cat) for h in short["hw"].to_list()])
    etas = {k: fit_attn_eff(short.filter(keys == k), terms, cat)[0] for k in sorted(set(keys.to_list()))}
    # the pooled fallback only where a held-out accelerator has no shorter points of its own
    bare = {accelerator_of(h, cat) for h in long_["hw"].to_list()} - set(etas)
    pooled = fit_attn_eff(short, terms, cat)[0] if bare else next(iter(etas.values()))
    p = predictions(long_, terms, cat, pooled, by_accelerator=etas, think_s=workload_think_s(short))
    return long_, p.with_columns(eta=pl.Series([etas.get(h, pooled) for h in p["hardware"].to_list()])), cut


def _leave_one_out(rows: pl.DataFrame, keys: pl.Series, fitted: Fitted, cat: HardwareCatalog,
                   only: str | None = None, refit: Refit | None = None
                   ) -> Iterator[tuple[str, pl.DataFrame, pl.DataFrame]]:
    """Per value of ``keys`` (``only`` that one, where given): its rows and their predictions (``eta`` column) with
    the attention efficiency and the users' think time of the other rows (and ``refit``'s terms for them, where
    given); nothing where no other rows are left."""
    for key in sorted(set(keys.to_list()) if only is None else {only} & set(keys.to_list())):
        own, other = rows.filter(keys == key), rows.filter(keys != key)
        if not other.height:
            continue
        terms = refit(other) if refit is not None else fitted
        eta, _ = fit_attn_eff(other, terms, cat)
        yield key, own, predictions(own, terms, cat, eta, think_s=workload_think_s(other)).with_columns(
            eta=pl.lit(eta))


def held_out_summary(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog, refit: Refit | None = None
                     ) -> dict[str, Any]:
    """The errors of :func:`held_out_predictions` (``held_out_points``, ``held_out_median_ape_ttft`` / ``_itl``):
    what the longest prompts' error is when they did not set the efficiency (nor, with ``refit``, the decode
    step) that predicts them."""
    parts = [p for _, p in held_out_predictions(df, fitted, cat, refit) if p.height]
    if not parts:
        return {}
    s = summarize(pl.concat(parts, how="diagonal_relaxed"))
    return {"held_out_points": s["points"], "held_out_median_ape_ttft": s["median_ape_ttft"],
            "held_out_median_ape_itl": s["median_ape_itl"]}


def fit_attn_eff_per_accelerator(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog
                                 ) -> tuple[dict[str, float], dict[str, Any]]:
    """The attention efficiency of each accelerator, fitted (:func:`fit_attn_eff`) on that accelerator's own
    healthy concurrency <= 8 points only: the prefill attention kernels differ per accelerator (vLLM runs FlashAttention /
    FlashInfer MLA on B200 and AITER's MLA on MI355X, the runs' server logs [S47], [S54]), so one pooled value is
    the accelerator with the most points. Returns ``{accelerator: eta}`` and, per accelerator, the eta and its
    number of fit points (``<hw>_attn_eff``, ``<hw>_attn_eff_points``)."""
    rows = fit_rows(df)
    keys = [accelerator_of(h, cat) for h in rows["hw"].to_list()]
    etas: dict[str, float] = {}
    info: dict[str, Any] = {}
    for hw in sorted(set(keys)):
        own = rows.filter(pl.Series([k == hw for k in keys]))
        eta, fit_info = fit_attn_eff(own, fitted, cat)
        n = fit_info["points"]
        if not n:  # the catalog cannot place them: nothing was fitted
            continue
        etas[hw] = eta
        info[f"{hw}_attn_eff"] = etas[hw]
        info[f"{hw}_attn_eff_points"] = n
    return etas, info


def attention_rows(df: pl.DataFrame, cat: HardwareCatalog, attention: str) -> pl.DataFrame:
    """The rows of a points table whose model the catalog knows and runs ``attention`` kernels (``gqa``, ``mla``)."""
    keep = []
    for name in df["model"].to_list():
        m = find_model(str(name)) if name else None
        keep.append(m is not None and m.attention == attention)
    return df.filter(pl.Series(keep, dtype=pl.Boolean))


def stack_keys(df: pl.DataFrame, cat: HardwareCatalog) -> list[str]:
    """Each row's stack: ``accelerator/model/precision/tpN`` (the model as the row names it)."""
    return [f"{accelerator_of(h, cat)}/{m}/{p}/tp{t}" for h, m, p, t in
            df.select("hw", "model", "precision", "tp").iter_rows()]


def stacks_held_out(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog, only: str | None = None
                    ) -> pl.DataFrame:
    """Each stack's (hardware, model, precision, tensor parallel; ``only`` that one, where given) healthy points
    predicted with the attention efficiency fitted on the other stacks' (:func:`fit_attn_eff`) and their users'
    think time; ``eta`` and ``stack`` say which. Empty where there is only one stack."""
    rows = fit_rows(df)
    keys = pl.Series(stack_keys(rows, cat))
    out = []
    for key, own, p in _leave_one_out(rows, keys, fitted, cat, only):
        if p.height == own.height:  # every row placed: the measured end-to-end time and output tokens ride along
            p = p.with_columns(meas_e2e=own["mean_e2el"].cast(pl.Float64),
                               output_tokens=own["mean_output_tokens_actual"].cast(pl.Float64))
        out.append(p.with_columns(stack=pl.lit(key)))
    return pl.concat(out, how="diagonal_relaxed") if out else pl.DataFrame()


REQUEST_COLUMNS = ("hw", "tp", "conc", "offloading", "conversation_id", "turn_index", "request_start_ns",
                   "request_ack_ns", "input_sequence_length")


def _alone(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per window [start, end) (sorted by start), whether no other window meets it: every earlier one ended by its
    start and the next starts after its end."""
    prev_end = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], end[:-1]]))
    next_start = np.concatenate([start[1:], [np.iinfo(np.int64).max]])
    return (prev_end <= start) & (next_start >= end)


def frontend_time(requests: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """The serving frontend's time per request from AgentX per-request exports (AIPerf's ``profile_export.jsonl``:
    ``request_ack_ns − request_start_ns``, from sending the request to the server acknowledging it: parsing the
    body, the chat template and tokenizing the whole prompt, before the engine sees it), per hardware: least
    squares ``a + b·prompt tokens`` over the calls whose window overlaps no other call's (a single-process
    frontend serves overlapping requests one after the other). Returns, per hardware, ``s_per_token`` (b),
    ``s_fixed`` (a), ``calls`` used, ``calls_total``, ``residual_sd_s`` and the runs (tp, conc, offloading)."""
    missing = [c for c in REQUEST_COLUMNS if c not in requests.columns]
    if missing:
        raise TraceFormatError("agentx requests", 1, f"missing column(s): {', '.join(missing)}")
    out: dict[str, dict[str, Any]] = {}
    for (hw,), g in sorted(requests.group_by("hw"), key=lambda kv: str(kv[0][0])):
        xs, ys, total, runs = [], [], 0, set()
        for key, run in g.group_by("tp", "conc", "offloading"):
            runs.add(tuple(key))
            start = run["request_start_ns"].to_numpy().astype(np.int64)
            ack = run["request_ack_ns"].to_numpy().astype(np.int64)
            order = np.argsort(start)
            start, ack = start[order], ack[order]
            tokens = run["input_sequence_length"].to_numpy().astype(float)[order]
            alone = _alone(start, ack)  # in the frontend: no other call's window [start, ack) meets its own
            total += len(start)
            xs.append(tokens[alone])
            ys.append((ack[alone] - start[alone]) / 1e9)
        x, y = np.concatenate(xs), np.concatenate(ys)
        if x.size < 3:
            continue
        a = np.column_stack([np.ones_like(x), x])
        coef = np.linalg.lstsq(a, y, rcond=None)[0]
        out[str(hw)] = {"s_per_token": float(coef[1]), "s_fixed": float(coef[0]), "calls": int(x.size),
                        "calls_total": total, "residual_sd_s": float(np.std(y - a @ coef)),
                        "runs": sorted(runs)}
    return out


def _engine_calls(run: pl.DataFrame) -> pl.DataFrame:
    """One run's calls with their engine time (``ttft − (ack − start)``: after the frontend acknowledged them), the
    tokens new since the conversation's previous call (prompt − previous prompt − previous output; the previous
    call in time, and only where it is the previous turn), whether the call was alone in the server (its [start,
    first token) meets no other call's) and whether its prompt is new to the run (``first_time``: a conversation
    sent again finds every prompt cached, whatever its turn-by-turn difference says)."""
    r = run.sort("request_start_ns")
    start = r["request_start_ns"].to_numpy().astype(np.int64)
    first = start + (r["ttft_ms"].to_numpy() * 1e6).astype(np.int64)
    alone = _alone(start, first)
    seen: set[tuple[Any, Any]] = set()
    first_time = []
    for key in r.select("conversation_id", "input_sequence_length").iter_rows():
        first_time.append(key not in seen)
        seen.add(key)
    r = r.with_columns(engine_s=pl.col("ttft_ms") / 1e3 - (pl.col("request_ack_ns") - pl.col("request_start_ns")) / 1e9,
                       alone=pl.Series(alone), first_time=pl.Series(first_time))
    # consecutive in time within the conversation (a conversation sent again restarts its turns)
    prev = r.sort("conversation_id", "request_start_ns").with_columns(
        new=pl.when(pl.col("turn_index") == pl.col("turn_index").shift(1).over("conversation_id") + 1).then(
            pl.col("input_sequence_length") - pl.col("input_sequence_length").shift(1).over("conversation_id")
            - pl.col("output_sequence_length").shift(1).over("conversation_id"))).select(
        "request_start_ns", "new")
    return r.join(prev, on="request_start_ns", how="left")


def calls_by_deployment(requests: pl.DataFrame) -> Iterator[tuple[str, int, pl.DataFrame]]:
    """Per (hardware, tensor-parallel size) of AgentX per-request exports: its runs' calls (:func:`_engine_calls`,
    each run on its own), in a stable order; a clear error for an export without the columns they need."""
    missing = [c for c in (*REQUEST_COLUMNS, "output_sequence_length", "ttft_ms") if c not in requests.columns]
    if missing:
        raise TraceFormatError("agentx requests", 1, f"missing column(s): {', '.join(missing)}")
    for (hw, tp), g in sorted(requests.group_by("hw", "tp"), key=lambda kv: str(kv[0])):
        yield str(hw), int(tp), pl.concat([_engine_calls(run) for _, run in g.group_by("conc", "offloading")])


def probe_deployment(points: pl.DataFrame, hw: str, fitted: Fitted, cat: HardwareCatalog, attn_eff: float,
                     tp: int | None = None, block_host: bool = True
                     ) -> tuple[dict[str, Any], str, Deployment, StepParams] | None:
    """The first AgentX row of hardware ``hw`` (and ``tp`` where given) as :func:`deployed_points` deploys it:
    (row, accelerator key, deployment, step terms), or None where the catalog cannot place it."""
    sel = pl.col("hw") == hw if tp is None else (pl.col("hw") == hw) & (pl.col("tp") == tp)
    for r, acc, dep, p, _ in deployed_points(points.filter(sel).head(1), fitted, cat, attn_eff,
                                              block_host=block_host):
        return r, acc, dep, p
    return None


SMALL_NEW = 1000
"""New tokens at most for a call :func:`engine_host_time` fits (its prefill is a small part of its engine time)."""


def engine_host_time(requests: pl.DataFrame,
                     modelled: Callable[[str, int, np.ndarray, np.ndarray], np.ndarray] | None = None
                     ) -> dict[str, dict[str, Any]]:
    """The engine's own time per prompt token before the first token, from AgentX per-request exports: over the
    calls alone in the server whose prompt is new to the run and whose new tokens (since the conversation's
    previous call) are 1 to :data:`SMALL_NEW`, robust least squares (soft-L1, scale 50 ms: a stall does not set
    it) of engine time (``ttft − (ack − start)``, after the frontend) = ``a + b·prompt tokens``, per hardware. A
    prompt replayed in the run (fully cached, no prefill) is left out, as are calls with more new tokens, whose
    prefill would dominate. ``b`` is what the engine spends
    per prompt token around a small prefill (hashing and looking up the prompt's blocks, re-reading its prefix);
    ``a`` the per-call rest. ``modelled(hw, tp, prompt, new)``, where given, is taken off each call's engine time
    first (the model's own prefill of those calls: what is left is the engine's time the model does not price).
    Returns, per hardware, ``s_per_token`` (b), ``s_fixed`` (a), ``calls``,
    ``calls_total``, ``residual_mad_s`` (median absolute residual) and ``tp``."""
    from scipy.optimize import least_squares

    out: dict[str, dict[str, Any]] = {}
    for hw, tp, calls in calls_by_deployment(requests):
        use = calls.filter(pl.col("first_time") & pl.col("alone") & pl.col("new").is_between(1, SMALL_NEW))
        x = use["input_sequence_length"].cast(pl.Float64).to_numpy()
        y = use["engine_s"].to_numpy()
        if x.size < 8:
            continue
        if modelled is not None:
            y = y - modelled(hw, tp, x, use["new"].cast(pl.Float64).to_numpy())
        a = np.column_stack([np.ones_like(x), x])
        scale = np.array([0.1, 1e-6])
        fit = least_squares(_scaled_residual, x0=np.ones(2), loss="soft_l1", f_scale=0.05, args=(a, y, scale))
        coef = fit.x * scale
        res = y - a @ coef
        out[hw] = {"s_per_token": float(coef[1]), "s_fixed": float(coef[0]), "calls": int(x.size),
                   "calls_total": calls.height, "residual_mad_s": float(np.median(np.abs(res))), "tp": tp}
    return out


def _scaled_residual(b: np.ndarray, x: np.ndarray, y: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return x @ (b * scale) - y


def call_attn_eff(requests: pl.DataFrame, points: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog
                  ) -> dict[str, dict[str, Any]]:
    """Prefill attention efficiency *per call*, from AgentX per-request exports: over the calls alone in the server
    whose new tokens are known (:func:`_engine_calls`), engine time = a + b·new + c·new·(prompt − new/2) + d·prompt
    by robust least squares (soft-L1, scale 0.1 s: compile spikes and stalls do not set it); η = the deployment's
    attention seconds per (new × attended) token pair at η = 1 over ``c``. Beside it the run's mean and median
    engine time: a mean-fitted η (``fitted.attn_eff_by_accelerator``) also carries the warm-ups and stalls a mean
    holds. Per hardware: ``eta_call``, ``coef`` (a, b, c, d), ``calls``, ``calls_total``, ``mean_engine_s``,
    ``median_engine_s``."""
    from scipy.optimize import least_squares

    out: dict[str, dict[str, Any]] = {}
    for hw, tp, calls in calls_by_deployment(requests):
        got = probe_deployment(points, hw, fitted, cat, 1.0, tp)
        use = calls.filter(pl.col("alone") & pl.col("first_time") & pl.col("new").is_not_null() & (pl.col("new") >= 0))
        if got is None or use.height < 8:
            continue
        dep = got[2]
        # attention seconds per token pair at η = 1: a prefill's attention over its own new tokens at 1,000 cached
        # (the prefix's re-expansion, which grows with the prompt alone, left to the d·prompt term)
        pair_s = float(dep.prefill_peak_s(1.0, 1000.0, 1.0) - dep.prefill_peak_s(1.0, 0.0, 1.0)
                       - dep.context_expand_flops(1.0, 1000.0) / dep.attn_peak / dep.gpus) / 1000.0
        new = use["new"].cast(pl.Float64).to_numpy()
        prompt = use["input_sequence_length"].cast(pl.Float64).to_numpy()
        x = np.column_stack([np.ones_like(new), new, new * (prompt - new / 2.0), prompt])
        y = use["engine_s"].to_numpy()
        scale = np.array([0.1, 1e-5, 3e-10, 3e-7])
        fit = least_squares(_scaled_residual, x0=np.ones(4), loss="soft_l1", f_scale=0.1, args=(x, y, scale))
        coef = fit.x * scale
        eng = calls["engine_s"].to_numpy()
        out[str(hw)] = {"eta_call": float(pair_s / coef[2]) if coef[2] > 0 else float("nan"),
                        "coef": [float(c) for c in coef],
                        "calls": use.height, "calls_total": calls.height, "tp": int(tp),
                        "mean_engine_s": float(eng.mean()), "median_engine_s": float(np.median(eng))}
    return out
