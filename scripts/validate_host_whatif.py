"""Check the host what-if by measurement: run the same agent at full speed and on a CPU slowed k-fold, replay
the fast run onto a host k times slower (agentprof.replay.orchestration.host_whatif) and compare with the
measured slow run.

Slowdown: CPU-bandwidth cgroups (v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``) holding the agent's process and
its children. On a shared machine other jobs take an unknown, changing share of the CPU, so both runs are
capped: the "fast" one at ``--share`` of a CPU (default 25 %, below what the machine's load leaves an agent)
and the slow one at share / k, each with a 1 ms quota per period (so CPU bursts are sliced the same way in
both). Where no cgroup can be created, a co-runner spinning on the same core the agent is pinned to (k = 2).
The effective k for CPU-bound code is measured, not assumed: a pure-Python probe runs under both caps in every
round, interleaved with the agent runs, and the replay uses that k (the nominal k is reported beside it).
The model server runs in its own process, outside the slowdown (the model is on an accelerator, not the host
CPU), and is started fresh for every run (its prefix cache would otherwise make later runs faster).

Workloads: ``demo`` (the bundled demo agent: real openai SDK against the loopback server, real tools, tests
in child processes) and ``cpu-heavy`` (an agent whose own loop spends most of its time in one CPU-bound
function, with an I/O tool, a CPU tool, JSON parsing and model-call stand-ins that sleep).

Run as root: ``.venv/bin/python scripts/validate_host_whatif.py [--rounds 3] [--k 2] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CG_NAME = "agentprof-validate"
PROBE_N = 600_000
QUOTA_US = 1000


# --- child roles ----------------------------------------------------------------------------------------------
def role_server() -> int:
    """Serve the demo's scripted model on 127.0.0.1 until stdin closes; print the base URL."""
    from agentprof.demo.latency import DeviceLatency
    from agentprof.demo.model_server import ModelServer
    from agentprof.demo.run import DEFAULT_MODEL, DEFAULT_SYSTEM
    from agentprof.demo.scripted_model import scripted_reply

    with ModelServer(script=scripted_reply, latency=DeviceLatency(DEFAULT_SYSTEM, DEFAULT_MODEL),
                     absolute_pacing=True) as server:
        print(server.openai_base_url, flush=True)
        sys.stdin.read()
    return 0


def rank_candidate_patches(n: int) -> int:
    score = 0
    for i in range(n):
        score = (score * 31 + i) % 1_000_003
    return score


def role_agent(workload: str, out: str, base_url: str | None) -> int:
    """Run one workload profiled (sampled); print the trace path."""
    import agentprof

    if workload == "cpu-heavy":
        @agentprof.tool
        def read_file(step: int) -> str:
            time.sleep(0.01)
            return json.dumps({"step": step, "lines": [f"line {i}" for i in range(3000)]})

        @agentprof.tool
        def run_checks(text: str) -> int:
            return sum(ord(c) & 7 for c in text[:60000])

        with agentprof.profile("cpu-heavy", out=out, sample=True) as run:
            for step in range(6):
                with agentprof.span("model", "chat stand-in"):
                    time.sleep(0.05)  # the model call: not host CPU
                rank_candidate_patches(400_000)
                doc = agentprof.parse_json(read_file(step), name="tool_result")
                run_checks(json.dumps(doc))
        print(run.path, flush=True)
        return 0
    import openai

    from agentprof.demo import agent
    from agentprof.demo.agent_run import TASK, profiled_tools
    from agentprof.demo.run import DEFAULT_MODEL
    from agentprof.demo.sample_repo import materialize

    with tempfile.TemporaryDirectory(prefix="agentprof-validate-") as tmp:
        repo = materialize(Path(tmp) / "calc")
        client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0,
                               http_client=openai.DefaultHttpxClient(trust_env=False))
        with profiled_tools(agent.TOOLS), agentprof.profile("demo-agent", out=out, instrument_json=True,
                                                              instrument_subprocess=True, sample=True) as run:
            agent.run(TASK, repo, client, DEFAULT_MODEL)
        client.close()
    print(run.path, flush=True)
    return 0


def role_probe() -> int:
    t0 = time.perf_counter()
    rank_candidate_patches(PROBE_N)
    print(time.perf_counter() - t0, flush=True)
    return 0


# --- slowdown -------------------------------------------------------------------------------------------------
class Slowdown:
    """Puts processes under a CPU-bandwidth limit of 1/k of one CPU (cgroup), or next to a co-runner."""

    def __init__(self, share: float, name: str) -> None:
        self.kind = "none"
        self.path: Path | None = None
        self.corunner: subprocess.Popen[bytes] | None = None
        quota = QUOTA_US
        period = int(round(quota / share))
        v2 = Path("/sys/fs/cgroup")
        try:
            if (v2 / "cgroup.controllers").exists():
                p = v2 / f"{CG_NAME}-{name}"
                p.mkdir(exist_ok=True)
                (p / "cpu.max").write_text(f"{quota} {period}")
                self.kind, self.path = f"cgroup v2 cpu.max {quota} {period}", p
            elif (v2 / "cpu" / "cpu.cfs_quota_us").exists():
                p = v2 / "cpu" / f"{CG_NAME}-{name}"
                p.mkdir(exist_ok=True)
                (p / "cpu.cfs_period_us").write_text(str(period))
                (p / "cpu.cfs_quota_us").write_text(str(quota))
                self.kind, self.path = f"cgroup v1 cfs quota {quota} us / period {period} us", p
        except OSError:
            self.path = None
        if self.path is None and name == "slow":
            self.kind = "co-runner pinned to CPU 0 (k = 2 by fair sharing)"
            self.corunner = subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {0})\n"
                                              "while True: pass"])

    def preexec(self) -> None:
        """In the child before exec: join the slowdown."""
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))
        elif self.corunner is not None:
            os.sched_setaffinity(0, {0})

    def close(self) -> None:
        if self.corunner is not None:
            self.corunner.kill()
            self.corunner.wait()
        if self.path is not None:
            for _ in range(20):
                try:
                    self.path.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def _child(args: list[str], slow: Slowdown | None, stdin: Any = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stdin=stdin, text=True,
                            preexec_fn=slow.preexec if slow is not None else None)


def probe(slow: Slowdown | None) -> float:
    p = _child(["--role", "probe"], slow)
    out, _ = p.communicate()
    return float(out.strip())


def run_agent(workload: str, out: Path, slow: Slowdown | None) -> Path:
    server = None
    base = None
    if workload == "demo":
        server = _child(["--role", "server"], None, stdin=subprocess.PIPE)
        base = server.stdout.readline().strip()  # type: ignore[union-attr]
    try:
        args = ["--role", "agent", "--workload", workload, "--out", str(out)] + (["--base-url", base] if base else [])
        p = _child(args, slow)
        stdout, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"{workload} agent failed ({p.returncode})")
        return Path(stdout.strip().splitlines()[-1])
    finally:
        if server is not None:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=30)


def wall_of(trace: Any) -> float:
    import polars as pl

    root = trace.spans.filter(pl.col("kind") == "agent")
    return float(((root.get_column("end_ns") - root.get_column("start_ns")) / 1e9).sum())


def breakdown(trace: Any) -> dict[str, float]:
    """Seconds of the run by place: model calls, child-process tools, other tools, parse, the loop's gaps."""
    import polars as pl

    sp = trace.spans.with_columns(((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("d"))
    root = sp.filter(pl.col("kind") == "agent")
    top = sp.filter(pl.col("parent_id").is_in(root.get_column("span_id").to_list()))
    out = {"model": float(top.filter(pl.col("kind") == "model").get_column("d").sum()),
           "subprocess tools": float(top.filter(pl.col("name").str.starts_with("execute_tool subprocess:"))
                                     .get_column("d").sum()),
           "other tools": float(top.filter((pl.col("kind") == "tool") & ~pl.col("name").str.starts_with(
               "execute_tool subprocess:")).get_column("d").sum()),
           "parse": float(top.filter(pl.col("kind") == "parse").get_column("d").sum())}
    out["gaps"] = float(root.get_column("d").sum()) - sum(out.values())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=["main", "server", "agent", "probe"], default="main")
    ap.add_argument("--workload", default="cpu-heavy")
    ap.add_argument("--out", default=None)
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--workloads", default="cpu-heavy,demo")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=float, default=2.0, help="nominal slowdown of the slow run against the fast one")
    ap.add_argument("--share", type=float, default=0.25, help="CPU share the fast run is capped at")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", default=None, help="keep the traces in this folder")
    args = ap.parse_args()
    if args.role == "server":
        return role_server()
    if args.role == "agent":
        return role_agent(args.workload, args.out, args.base_url)
    if args.role == "probe":
        return role_probe()

    from agentprof.analysis import analyze
    from agentprof.importers import load_any
    from agentprof.replay.orchestration import host_whatif

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="agentprof-validate-"))
    fast_cap = Slowdown(args.share, "fast")
    slow = Slowdown(args.share / args.k, "slow")
    results: dict[str, Any] = {"fast": fast_cap.kind, "slowdown": slow.kind, "k_nominal": args.k, "rounds": args.rounds,
                               "load_before": os.getloadavg()[0], "workloads": {}}
    try:
        for workload in args.workloads.split(","):
            rows = []
            for r in range(args.rounds):
                p_fast, fast = probe(fast_cap), run_agent(workload, tmp / f"{workload}-fast-{r}", fast_cap)
                p_slow, slow_path = probe(slow), run_agent(workload, tmp / f"{workload}-slow-{r}", slow)
                p_fast2, p_slow2 = probe(fast_cap), probe(slow)
                k = (p_slow + p_slow2) / (p_fast + p_fast2)
                tf, ts = load_any(fast), load_any(slow_path)
                fast_s, slow_s = wall_of(tf), wall_of(ts)
                (pred,) = host_whatif(tf, [1 / k])
                (pred_nominal,) = host_whatif(tf, [1 / args.k])
                cb = analyze(tf).to_dict()["cpu_bound"]
                rows.append({"fast_s": fast_s, "slow_s": slow_s, "k_probe": k, "predicted_s": pred,
                             "predicted_nominal_k_s": pred_nominal,
                             "error": (pred - slow_s) / slow_s, "error_nominal_k": (pred_nominal - slow_s) / slow_s,
                             "error_no_host_scaling": (fast_s - slow_s) / slow_s,
                             "orchestration_cpu_share": cb["orchestration_cpu_share"],
                             "orchestration_wall_s": cb["orchestration_wall_s"],
                             "fast_by_place_s": breakdown(tf), "slow_by_place_s": breakdown(ts)})
                if not args.json:
                    x = rows[-1]
                    print(f"{workload} round {r + 1}: fast {fast_s:.2f} s, slow {slow_s:.2f} s (k measured "
                          f"{k:.2f}); predicted {pred:.2f} s -> error {x['error']:+.1%} (nominal k: "
                          f"{x['error_nominal_k']:+.1%}; without host scaling {x['error_no_host_scaling']:+.1%}); "
                          f"orchestration {x['orchestration_cpu_share']:.0%} CPU-bound", flush=True)
                    print("    by place, fast -> slow: " + ", ".join(
                        f"{p} {x['fast_by_place_s'][p]:.2f} -> {x['slow_by_place_s'][p]:.2f} s"
                        for p in x["fast_by_place_s"]), flush=True)
            errs = [x["error"] for x in rows]
            results["workloads"][workload] = {
                "rows": rows, "median_error": statistics.median(errs), "min_error": min(errs), "max_error": max(errs),
                "median_abs_error": statistics.median(abs(e) for e in errs),
                "median_k": statistics.median(x["k_probe"] for x in rows)}
    finally:
        slow.close()
        fast_cap.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    results["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"fast run: {fast_cap.kind}; slow run: {slow.kind}; load average {results['load_before']:.1f} -> {results['load_after']:.1f}")
        for w, d in results["workloads"].items():
            print(f"{w}: median error {d['median_error']:+.1%} (range {d['min_error']:+.1%} .. {d['max_error']:+.1%}) "
                  f"at measured k {d['median_k']:.2f}   (target: within 10 % at k = 2)")
    ok = all(abs(d["median_error"]) <= 0.10 for d in results["workloads"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
