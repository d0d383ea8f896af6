"""Where a disaggregated point's first token waits, measured before modelled (issue 13, "no point off by more than
5x"): Little's law on the measured columns, the prefill pool's time per prompt bounded by the start-up wave, and
the ISL/OSL cross-validation's prediction of the same points split into its parts, with the what-if of the
stack's own hand-off count. Prints markdown; the figures of docs/DEVICE_MODEL.md §4 ("Where the TTFT points more
than 5x off wait"). About half a minute (two fits).

    python scripts/ttft_wait_budget.py [POINTS.csv]

Measured (per point, from the CSV alone; InferenceX lengths are uniform in [0.8 L, L], mean 0.9 L):
  rate     = tput_per_gpu · GPUs / (0.9 ISL + 0.9 OSL)             requests per second, closed loop
  in flight= rate · mean E2E                                         clients inside the system (Little); the rest
                                                                     of the clients are between requests or lost
                                                                     to the run's ramp and tail
  first    = rate · mean TTFT                                        clients waiting for their first token
  decoding = rate · (mean E2E − mean TTFT)                           clients in the decode batch
  W ≤      = n_prefill · p99 TTFT / (0.9 · clients)                  the pool's time per prompt: a run of 10 ×
                                                                     clients prompts opens with all clients at
                                                                     once, so its top 1 % are the last tenth of
                                                                     that wave, drained by the pool (an upper bound)
"""

from __future__ import annotations

import sys

import numpy as np
import polars as pl

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.calibration import PRIOR_MEAN, borrowed_handoff, fit, is_disaggregated, load_fitted
from agentprof.replay.fidelity import check
from agentprof.replay.points import PARAMS, load_points, point_features, predict_times

TARGETS = (  # (hardware, framework, spec, isl, osl, conc, prefill GPUs): the points > 5x off on main 153a287
    ("gb200", "dynamo-sglang", "none", 1024, 1024, 4096, 24),
    ("mi355x", "sglang-disagg", "mtp", 1024, 8192, 2048, 8),
)
CONTEXT = (  # the same deployments at other loads, for the trend
    ("gb200", "dynamo-sglang", "none", 1024, 1024, 1024, 24),
    ("gb200", "dynamo-sglang", "none", 1024, 1024, 2048, 24),
    ("mi355x", "sglang-disagg", "mtp", 1024, 1024, 2048, 8),
    ("mi355x", "sglang-disagg", "mtp", 1024, 8192, 1024, 8),
)


def _select(df: pl.DataFrame, spec: tuple) -> pl.Series:
    hw, fw, sd, isl, osl, conc, npf = spec
    return ((pl.col("hardware") == hw) & (pl.col("framework") == fw) & (pl.col("spec_decoding") == sd)
            & (pl.col("isl") == isl) & (pl.col("osl") == osl) & (pl.col("conc") == conc)
            & (pl.col("num_prefill_gpu") == npf))


def measured(df: pl.DataFrame) -> None:
    print("\n**Measured wait budget** (Little's law on the CSV's columns; one row per run)\n")
    print("| point | TTFT median / mean / p99 s | TPOT s | rate req/s | in flight | waiting for 1st token "
          "| decoding (per decode rank) | prefill W ≤ ms |")
    print("|---|---|---|---|---|---|---|---|")
    for spec in TARGETS + CONTEXT:
        for r in df.filter(_select(df, spec)).iter_rows(named=True):
            gpus = float(r["num_gpus"])
            rate = r["tput_per_gpu_tok_s"] * gpus / (0.9 * r["isl"] + 0.9 * r["osl"])
            inflight = rate * r["mean_e2el_s"]
            first = rate * r["mean_ttft_s"]
            dec = rate * (r["mean_e2el_s"] - r["mean_ttft_s"])
            ranks = float(r["num_decode_gpu"])  # attention data-parallel decode: one rank per GPU
            n_pf = float(r["prefill_num_workers"] or 1)
            w_bound = n_pf * r["p99_ttft_s"] / (0.9 * r["conc"])
            name = f"{spec[0]} {spec[1]} {spec[2]} {spec[3] // 1024}k{spec[4] // 1024}k, {spec[5]} clients, {spec[6]} prefill GPUs"
            print(f"| {name} | {r['median_ttft_s']:.2f} / {r['mean_ttft_s']:.2f} / {r['p99_ttft_s']:.1f} "
                  f"| {r['median_tpot_s']:.4f} | {rate:.2f} | {inflight:.0f} of {r['conc']} | {first:.0f} "
                  f"| {dec:.0f} ({dec / ranks:.1f}) | {1000 * w_bound:.1f} |")


def predicted(df: pl.DataFrame) -> None:
    cat = load_catalog()
    attn = load_fitted().attn_eff
    own = fit(df, cat, attn)  # the stack's own terms, fitted on every point (in sample)
    print("\n**Predicted, ISL/OSL cross-validation** (fit on the other setting; TTFT split into its parts, "
          "seconds; `own h`: the same prediction with the hand-off count the stack fits on all its points)\n")
    print("| point | fit on | level | measured | predicted | ratio | hand-off steps × step | pool queue, slots "
          "| rest | own h: steps → predicted (ratio) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec in TARGETS + CONTEXT:
        sel = df.select(_select(df, spec)).to_series()
        test = df.filter(sel)
        if not test.height:
            continue
        other = df.filter((pl.col("isl") != spec[3]) | (pl.col("osl") != spec[4]))
        fold = fit(other, cat, attn)
        ch = check(test, fold, cat)
        f = point_features(test, cat)
        theta = np.ones((len(f), len(PARAMS)))
        h_own = np.ones(len(f))
        for i, k in enumerate(f.keys):
            e, _ = fold.lookup(k)
            theta[i] = e.theta
            if not is_disaggregated(e.attrs.get("framework", "")):
                theta[i, PARAMS.index("q")] = PRIOR_MEAN["q"]
                theta[i, PARAMS.index("handoff")] = borrowed_handoff(fold, k)
            h_own[i] = own.lookup(k)[0].param("handoff")
        t = predict_times(f, theta, fold.attn_eff)
        h = theta[:, PARAMS.index("handoff")]
        step = t.tpot * np.where(f.mtp, theta[:, PARAMS.index("accept")], 1.0)
        hand = (f.work.wait_steps + h) * step
        th = theta.copy()
        th[:, PARAMS.index("handoff")] = h_own
        t_own = predict_times(f, th, fold.attn_eff)
        for i in range(len(f)):
            meas = f.ttft[i]
            pool = t.queue[i] - hand[i]  # prefill pool's queue, its saturation and any slots / KV wait
            rest = t.ttft[i] - t.queue[i]  # request overhead, prefill alone, KV transfer
            name = f"{spec[0]} {spec[1]} {spec[2]} {spec[3] // 1024}k{spec[4] // 1024}k, {spec[5]} clients"
            print(f"| {name} | {spec[4] == 1024 and '1k8k' or '1k1k'} | {ch.table['level'][i]} | {meas:.3f} "
                  f"| {t.ttft[i]:.3f} | {t.ttft[i] / meas:.2f} | {h[i]:.1f} × {1000 * step[i]:.1f} ms = {hand[i]:.3f} "
                  f"| {pool:.3f} | {rest:.3f} | {h_own[i]:.1f}: {t_own.ttft[i]:.3f} "
                  f"({t_own.ttft[i] / meas:.2f}) |")


def _closed_loop(per_rank: int, kv_tokens: float | None, dispatch: str, clients: int = 2048, ranks: int = 16,
                 isl: int = 1024, osl: int = 8192, tpot: float = 0.0871, prefill_rate: float = 21.0,
                 reserve: int = 512, dt: float = 1.0, horizon: float = 4000.0, warm: float = 1500.0,
                 seed: int = 2) -> tuple[float, float, float]:
    """Mean, median and p90 first-token wait (s) of a closed loop of ``clients`` on an attention-DP decode
    instance of ``ranks`` ranks, each admitting from its own FIFO queue while it runs fewer than ``per_rank``
    sequences and (``kv_tokens``) while its KV pool holds the new prompt plus SGLang's reservation of ``reserve``
    tokens per running sequence (sequences over the pool are retracted to the queue's head, as the engine
    retracts). Requests reach a rank round robin (``rr``) or at random (``random``: the bootstrap room modulo
    the ranks); lengths uniform in [0.8 L, L]; the run opens with every client at once, drained by the prefill
    pool at ``prefill_rate``. Waits of requests arriving after ``warm`` seconds (steady state)."""
    import random

    rng = random.Random(seed)
    step_tokens = dt / tpot
    run: list[list[list[float]]] = [[] for _ in range(ranks)]
    queue: list[list[list]] = [[] for _ in range(ranks)]
    waits: list[float] = []
    sent = 0

    def arrive(t: float) -> None:
        nonlocal sent
        r = sent % ranks if dispatch == "rr" else rng.randrange(ranks)
        sent += 1
        queue[r].append([t, rng.randint(int(0.8 * isl), isl), rng.randint(int(0.8 * osl), osl), None])

    opening = [k / prefill_rate for k in range(clients)]
    k, t = 0, 0.0
    while t < horizon:
        while k < clients and opening[k] <= t:
            arrive(t)
            k += 1
        for r in range(ranks):
            used = sum(s[0] for s in run[r])
            while kv_tokens is not None and used > kv_tokens and run[r]:
                ctx, left = run[r].pop()
                used -= ctx
                queue[r].insert(0, [None, 0, left, ctx])
            while queue[r] and len(run[r]) < per_rank:
                at, i, o, ctx = queue[r][0]
                need = (ctx if ctx is not None else i) + reserve
                if kv_tokens is not None and need > kv_tokens - used - reserve * len(run[r]):
                    break
                queue[r].pop(0)
                if ctx is None and at > warm:
                    waits.append(t - at)
                run[r].append([ctx if ctx is not None else i, o])
                used += run[r][-1][0]
            keep = []
            for s in run[r]:
                s[0] += step_tokens
                s[1] -= step_tokens
                if s[1] <= 0:
                    arrive(t)
                else:
                    keep.append(s)
            run[r] = keep
        t += dt
    w = np.array(waits)
    return float(w.mean()), float(np.median(w)), float(np.quantile(w, 0.9))


def limits(df: pl.DataFrame) -> None:
    """The admission limits the MI355X EP16 point at 8K outputs could have, each run as a closed loop with the
    point's own measured figures (no fitted term): does it give the measured wait, and its shape?"""
    r = df.filter(_select(df, TARGETS[1])).row(0, named=True)
    rate = r["tput_per_gpu_tok_s"] * r["num_gpus"] / (0.9 * r["isl"] + 0.9 * r["osl"])
    per_rank = rate * (r["mean_e2el_s"] - r["mean_ttft_s"]) / r["num_decode_gpu"]
    # the KV pool that would hold the measured decode batch: sequences at their mean context plus the reservation
    kv = per_rank * (0.9 * r["isl"] + 0.9 * r["osl"] / 2 + 512)
    print("\n**Admission limits tested on MI355X SGLang-disagg EP16 MTP, 2,048 clients, 1k8k** (closed-loop "
          f"simulation with the point's own TPOT {r['median_tpot_s']:.4f} s; measured first-token wait: median "
          f"{r['median_ttft_s']:.1f} s, mean {r['mean_ttft_s']:.1f} s)\n")
    print("| limit | DP dispatch | mean / median / p90 wait s |\n|---|---|---|")
    for name, pr, kvt in (("128 sequences per rank (CUDA graphs 1-128 per rank, S57)", 128, None),
                          (f"KV pool {kv / 1e3:.0f}K tokens per rank (holds the measured {per_rank:.1f} "
                           "sequences at their mean context)", 10**6, kv)):
        for dispatch in ("rr", "random"):
            m, med, p90 = _closed_loop(pr, kvt, dispatch, clients=int(r["conc"]), tpot=r["median_tpot_s"])
            print(f"| {name} | {dispatch} | {m:.1f} / {med:.1f} / {p90:.1f} |")


def main(path: str = "data/inferencex/calibration_points.csv") -> None:
    df = load_points(path)
    measured(df)
    predicted(df)
    limits(df)


if __name__ == "__main__":
    main(*sys.argv[1:])
