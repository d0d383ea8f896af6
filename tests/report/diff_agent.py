"""A small real agent for the ``agentprof diff`` tests: the real ``openai`` SDK streams from a loopback model
server, and five ``@agentprof.tool`` tools do real work (``run_tests`` sleeps as long as it is told, 30 ms in a
baseline; ``lint`` computes for :data:`LINT_CPU_S` of its thread's CPU). One run: 8 model calls, ``run_tests``
and ``lint`` 3 times each, ``read_file`` 3 times, ``search`` twice, ``list_files`` once. :func:`capture` records one run with ``agentprof.profile``, optionally while busy-loop
child processes load the agent's CPU.

As in CI with a hosted model, the load is on the agent's side only: the model server runs in a child process
on the other CPUs (where there are two or more), and the agent's thread shares its CPU with the busy loops."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import agentprof
from agentprof.demo.model_server import Latency, ModelRequest, ModelServer, Reply, ToolCall

PLAN: list[list[tuple[str, dict[str, Any]]]] = [
    [("list_files", {})],
    [("read_file", {"path": "calc.py"}), ("read_file", {"path": "test_calc.py"})],
    [("search", {"pattern": "def "})],
    [("lint", {}), ("run_tests", {})],
    [("read_file", {"path": "notes.txt"}), ("search", {"pattern": "mean"})],
    [("lint", {}), ("run_tests", {})],
    [("lint", {}), ("run_tests", {})],
]
FILES = {"calc.py": "def mean(xs):\n    return sum(xs) / len(xs)\n" * 20,
         "test_calc.py": "from calc import mean\n\ndef test_mean():\n    assert mean([1, 2]) == 1.5\n" * 10,
         "notes.txt": "the mean of an empty list is undefined\n" * 30}
LINT_CPU_S = 0.02
"""CPU ``lint`` uses per call: on a CPU shared with busy loops its calls take several times as long."""
BUSY_S = 30
"""A busy-loop child ends by itself after this many seconds even if nobody stops it."""


def script(req: ModelRequest) -> Reply:
    """Follow :data:`PLAN` turn by turn, then answer."""
    if req.turn < len(PLAN):
        return Reply(text=f"Step {req.turn + 1}: looking at the code and running checks now.",
                     tool_calls=[ToolCall(n, a) for n, a in PLAN[req.turn]])
    return Reply(text="The mean function divides by the length; the tests pass now. " * 3)


def latency(req: ModelRequest, prompt_tokens: int, cached_tokens: int, output_tokens: int) -> Latency:
    return Latency(ttft_s=0.04, per_token_s=0.002)


def run_agent(repo: Path, client: Any, test_s: float) -> str:
    """The agent: call the model, run the tools it asks for, until it answers."""

    @agentprof.tool(name="list_files")
    def list_files() -> str:
        return "\n".join(sorted(os.listdir(repo)))

    @agentprof.tool(name="read_file")
    def read_file(path: str) -> str:
        return (repo / path).read_text(encoding="utf-8")

    @agentprof.tool(name="search")
    def search(pattern: str) -> str:
        rx = re.compile(pattern)
        return "\n".join(f"{p.name}: {ln}" for p in sorted(repo.iterdir()) for ln in
                         p.read_text(encoding="utf-8").splitlines() if rx.search(ln))

    @agentprof.tool(name="run_tests")
    def run_tests() -> str:
        time.sleep(test_s)
        return "2 passed"

    @agentprof.tool(name="lint")
    def lint() -> str:
        t0, n = time.thread_time(), 0
        while time.thread_time() - t0 < LINT_CPU_S:
            n += 1
        return f"{n} checks, 0 problems"

    tools = {"list_files": list_files, "read_file": read_file, "search": search, "run_tests": run_tests,
             "lint": lint}
    specs = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
             for n in tools]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You fix bugs."},
                                      {"role": "user", "content": "Fix the mean of an empty list."}]
    for _ in range(20):
        stream = client.chat.completions.create(model="ci-model", messages=messages, tools=specs, stream=True,
                                                stream_options={"include_usage": True})
        text, calls = "", {}
        for chunk in stream:
            for ch in chunk.choices:
                text += ch.delta.content or ""
                for tc in ch.delta.tool_calls or []:
                    c = calls.setdefault(tc.index, {"id": tc.id, "name": "", "args": ""})
                    c["name"] += tc.function.name or ""
                    c["args"] += tc.function.arguments or ""
        if not calls:
            return text
        messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}}
            for c in calls.values()]})
        for c in calls.values():
            out = tools[c["name"]](**json.loads(c["args"] or "{}"))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
    raise RuntimeError("the agent did not finish in 20 turns")


def cpus() -> tuple[set[int] | None, set[int] | None]:
    """(the agent's CPU, the model server's CPUs), or (None, None) with fewer than two CPUs to split."""
    have = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(have) < 2:
        return None, None
    return {have[-1]}, set(have[:-1])


def busy_loops(n: int, on: set[int] | None) -> list[subprocess.Popen[bytes]]:
    """``n`` child processes that spin on the CPUs ``on`` for at most :data:`BUSY_S` seconds each."""
    pin = f"import os\nos.sched_setaffinity(0, {sorted(on)})\n" if on else ""
    code = pin + f"import time\nt = time.monotonic()\nwhile time.monotonic() - t < {BUSY_S}:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def serve(on: list[int] | None) -> None:
    """The model server's child process: print the base URL, serve until stdin closes."""
    if on:
        os.sched_setaffinity(0, on)
    with ModelServer(script=script, latency=latency, absolute_pacing=True) as server:
        print(server.openai_base_url, flush=True)
        sys.stdin.read()


def server_process(on: set[int] | None) -> tuple[subprocess.Popen[str], str]:
    """Start :func:`serve` in a child process; (the process, its base URL)."""
    code = (f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\nfrom diff_agent import serve\n"
            f"serve({sorted(on) if on else None})\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the model server did not start: {url!r}")
    return proc, url


def capture(out: Path, test_s: float, load: int = 0) -> Path:
    """Capture one run into ``out`` (a folder) and return the trace file; ``load`` busy loops run meanwhile."""
    import openai

    repo = out / "repo"
    repo.mkdir(parents=True)
    for name, text in FILES.items():
        (repo / name).write_text(text, encoding="utf-8")
    agent_cpu, server_cpus = cpus()
    server, url = server_process(server_cpus)
    procs = busy_loops(load, agent_cpu)
    before = os.sched_getaffinity(0) if agent_cpu else None
    try:
        if agent_cpu:
            os.sched_setaffinity(0, agent_cpu)  # this thread only: the agent's loop
        client = openai.OpenAI(base_url=url, api_key="test", max_retries=0,
                               http_client=openai.DefaultHttpxClient(trust_env=False))
        try:
            with agentprof.profile(name="ci-agent", out=out / "traces") as run:
                run_agent(repo, client, test_s)
        finally:
            client.close()
    finally:
        if before:
            os.sched_setaffinity(0, before)
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    assert run.path is not None and run.path.exists(), run.error
    return run.path


def cpu_wait_s(trace: Path) -> float:
    """The run's recorded wait for a CPU (its root span's ``agentprof.runq_ns``, read by the trace reader; 0
    where not recorded)."""
    from agentprof.analysis.diff import LOAD_KEY
    from agentprof.analysis.run_figures import side_figures
    from agentprof.trace.files import read

    return side_figures(read(trace)).value(LOAD_KEY) or 0.0


def steady_pair(out: Path, base_s: float, new_s: float, tries: int = 3, tolerance_s: float = 0.05) -> tuple[Path, Path]:
    """A BASE and a NEW capture whose recorded CPU wait differs by at most ``tolerance_s`` (the machine loaded
    them alike: another process's burst did not land on one of them), trying up to ``tries`` pairs; the last
    pair when none does. What load does to a comparison is the ``load`` captures' test, not this pair's."""
    for i in range(tries):
        pair = capture(out / f"base{i}", base_s), capture(out / f"new{i}", new_s)
        if abs(cpu_wait_s(pair[1]) - cpu_wait_s(pair[0])) <= tolerance_s:
            break
    return pair


def steady_like(ref: Path, out: Path, tool_s: float, tries: int = 3, tolerance_s: float = 0.05) -> Path:
    """A capture whose recorded CPU wait is within ``tolerance_s`` of ``ref``'s (loaded alike), trying up to
    ``tries`` captures; the last one when none is."""
    want = cpu_wait_s(ref)
    for i in range(tries):
        path = capture(out / f"try{i}", tool_s)
        if abs(cpu_wait_s(path) - want) <= tolerance_s:
            break
    return path

