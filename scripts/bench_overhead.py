#!/usr/bin/env python3
"""Self-overhead as a user would measure it, against what agentprof reports about itself.

A loop of streamed chat completions through the real openai SDK against the loopback model server (a growing
conversation, usage requested), and a loop of 1 ms tool calls, each run in blocks with and without
``agentprof.profile`` (alternating, so machine noise hits both alike). The measured overhead per model call
(per tool call) is the median block's wall time with the profile minus without, over the calls in a block;
the reported one is the run's ``capture_overhead_ns`` (the figure the trace's meta and the report show) over
the same calls. Prints both and their ratio.

    .venv/bin/python scripts/bench_overhead.py [--calls 40] [--blocks 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

SERVER = """
import time
from agentprof.demo.model_server import ModelServer
with ModelServer() as s:
    print(s.openai_base_url, flush=True)
    while True:
        time.sleep(3600)
"""


def model_block(client, n: int, profiled: bool, out: str) -> tuple[float, int]:
    import agentprof

    op = streamed_call(client)
    t0, c0 = time.perf_counter(), time.process_time()
    ctx = agentprof.profile("bench-model", out=out) if profiled else None
    run = ctx.__enter__() if ctx else None
    for i in range(n):
        op(i)
    if ctx:
        ctx.__exit__(None, None, None)
    return time.perf_counter() - t0, time.process_time() - c0, _reported(run)


def interleaved(op, pairs: int, out: str, seed: int = 1) -> dict[str, float]:
    """Each operation made with and without agentprof in random order within a pair, so load swings, CPU
    frequency and steal time on a shared machine fall on both alike (blocks seconds apart do not share them).

    One profile stays entered; a "without" operation runs with no session in its context (agentprof's wrappers
    then only pass through: a few µs, counted against agentprof here as a user's comparison would). Per
    operation: wall and the agent thread's CPU while it runs, and process CPU of a window that also waits for
    agentprof's background work on it (a model call's fingerprint) to finish, so that CPU is not spilled into
    the next window. Reported: the session's ``overhead_ns`` gained over the operation, and its
    ``background_cpu_ns`` over the measured operations (from the totals: the background thread charges a job
    just after the call's span ends)."""
    import gc
    import random

    import agentprof
    from agentprof.capture.session import ACTIVE_SESSION

    rng = random.Random(seed)
    gc_ns = [0, 0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_ns[1] = time.perf_counter_ns()
        else:
            gc_ns[0] += time.perf_counter_ns() - gc_ns[1]

    rows: dict[bool, list[tuple[int, int, int, int]]] = {True: [], False: []}
    on_thread, background = 0, 0
    gc.callbacks.append(on_gc)
    ctx = agentprof.profile("bench-interleaved", out=out)
    sess = ctx.__enter__()._session
    try:
        for i in range(pairs + 4):  # the first four pairs warm up (imports, connection, tokenizer)
            if i == 4:
                time.sleep(0.05)
                background = -sess.background_cpu_ns
            first = rng.random() < 0.5
            for profiled in (first, not first):
                tok = None if profiled else ACTIVE_SESSION.set(None)
                o0, g0 = sess.overhead_ns, gc_ns[0]
                c0, t0, w0 = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
                op(i)
                w1, t1 = time.perf_counter_ns(), time.thread_time_ns()
                if tok is not None:
                    ACTIVE_SESSION.reset(tok)
                for call in list(sess.pending):  # agentprof's background work on this call (none for a plain one)
                    call._ended.wait(1.0)
                c1 = time.process_time_ns()
                if i >= 4:
                    rows[profiled].append((w1 - w0, t1 - t0, c1 - c0, gc_ns[0] - g0))
                    if profiled:
                        on_thread += sess.overhead_ns - o0
        time.sleep(0.05)
        background += sess.background_cpu_ns
    finally:
        ctx.__exit__(None, None, None)
        gc.callbacks.remove(on_gc)
    n = len(rows[True])
    res: dict[str, float] = {"pairs": n}
    for k, name in enumerate(("wall", "thread_cpu", "process_cpu", "gc")):
        d = [a[k] - b[k] for a, b in zip(rows[True], rows[False], strict=True)]
        res[f"{name}_without_ms"] = sum(r[k] for r in rows[False]) / n / 1e6
        res[f"{name}_diff_ms"] = sum(d) / n / 1e6
        res[f"{name}_diff_se_ms"] = statistics.stdev(d) / n ** 0.5 / 1e6  # standard error of the mean difference
    rep, bg = on_thread / n / 1e6, background / n / 1e6
    res["reported_overhead_ms"], res["reported_background_cpu_ms"] = rep, bg

    def ratio(a: float, b: float) -> float | None:
        return a / b if b > 0 else None

    res["reported_over_measured_thread_cpu"] = ratio(rep, res["thread_cpu_diff_ms"])
    res["reported_total_over_measured_cpu"] = ratio(rep + bg, res["process_cpu_diff_ms"])
    res["reported_total_over_measured_wall"] = ratio(rep + bg, res["wall_diff_ms"])
    res["reported_over_measured_wall"] = ratio(rep, res["wall_diff_ms"])
    return res


def streamed_call(client):
    """One streamed chat completion per call of a growing conversation (a ten-turn window)."""
    msgs = [{"role": "system", "content": "You are a careful coding agent. " * 60}]

    def op(i: int) -> None:
        nonlocal msgs
        msgs.append({"role": "user", "content": f"step {i}: " + "look at the file and fix it " * 10})
        stream = client.chat.completions.create(model="gpt-4o", messages=msgs, stream=True,
                                                stream_options={"include_usage": True})
        msgs.append({"role": "assistant", "content": "".join(c.choices[0].delta.content or ""
                                                            for c in stream if c.choices)})
        if len(msgs) > 21:  # a sliding window of ten turns: prompts of ~2k tokens, calls of a few ms
            msgs = msgs[:1] + msgs[-20:]
    return op


def tool_call():
    """A 1 ms CPU-bound tool, decorated."""
    import agentprof

    @agentprof.tool
    def work(i: int) -> int:
        end = time.perf_counter() + 0.001
        x = 0
        while time.perf_counter() < end:
            x += i
        return x
    return work


def _reported(run) -> tuple[int, int]:
    """agentprof's reported cost so far: on the agent's threads, and its background thread's CPU."""
    return (run.capture_overhead_ns, run.capture_background_cpu_ns) if run else (0, 0)


def tool_block(n: int, profiled: bool, out: str) -> tuple[float, int]:
    import agentprof

    work = tool_call()
    t0, c0 = time.perf_counter(), time.process_time()
    ctx = agentprof.profile("bench-tool", out=out) if profiled else None
    run = ctx.__enter__() if ctx else None
    for i in range(n):
        work(i)
    if ctx:
        ctx.__exit__(None, None, None)
    return time.perf_counter() - t0, time.process_time() - c0, _reported(run)


def measure(block, n: int, blocks: int) -> dict[str, float]:
    """Wall and process CPU per call with and without the profile (medians over blocks), and the reported
    overhead: on the agent's threads (the figure to compare with wall time) and with the background thread's
    CPU added (to compare with process CPU, which counts every thread). On a busy machine the wall difference
    is noise-bound; the CPU difference is the steadier measure of the same cost."""
    plain, prof, plain_cpu, prof_cpu, reported, background = [], [], [], [], [], []
    block(n, False)  # warm-up (imports, connections, tokenizer load)
    block(n, True)
    for _ in range(blocks):
        w, c, _ = block(n, False)
        plain.append(w)
        plain_cpu.append(c)
        w, c, (r, bg) = block(n, True)
        prof.append(w)
        prof_cpu.append(c)
        reported.append(r)
        background.append(bg)
    med = statistics.median
    measured = (med(prof) - med(plain)) / n
    measured_cpu = (med(prof_cpu) - med(plain_cpu)) / n
    # the measurement's own spread: the per-pair differences (each profiled block against the block before it)
    pairs = sorted((b - a) / n for a, b in zip(plain, prof, strict=True))
    pairs_cpu = sorted((b - a) / n for a, b in zip(plain_cpu, prof_cpu, strict=True))
    q = statistics.quantiles(pairs, n=4) if len(pairs) >= 2 else [measured, measured, measured]
    qc = statistics.quantiles(pairs_cpu, n=4) if len(pairs_cpu) >= 2 else [measured_cpu] * 3
    rep = med(reported) / 1e9 / n
    rep_cpu = med([r + b for r, b in zip(reported, background, strict=True)]) / 1e9 / n
    return {"calls_per_block": n, "blocks": blocks, "without_ms": 1e3 * med(plain) / n,
            "with_ms": 1e3 * med(prof) / n, "measured_overhead_ms": 1e3 * measured,
            "measured_cpu_overhead_ms": 1e3 * measured_cpu, "reported_overhead_ms": 1e3 * rep,
            "reported_background_cpu_ms": 1e3 * med(background) / 1e9 / n,
            "paired_wall_quartiles_ms": [1e3 * q[0], 1e3 * q[2]], "paired_cpu_quartiles_ms": [1e3 * qc[0], 1e3 * qc[2]],
            "reported_over_measured": rep / measured if measured > 0 else None,
            "reported_cpu_over_measured_cpu": rep_cpu / measured_cpu if measured_cpu > 0 else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--tools", type=int, default=400)
    ap.add_argument("--blocks", type=int, default=9)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pairs", type=int, default=0,
                    help="also run N interleaved pairs of model calls (with/without in random order)")
    args = ap.parse_args()
    import openai

    out = tempfile.mkdtemp(prefix="agentprof-bench-overhead-")
    # the model server runs in its own process, as a real endpoint would: the agent process's CPU time is then
    # the agent's and agentprof's alone
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0,
                               http_client=openai.DefaultHttpxClient(trust_env=False))
        model = measure(lambda n, p: model_block(client, n, p, out), args.calls, args.blocks) if args.blocks else None
        inter = interleaved(streamed_call(client), args.pairs, out) if args.pairs else None
    finally:
        server.terminate()
        server.wait()
    tool = measure(lambda n, p: tool_block(n, p, out), args.tools, args.blocks) if args.blocks else None
    tool_inter = interleaved(tool_call(), 10 * args.pairs, out) if args.pairs else None
    res = {k: v for k, v in (("model_call_streamed", model), ("tool_call_1ms", tool),
                             ("model_call_interleaved", inter), ("tool_call_interleaved", tool_inter))
           if v is not None}
    if args.json:
        print(json.dumps(res, indent=2))
        return
    def x(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}x"

    for name, r in res.items():
        if name.endswith("_interleaved"):
            print(f"{name} ({r['pairs']} pairs): " + ", ".join(
                f"{k} {r[k + '_without_ms']:.3f} ms without, {r[k + '_diff_ms']:+.3f} ± {r[k + '_diff_se_ms']:.3f}"
                for k in ("wall", "thread_cpu", "process_cpu", "gc"))
                + f"; reported {r['reported_overhead_ms']:.3f} on the agent's thread "
                  f"({x(r['reported_over_measured_thread_cpu'])} of its CPU) + {r['reported_background_cpu_ms']:.3f} "
                  f"background = total {x(r['reported_total_over_measured_cpu'])} of process CPU, "
                  f"{x(r['reported_total_over_measured_wall'])} of wall "
                  f"(agent's thread alone {x(r['reported_over_measured_wall'])} of wall)")
            continue
        print(f"{name}: {r['without_ms']:.3f} ms without, {r['with_ms']:.3f} ms with agentprof -> measured "
              f"{r['measured_overhead_ms']:+.3f} ms wall, {r['measured_cpu_overhead_ms']:+.3f} ms CPU per call; "
              f"reported {r['reported_overhead_ms']:.3f} ms on the agent's threads "
              f"({x(r['reported_over_measured'])} of wall) + {r['reported_background_cpu_ms']:.3f} ms background "
              f"CPU (sum {x(r['reported_cpu_over_measured_cpu'])} of CPU); paired differences' quartiles: wall "
              f"{r['paired_wall_quartiles_ms'][0]:+.3f} .. {r['paired_wall_quartiles_ms'][1]:+.3f} ms, CPU "
              f"{r['paired_cpu_quartiles_ms'][0]:+.3f} .. {r['paired_cpu_quartiles_ms'][1]:+.3f} ms")


if __name__ == "__main__":
    main()
