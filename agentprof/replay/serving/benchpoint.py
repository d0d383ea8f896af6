"""InferenceX benchmark points as a special case of the serving simulation (``devices check --simulate``).

A point is ``conc`` closed-loop clients sending fixed-length requests back to back (input and output lengths
uniform in [0.8 L, L] as the benchmark draws them, no prefix reuse). Each point runs through the same engine
and step costs as agent sessions; its median TTFT, TPOT and end-to-end latency replace the analytic formulas'
queueing and interference terms. Disaggregated points run on their pools
(:mod:`agentprof.replay.serving.pools`): the row's prefill and decode workers, the prompt's KV handed over the
link the layout implies, each decode worker running at most the recipe's decode slots where the catalog lists
them (``decode_slots.toml``); the largest (15,000 clients) run whole. A point with more clients than
:data:`SLICE_CLIENTS` would run as one of ``copies`` identical slices (each simulated request stands for
``copies`` synchronized ones: batches, chunks and KV scale by it), which bounds the event count; the
synchronized copies batch into the same prefill steps, so an unsaturated prefill pool's TTFT comes out high
(1,024 clients as 8 slices: 1.6x), hence the high threshold.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.catalog.kvcache import tokenize_s_per_token
from agentprof.catalog.serving import load_serving
from agentprof.replay.agentic import AGENTX_BENCHMARK_S, COMPLETE_SHARE, workload_think_s
from agentprof.replay.calibration import Fitted, borrowed_handoff, deployment_params, is_disaggregated
from agentprof.replay.costmodel import Deployment
from agentprof.replay.fidelity import METRICS, Check, check, summarize
from agentprof.replay.points import _layout, expert_ranks, point_attn_eff, point_deployment, point_features
from agentprof.replay.serving.pools import Pools
from agentprof.replay.serving.scheduler import Engine, Options
from agentprof.replay.serving.sessions import SessionPlan
from agentprof.replay.serving.stepcost import StepCost

MEM_UTIL = 0.9
SLICE_CLIENTS = 16384
"""Most clients a benchmark point simulates one by one; above it the point runs as identical slices (the
aggregated points go to 128 clients, the disaggregated ones to 15,000: all run whole)."""
MIN_REQUESTS = 256
WARMUP = 1  # leading requests per client left out of the statistics (the synchronized first wave)
BENCH_PROMPTS_PER_CLIENT = 10
"""InferenceX's client sends ``--num-prompts = 10 x CONC`` at ``--max-concurrency CONC`` and measures them all
(its ``--num-warmups = 2 x CONC`` run before the clock starts, and the measured run then starts every client
at once) [S1-lib benchmark_lib.sh run_benchmark_serving]: the synchronized first wave is one request in ten."""


AGENTX_LMCACHE_CPU_BYTES = 2500 * 2**30
"""The CPU tier of the AgentX LMCache runs: ``lmcache server --l1-size-gb 2500`` [S47 lmcache_command.txt of the B200
runs; the MI355X LMCache runs are taken to use the same recipe (estimate)]: ~76M tokens of Kimi K2.5's FP8 latent,
every user's context many times over."""


def benchmark_plan(conc: int, isl: float, osl: float, per_client: int, shared_fraction: float = 0.0,
                   spread: float = 0.2, users: int | None = None, think_s: float = 0.0) -> SessionPlan:
    """``conc`` clients of ``per_client`` requests each, lengths spread uniformly over [(1 − spread) L, L];
    the first ``shared_fraction`` of every prompt is one prefix all requests share (a measured hit rate), or,
    with ``users``, one prefix per user (request ``j`` is user ``j % users``'s: its own conversation so far),
    whose blocks the cache keeps or evicts like any others. With ``think_s`` each client is one user who waits
    between its calls (tools, thinking: uniform in [0, 2·think_s], mean ``think_s``) and whose calls share its
    own prefix."""
    n = conc * per_client
    u = (np.arange(n) * 0.6180339887) % 1.0  # a low-discrepancy spread instead of random draws
    inp = np.round(isl * (1.0 - spread + spread * u))
    out = np.round(osl * (1.0 - spread + spread * ((u * 7.0) % 1.0)))
    start = np.arange(conc + 1, dtype=np.int64) * per_client
    z = np.zeros(n)
    gap = z.copy()
    if think_s > 0:  # each client's calls after its first wait a think time, uniform in [0, 2 think_s]
        gap = 2.0 * think_s * ((np.arange(n) * 0.7548776662) % 1.0)
        gap[start[:-1]] = 0.0
    offs = np.zeros(n + 1, dtype=np.int64)
    ids = np.zeros(0, dtype=np.int64)
    n_nodes = 0
    if shared_fraction > 0:
        blocks = (inp // 64).astype(np.int64)
        shared = np.minimum(int(shared_fraction * isl // 64), blocks)
        np.cumsum(blocks, out=offs[1:])
        pos = np.arange(int(offs[-1])) - np.repeat(offs[:-1], blocks)
        req = np.repeat(np.arange(n), blocks)
        own = pos >= np.repeat(shared, blocks)
        top = int(shared.max()) if shared.size else 0
        k = max(users or 1, 1)
        # the shared prefix, or the request's user's: a client is one user when the clients think between calls
        owner = req // per_client if think_s > 0 else req % k
        prefix = pos + top * (owner if users else 0)
        ids = np.where(own, k * top + offs[:-1][req] + pos, prefix).astype(np.int64)  # unique suffix
        n_nodes = int(ids.max()) + 1 if ids.size else 0
    return SessionPlan(
        session_ids=[f"client-{i}" for i in range(conc)], start=start, head_s=np.zeros(conc), tail_s=np.zeros(conc),
        recorded_s=np.ones(conc), gap_s=gap, input_tokens=inp, output_tokens=np.maximum(out, 1.0),
        fixed_s=np.full(n, np.nan), node_offsets=offs, node_ids=ids, block_size=64, n_nodes=n_nodes, span_ids=[str(i) for i in range(n)], trace_ids=["bench"] * n, models=[None] * n,
        cache_read=z.copy(), cache_write=z.copy(), reuse_tokens=z.copy())


def simulate_point(dep: Deployment, params: Any, conc: int, isl: float, osl: float, budget: float,
                   shared_fraction: float = 0.0, spread: float = 0.2,
                   stat: Any = np.nanmedian, mem_util: float = MEM_UTIL, per_client: int | None = None,
                   warmup: int = WARMUP, rate_per_s: float | None = None, users: int | None = None,
                   detail: dict | None = None, cpu_tokens: float = 0.0,
                   think_s: float = 0.0) -> tuple[float, float, float]:
    """TTFT, TPOT and end-to-end latency (``stat``: median by default) of one benchmark point in the simulation:
    ``per_client`` requests per client (default: enough for ``MIN_REQUESTS``), the first ``warmup`` of each
    client left out. With ``rate_per_s`` the ``conc`` users do not send back to back: requests arrive as a
    Poisson process at that rate (users between calls: tools, thinking), at most ``conc`` in flight, and the
    first ``conc`` requests (the fill) are left out. ``think_s`` instead keeps the clients closed loops that wait
    that long on average between calls (:func:`benchmark_plan`). With ``users`` the ``shared_fraction`` prefix is each
    user's own and starts cold (the cache decides what hits); ``cpu_tokens`` adds an LMCache-style CPU tier of
    that many tokens (its hits load over the host link); ``detail`` receives the simulated hit shares (``hit_share``:
    HBM, ``cpu_hit_share``: the CPU tier)."""
    cost = StepCost(dep, params, mem_util, 64e9, 25e9)
    top = int(shared_fraction * isl // 64)
    # the measured hits: one shared prefix starts cached
    warm = np.arange(top, dtype=np.int64) if top and not users else None
    if rate_per_s:
        n = max(MIN_REQUESTS, 8 * conc)
        plan = benchmark_plan(n, isl, osl, 1, shared_fraction, spread, users)
        opt = Options(concurrency=conc, replicas=1, budget_tokens=budget, warm_ids=warm,
                      arrival_rate_per_h=3600.0 * rate_per_s, cpu_blocks=cpu_tokens / 64)
        eng = Engine(plan, cost, opt).run()
        keep = eng.req_call >= min(conc, n // 4)
    else:
        per_client = per_client or max(2, math.ceil(MIN_REQUESTS / conc))
        plan = benchmark_plan(conc, isl, osl, per_client, shared_fraction, spread, users, think_s)
        eng = Engine(plan, cost, Options(concurrency=conc, replicas=1, budget_tokens=budget, warm_ids=warm,
                                         cpu_blocks=cpu_tokens / 64)).run()
        keep = (eng.req_call % per_client) >= min(warmup, per_client - 1)
    if detail is not None:
        tot = max(eng.inp[keep].sum(), 1.0)
        detail["hit_share"] = float(eng.hits[keep, 0].sum() / tot)
        detail["cpu_hit_share"] = float(eng.hits[keep, 1].sum() / tot)
    ttft = (eng.first_t - eng.issue_t)[keep]
    tpot = np.where(eng.out > 1, (eng.done_t - eng.first_t) / np.maximum(eng.out - 1.0, 1.0), np.nan)[keep]
    e2e = (eng.done_t - eng.issue_t)[keep]
    return float(stat(ttft)), float(stat(tpot)), float(stat(e2e))


def slices(conc: int, most: int = SLICE_CLIENTS) -> tuple[int, float]:
    """(simulated clients, copies each stands for) of a closed loop of ``conc`` clients."""
    if conc <= most:
        return conc, 1.0
    sim = max(round(conc / math.ceil(conc / most)), 1)
    return sim, conc / sim


def simulate_pools_point(pre: Deployment, pre_p: Any, dec: Deployment, dec_p: Any, n_prefill: int, n_decode: int,
                         conc: int, isl: float, osl: float, budget: float, mem_util: float = MEM_UTIL,
                         per_client: int = BENCH_PROMPTS_PER_CLIENT, spread: float = 0.2,
                         link_bw: float | None = None, stat: Any = np.nanmedian, most: int = SLICE_CLIENTS,
                         detail: dict | None = None, decode_slots: float | None = None,
                         overlap_comm: bool = True, batch: float | None = None,
                         requests: float = math.inf) -> tuple[float, float, float]:
    """TTFT, TPOT and end-to-end latency (``stat``) of a disaggregated benchmark point: ``conc`` closed-loop
    clients, ``n_prefill`` prefill workers of ``pre`` and ``n_decode`` decode workers of ``dec`` with their own
    free terms, the KV handed over the layout's link (``link_bw`` bytes/s per accelerator overrides it).
    ``decode_slots``: sequences all decode workers run at once (the recipe's; None: their KV pool bounds them).
    ``overlap_comm``: False where the prefill workers' batched prompts each pay their collectives (:class:`Pools`).
    ``batch``: prompt tokens a prefill pass holds before it takes no further prompt (None: ``budget``);
    ``requests``: prompts a prefill worker holds at once (its recipe's cap, all its ranks).
    ``detail`` receives the engine result, the pools and the slicing."""
    sim, copies = slices(conc, most)
    pcost = StepCost(pre, pre_p, mem_util, 64e9, 25e9, copies=copies)
    dcost = StepCost(dec, dec_p, mem_util, 64e9, 25e9, copies=copies)
    pools = Pools.of(pcost, dcost, n_prefill, n_decode, link_bw, decode_slots, overlap_comm)
    plan = benchmark_plan(sim, isl, osl, per_client, spread=spread)
    opt = Options(concurrency=sim, replicas=1, budget_tokens=budget / copies,
                  batch_tokens=None if batch is None else batch / copies,
                  batch_prompts=max(requests / copies, 1.0))
    eng = Engine(plan, dcost, opt, pools).run()
    if detail is not None:
        detail.update({"engine": eng, "pools": pools, "clients": sim, "copies": copies})
    ttft = eng.first_t - eng.issue_t
    tpot = np.where(eng.out > 1, (eng.done_t - eng.first_t) / np.maximum(eng.out - 1.0, 1.0), np.nan)
    e2e = eng.done_t - eng.issue_t
    return float(stat(ttft)), float(stat(tpot)), float(stat(e2e))


def _pools_of_row(row: dict, key: Any, cat: HardwareCatalog, kv_b: float,
                  deps: dict[tuple, Deployment]) -> tuple[Deployment, int, Deployment, int]:
    """The prefill and decode deployments of a disaggregated row and their worker counts, as
    :func:`agentprof.replay.points.point_features` reads them (TRT-LLM's wide-EP throughput decode runs
    attention data-parallel)."""
    _, gp, npw, gd, ndw, dpa_p, dpa_d, tp, ep = _layout(row, True)
    acc, model = cat.accelerators[key.hardware], cat.models[key.model]

    def dep(g: int, dpa: bool, e: int = 1) -> Deployment:
        return point_deployment(deps, model, acc, key.precision, g, dpa, kv_b, e, key.framework)

    return dep(gp, dpa_p), npw, dep(gd, dpa_d, expert_ranks(ep, gd)), ndw


def simulate_check(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog | None = None) -> Check:
    """Like :func:`agentprof.replay.fidelity.check`, with aggregated points predicted by the simulation."""
    cat = cat or load_catalog()
    base = check(df, fitted, cat)
    f = point_features(df, cat)
    t = base.table
    rows = df.select([c for c in df.columns if c not in ("notes", "source_file", "provenance")]).to_dicts()
    pred = {m: t[f"pred_{m}"].to_numpy().astype(float).copy() for m in METRICS}
    simulated = np.zeros(t.height, dtype=bool)
    eta = point_attn_eff(f, fitted.attn_eff)  # as the equations take it: the kernel's sourced figure, else the global
    deps: dict[tuple, Deployment] = {}
    for j, (key, row) in enumerate(zip(f.keys, rows, strict=True)):
        if key is None or not t["covered"][j]:
            continue
        tok = tokenize_s_per_token(key.framework, key.model, key.hardware)[0]  # the frontend, as the equations
        if f.disagg[j]:
            kv_b = float(f.kv_bytes[j])
            try:
                pre, npw, dec, ndw = _pools_of_row(row, key, cat, kv_b, deps)
            except CatalogError:
                continue
            e, _ = fitted.lookup(key, cat)
            # the fitted hand-off (decode steps before the first token leaves the decode worker), as the
            # equations take it: a configuration borrowing an aggregated sibling takes the disaggregated stacks'
            hand = (e.param("handoff") if is_disaggregated(e.attrs.get("framework", ""))
                    else borrowed_handoff(fitted, key))
            pre_p = deployment_params(e.theta, pre, accept=1.0).with_(attn_eff=eta[j], t_tok_s=tok)
            dec_p = deployment_params(e.theta, dec, accept=None if f.mtp[j] else 1.0).with_(
                attn_eff=eta[j], wait_steps=float(f.work.wait_steps[j]) + hand,
                draft_tokens=float(f.draft[j]), t_tok_s=tok, dec_attn_eff=dec.decode_attn_eff or 0.0)
            budget = float(f.budget[j])  # the recipe's prefill budget, else the engine's (point_features)
            # the recipe's decode slots, as the equations bound the running batch (point_features)
            slots = None if np.isnan(f.slots[j]) else float(f.slots[j])
            ttft, tpot, e2e = simulate_pools_point(pre, pre_p, dec, dec_p, npw, ndw, int(row["conc"]),
                                                   float(row["isl"]), float(row["osl"]), budget,
                                                   mem_util=float(f.mem_util[j]), decode_slots=slots,
                                                   overlap_comm=not f.work.pf_serial_s[j] > 0,
                                                   # the batch budget is each data-parallel attention rank's:
                                                   # the worker's pass holds all of theirs
                                                   batch=float(f.batch[j] * f.work.pf_ranks[j]),
                                                   requests=float(f.requests[j]))
            pred["ttft"][j], pred["tpot"][j], pred["e2e"][j] = ttft, tpot, e2e
            simulated[j] = True
            continue
        acc = cat.accelerators[key.hardware]
        model = cat.models[key.model]
        dpa = bool(f.dpa_dec[j])
        g = int(f.g_dec[j])
        kv_b = float(f.kv_bytes[j])
        ep = expert_ranks(_layout(row, False)[8], g)
        try:
            dep = point_deployment(deps, model, acc, key.precision, g, dpa, kv_b, ep, key.framework)
        except CatalogError:
            continue
        e, _ = fitted.lookup(key, cat)
        # the terms as the fit used them: KV in the recipe's dtype, the points' memory fraction, the recipe's
        # scheduler interval before the first token, the steps its scheduler launches ahead and whether it runs
        # prefill alone
        p = deployment_params(e.theta, dep, accept=None if f.mtp[j] else 1.0).with_(
            attn_eff=eta[j], wait_steps=float(f.work.wait_steps[j]), ahead_steps=float(f.work.ahead[j]),
            prefill_alone=bool(f.work.pf_alone[j]), draft_tokens=float(f.draft[j]), t_tok_s=tok,
            dec_attn_eff=dep.decode_attn_eff or 0.0)
        budget = float(f.budget[j])
        ttft, tpot, e2e = simulate_point(dep, p, int(row["conc"]), float(row["isl"]), float(row["osl"]), budget,
                                         mem_util=float(f.mem_util[j]), per_client=BENCH_PROMPTS_PER_CLIENT,
                                         warmup=0)
        pred["ttft"][j], pred["tpot"][j], pred["e2e"][j] = ttft, tpot, e2e
        simulated[j] = True
    t = t.with_columns(*(pl.Series(f"pred_{m}", pred[m]) for m in METRICS), pl.Series("simulated", simulated))
    for m in METRICS:
        t = t.with_columns(
            pl.when(pl.col("covered") & (pl.col(f"meas_{m}") > 0))
            .then((pl.col(f"pred_{m}") - pl.col(f"meas_{m}")).abs() / pl.col(f"meas_{m}"))
            .otherwise(None).alias(f"ape_{m}"))
    n_left = int((t["covered"] & ~t["simulated"]).sum())
    n_dis = int((simulated & f.disagg).sum())
    notes = [f"{int(simulated.sum())} point(s) simulated ({n_dis} disaggregated on their prefill and decode pools)"]
    if n_left:
        notes.append(f"{n_left} covered point(s) could not be simulated and keep the analytic prediction")
    return Check(t, notes)


def summary_with_slices(ch: Check) -> dict[str, Any]:
    """The usual summary plus the simulated points alone, the concurrency >= 64 slice, that slice's simulated
    points alone, and the disaggregated points (all, and at concurrency >= 64)."""
    t = ch.table
    out = summarize(t)
    hi = pl.col("conc") >= 64
    dis = pl.col("layout").str.starts_with("p")
    out["simulated_only"] = summarize(t.filter(pl.col("simulated")))
    out["conc_ge_64"] = summarize(t.filter(hi))
    out["conc_ge_64_simulated"] = summarize(t.filter(hi & pl.col("simulated")))
    out["disaggregated"] = summarize(t.filter(dis))
    out["conc_ge_64_disaggregated"] = summarize(t.filter(hi & dis))
    out["notes"] = ch.notes
    return out


def simulate_cross_validate(df: pl.DataFrame, cat: HardwareCatalog | None = None,
                            by: tuple[str, str] = ("isl", "osl")) -> dict[str, Any]:
    """Fit on each ISL/OSL setting, check the others through the simulation (pooled and per fold)."""
    from agentprof.replay.calibration import fit, load_fitted

    cat = cat or load_catalog()
    attn_eff = load_fitted().attn_eff
    tables, folds = [], []
    for s in df.select(*by).unique().sort(*by).rows():
        same = pl.all_horizontal([pl.col(c) == v for c, v in zip(by, s, strict=True)])
        train, test = df.filter(same), df.filter(~same)
        if not test.height:
            continue
        ch = simulate_check(test, fit(train, cat, attn_eff), cat)
        folds.append({"fit_on": "/".join(str(v) for v in s), **summary_with_slices(ch)})
        tables.append(ch.table)
    pooled = summary_with_slices(Check(pl.concat(tables))) if tables else {}
    return {"pooled": pooled, "folds": folds}


def workload_reuse(df: pl.DataFrame, max_conc: int = 2) -> float:
    """The AgentX traces' prefix reuse: the median measured server hit rate at concurrency <= ``max_conc``,
    where a few users' contexts fit any deployment's KV pool, so the hit rate is the workload's, not the
    cache's."""
    low = df.filter((pl.col("conc") <= max_conc) & pl.col("server_gpu_cache_hit_rate").is_not_null())
    return float(low["server_gpu_cache_hit_rate"].median()) if low.height else 0.0


def simulate_agentic(df: pl.DataFrame, fitted: Fitted, cat: HardwareCatalog | None = None,
                     prefixes: str = "measured", reuse: float | None = None, arrivals: str = "closed",
                     think_s: float | None = None) -> dict[str, Any]:
    """The AgentX Kimi K2.5 trace-replay points through the simulation: ``conc`` users, the measured mean
    prompt and output; each user a closed loop that waits ``think_s`` on average between a reply and its next call
    (default :func:`workload_think_s`), its first call left out as AIPerf's warm-up phase leaves it out [S47];
    mean TTFT and ITL against the measured means, over every complete run with measurements (runs that stopped
    serving before their window ended are listed with ``truncated`` and left out: :data:`COMPLETE_SHARE`) and over
    the healthy slice (hit rate >= 0.9). ``arrivals="rate"`` is the earlier protocol: requests arriving at the
    measured request rate (successful requests / duration) with at most ``conc`` in flight — a rate that is the
    outcome of the server's speed, not an input to it.

    ``prefixes``: ``measured`` puts the point's measured server hit rate in as one shared cached prefix;
    ``private`` gives each user its own prefix of the workload's reuse (:func:`workload_reuse`), starting cold,
    so the simulated KV pool and LRU cache decide the hit rate (reported as ``sim_hit``: the capacity cliff
    comes out of the simulation instead of going in). LMCache rows run with private prefixes and the recipe's
    CPU tier in both modes (:data:`AGENTX_LMCACHE_CPU_BYTES`; their CPU hits are not reported, ``sim_cpu_hit``).
    ``reuse`` overrides :func:`workload_reuse` (for a subset of the rows that lacks the low-concurrency ones)."""
    if prefixes not in ("measured", "private"):
        raise ValueError(f"prefixes: expected 'measured' or 'private', got {prefixes!r}")
    if arrivals not in ("closed", "rate"):
        raise ValueError(f"arrivals: expected 'closed' or 'rate', got {arrivals!r}")
    private, closed = prefixes == "private", arrivals == "closed"
    from agentprof.replay.agentic import HEALTHY_HIT, deployed_points, row_mem_util

    cat = cat or load_catalog()
    budgets = load_serving()
    rows = []
    measured = df.filter(pl.col("mean_ttft").is_not_null() & pl.col("mean_itl").is_not_null())
    reuse = workload_reuse(df) if reuse is None else reuse
    think = workload_think_s(df) if think_s is None else think_s
    for r, hw, dep, p, how in deployed_points(measured, fitted, cat, fitted.attn_eff, fitted.attn_eff_by_accelerator,
                                              by_attention=fitted.attn_eff_by_attention):
        hit = float(r["server_gpu_cache_hit_rate"] or 0.0)
        # LMCache runs: their CPU hits are not reported, so each user keeps its own prefix of the workload's reuse
        # in the recipe's CPU tier as well, and the simulated tiers decide what hits where
        lmcache = str(r.get("offloading")) == "lmcache"
        own = private or lmcache
        cpu_tokens = AGENTX_LMCACHE_CPU_BYTES / dep.kv_token_bytes if lmcache else 0.0
        if own:
            hit = reuse
        budget, _ = budgets.budget_tokens(str(r["framework"]).lower())
        rate, det = None, {}
        if not closed and r.get("num_requests_successful") and r.get("duration_seconds"):
            rate = float(r["num_requests_successful"]) / float(r["duration_seconds"])
        ttft, itl, _ = simulate_point(dep, p, int(r["conc"]), float(r["mean_input_tokens"]),
                                      float(r["mean_output_tokens_actual"]), budget, shared_fraction=hit,
                                      spread=0.0, stat=np.nanmean, rate_per_s=rate,
                                      users=int(r["conc"]) if own else None, detail=det, cpu_tokens=cpu_tokens,
                                      mem_util=row_mem_util(r, hw, dep),
                                      think_s=think if closed else 0.0)
        rows.append({"hardware": hw, "tp": dep.gpus, "conc": int(r["conc"]),
                     "hit_rate": float(r["server_gpu_cache_hit_rate"] or 0.0), "sim_hit": det.get("hit_share"),
                     "sim_cpu_hit": det.get("cpu_hit_share"),
                     "offloading": str(r.get("offloading")), "calibration": how,
                     "truncated": float(r.get("duration_seconds") or 0.0) < COMPLETE_SHARE * AGENTX_BENCHMARK_S,
                     "meas_ttft": r["mean_ttft"], "pred_ttft": ttft, "meas_itl": r["mean_itl"], "pred_itl": itl})
    t = pl.DataFrame(rows)
    if not t.height:
        return {"points": 0}
    t = t.with_columns(((pl.col("pred_ttft") - pl.col("meas_ttft")).abs() / pl.col("meas_ttft")).alias("a_ttft"),
                       ((pl.col("pred_itl") - pl.col("meas_itl")).abs() / pl.col("meas_itl")).alias("a_itl"))

    def stats(g: pl.DataFrame) -> dict[str, Any]:
        return {"points": g.height, "median_ape_ttft": float(g["a_ttft"].median()) if g.height else None,
                "median_ape_itl": float(g["a_itl"].median()) if g.height else None}

    full = t.filter(~pl.col("truncated"))
    healthy = full.filter(pl.col("hit_rate") >= HEALTHY_HIT)
    return {**stats(full), "prefixes": prefixes, "arrivals": arrivals, "workload_reuse": reuse,
            "think_s": think if closed else None, "truncated": t.height - full.height,
            "healthy": stats(healthy), "healthy_conc_le_8": stats(healthy.filter(pl.col("conc") <= 8)),
            "by_hardware": {str(k[0]): stats(g) for k, g in full.group_by("hardware")}, "table": t.to_dicts()}
