"""Cost of stack sampling during capture, against capture without sampling and other samplers, on the loop of
1,000 tool calls of 1 ms of pure-Python CPU work (the capture benchmark's wall-time loop).

Variants, each a whole loop (a sampler is process-wide, so it cannot be switched off for a chunk), run in
rotating order every round; the figure per variant is the median over rounds, as a ratio to the unprofiled
loop of the same rounds:

- ``off``: the decorated tool with no profile;
- ``capture``: ``agentprof.profile(...)`` without sampling;
- ``sample-10ms`` (the default), ``sample-5ms`` and ``sample-1ms``: ``agentprof.profile(..., sample=...)``;
- ``pyinstrument-5ms``: pyinstrument's Profiler (its C stat profiler, one thread) around the unprofiled loop;
- ``py-spy-200hz``: ``py-spy record --nonblocking --rate 200`` attached to this process (needs ptrace rights).

Those whole-loop figures drift with the machine's load. The primary figure interleaves finely instead: inside
one sampled profile, chunks of 20 calls run with the sampler paused (its thread asleep until resumed: no
ticks, no interpreter-lock handovers) and running, in the order off, on, on, off
(``paired``); its median over chunk groups is the sampler's cost over capture alone.

The last two variants are skipped when the package is not installed (``pip install pyinstrument py-spy``). agentprof's
own measure of the sampler's cost (its thread's CPU time, written to the trace's meta) is printed beside the
wall figures: it is steadier than a wall-clock difference on a shared machine.

Run: ``.venv/bin/python scripts/bench_sampling.py [--rounds 7] [--calls 1000] [--json]``.
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import _spin, calibrate_1ms  # noqa: E402

import agentprof  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--paired-only", action="store_true",
                    help="only the paired figures: SIGPROF and thread sampler at 10 ms, interleaved --repeat times")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = calibrate_1ms()
    tool = agentprof.tool(name="work")(lambda: _spin(n))
    tmp = Path(tempfile.mkdtemp(prefix="agentprof-bench-sampling-"))
    meta: dict[str, list[float]] = {}

    def loop() -> float:
        t0 = time.perf_counter()
        for _ in range(args.calls):
            tool()
        return time.perf_counter() - t0

    def off() -> float:
        return contextvars.Context().run(loop)

    def profiled(sample: float | bool) -> Callable[[], float]:
        def run() -> float:
            t0 = time.perf_counter()
            with agentprof.profile("bench", out=tmp, sample=sample) as r:
                loop()
            took = time.perf_counter() - t0
            if sample:
                recs = [json.loads(x) for x in r.path.read_text().splitlines()]
                s = recs[-1].get("sampling") or {}
                meta.setdefault(f"busy_share_{sample}", []).append(s.get("sampler_cpu_ns", 0) / 1e9 / took)
                meta.setdefault(f"samples_{sample}", []).append(s.get("samples", 0))
            r.path.unlink()
            return took
        return run

    variants: dict[str, Callable[[], float]] = {"off": off, "capture": profiled(False),
                                                "sample-10ms": profiled(0.010), "sample-5ms": profiled(0.005),
                                                "sample-1ms": profiled(0.001)}
    try:
        from pyinstrument import Profiler

        def pyinstrument_run() -> float:
            p = Profiler(interval=0.005, async_mode="disabled")
            t0 = time.perf_counter()
            p.start()
            contextvars.Context().run(loop)
            p.stop()
            return time.perf_counter() - t0

        variants["pyinstrument-5ms"] = pyinstrument_run
    except ImportError:
        pass
    spy = shutil.which("py-spy") or (str(Path(sys.executable).parent / "py-spy")
                                     if (Path(sys.executable).parent / "py-spy").exists() else None)
    if spy:
        def pyspy_run() -> float:
            out = tmp / "spy.txt"
            p = subprocess.Popen([spy, "record", "--pid", str(os.getpid()), "--rate", "200", "--nonblocking",
                                  "--format", "raw", "-o", str(out)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # attached before the loop starts
            took = off()
            p.terminate()
            p.wait(timeout=10)
            return took

        variants["py-spy-200hz"] = pyspy_run
    def paired(interval: float, groups: int = 60, chunk: int = 20, mode: str = "auto") -> list[float]:
        """(on - off) / off per group of chunks, the sampler paused for the off chunks of one session; ``mode``
        ``thread`` forces the thread sampler where the SIGPROF one would be chosen."""
        from agentprof.capture import sampler as sampler_mod

        out = []
        usable = sampler_mod.signals_usable
        if mode == "thread":
            sampler_mod.signals_usable = lambda: False
        try:
            return _paired(interval, groups, chunk, out)
        finally:
            sampler_mod.signals_usable = usable

    def _paired(interval: float, groups: int, chunk: int, out: list[float]) -> list[float]:
        with agentprof.profile("bench-paired", out=tmp, sample=interval) as r:
            smp = r._session.sampler

            def timed(on: bool) -> float:
                smp.pause(not on)
                time.sleep(2 * interval)  # the sampler's state settles (a tick in flight ends)
                t0 = time.perf_counter()
                for _ in range(chunk):
                    tool()
                return time.perf_counter() - t0

            for _ in range(groups):
                a1, b1, b2, a2 = timed(False), timed(True), timed(True), timed(False)
                out.append((b1 + b2 - a1 - a2) / (a1 + a2))
            smp.pause(False)
        return out

    if args.paired_only:
        return paired_only(paired, args)
    times: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    try:
        off()  # warm-up
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for k in order:
                times[k].append(variants[k]())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pairs = {f"sample-{int(i * 1000)}ms": paired(i) for i in (0.010, 0.005, 0.001)}
    base = statistics.median(times["off"])
    out: dict[str, Any] = {"calls": args.calls, "rounds": args.rounds, "python": sys.version.split()[0],
                           "load": os.getloadavg()[0], "off_s": base, "variants": {}}
    for k, v in times.items():
        per_round = [x / o - 1 for x, o in zip(v, times["off"], strict=True)]
        q = statistics.quantiles(per_round, n=4) if len(per_round) >= 2 else [per_round[0]] * 3
        out["variants"][k] = {"median_s": statistics.median(v), "overhead_pct": 100 * (statistics.median(v) / base - 1),
                              "paired_p25_pct": 100 * q[0], "paired_p75_pct": 100 * q[2]}
    for k, v in pairs.items():
        q = statistics.quantiles(v, n=4)
        out["variants"][k].update({"paired_vs_capture_pct": 100 * statistics.median(v),
                                   "paired_vs_capture_p25_pct": 100 * q[0], "paired_vs_capture_p75_pct": 100 * q[2]})
    for key in (0.010, 0.005, 0.001):
        if f"busy_share_{key}" in meta:
            out["variants"][f"sample-{int(key * 1000)}ms"]["sampler_busy_pct"] = \
                100 * statistics.median(meta[f"busy_share_{key}"])
            out["variants"][f"sample-{int(key * 1000)}ms"]["samples"] = statistics.median(meta[f"samples_{key}"])
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{args.calls} tool calls of 1 ms, {args.rounds} rounds; unprofiled loop {base:.3f} s; load {out['load']:.1f}")
    for k, d in out["variants"].items():
        extra = f"; sampler thread's own CPU {d['sampler_busy_pct']:.2f} % of wall, {d['samples']:.0f} samples" \
            if "sampler_busy_pct" in d else ""
        if "paired_vs_capture_pct" in d:
            extra += (f"\n      paired in one session, sampler running vs paused: {d['paired_vs_capture_pct']:+.2f} % "
                      f"(quartiles {d['paired_vs_capture_p25_pct']:+.2f} .. {d['paired_vs_capture_p75_pct']:+.2f} %)")
        print(f"  {k:18s} {d['median_s']:.3f} s  {d['overhead_pct']:+6.2f} %  (paired quartiles "
              f"{d['paired_p25_pct']:+.2f} .. {d['paired_p75_pct']:+.2f} %){extra}")
    ok = out["variants"]["sample-10ms"]["paired_vs_capture_pct"] <= 3.0
    print("sampling at the default interval adds <= 3 % (paired): " + ("met" if ok else "NOT MET"))
    return 0


def paired_only(paired: Callable[..., list[float]], args: argparse.Namespace) -> int:
    """SIGPROF vs thread sampler at the default interval, paired runs interleaved (signal, thread, thread,
    signal, ...): the median and quartiles of each run, and of all groups pooled."""
    runs: dict[str, list[list[float]]] = {"signal": [], "thread": []}
    for i in range(args.repeat):
        for mode in (("signal", "thread") if i % 2 == 0 else ("thread", "signal")):
            runs[mode].append(paired(0.010, mode=mode))
    out: dict[str, Any] = {"load": os.getloadavg()[0], "python": sys.version.split()[0], "modes": {}}
    for mode, rs in runs.items():
        pooled = [x for r in rs for x in r]
        q = statistics.quantiles(pooled, n=4)
        out["modes"][mode] = {"runs_median_pct": [round(100 * statistics.median(r), 2) for r in rs],
                              "pooled_median_pct": 100 * statistics.median(pooled),
                              "pooled_p25_pct": 100 * q[0], "pooled_p75_pct": 100 * q[2], "groups": len(pooled)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"paired, 10 ms, {args.repeat} runs per mode interleaved; load {out['load']:.1f}")
    for mode, d in out["modes"].items():
        print(f"  {mode:7s} runs {d['runs_median_pct']} %; pooled median {d['pooled_median_pct']:+.2f} % "
              f"(quartiles {d['pooled_p25_pct']:+.2f} .. {d['pooled_p75_pct']:+.2f} %, {d['groups']} groups)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
