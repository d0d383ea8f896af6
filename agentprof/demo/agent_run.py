"""Capture one run of the bundled demo agent, unmodified, against the loopback model server.

The agent (:mod:`agentprof.demo.agent`) is plain code that knows nothing about agentprof. From the outside,
its call is wrapped in ``agentprof.profile`` and the entries of its ``TOOLS`` registry in ``agentprof.tool``
(restored afterwards); the real ``openai`` SDK talks to a :class:`ModelServer` on 127.0.0.1 that answers as
the scripted model with latencies from a device model. The agent works on a fresh copy of the sample
repository in a temporary folder, and the run counts only if the repository's tests pass afterwards.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentprof.demo.latency import DeviceLatency
from agentprof.demo.model_server import ModelServer, ServedCall
from agentprof.errors import AgentprofError

TASK = ("The statistics tests fail. Find the bug in the `calc` package, fix it with the smallest correct change, "
        "and make sure the whole test suite passes.")
PROFILE_NAME = "demo-agent"


@dataclass
class RepoTests:
    """One run of the sample repository's unit tests."""

    returncode: int
    ran: int
    failed: int

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and self.ran > 0


@dataclass
class AgentRun:
    """What the captured run did: its trace file, answer, the calls the server served and the repository's
    test outcomes before and after."""

    trace_path: Path
    answer: str
    served: list[ServedCall]
    before: RepoTests
    after: RepoTests
    diff: str
    wall_s: float
    latency: DeviceLatency


def run_repo_tests(repo: Path) -> RepoTests:
    """Run the sample repository's tests in a child process (outside any profile)."""
    proc = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests"], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    ran = re.search(r"^Ran (\d+) tests?", proc.stderr, re.M)
    bad = re.search(r"^FAILED \((.*)\)", proc.stderr, re.M)
    failed = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", bad.group(1))) if bad else 0
    return RepoTests(proc.returncode, int(ran.group(1)) if ran else 0, failed)


def repo_diff(repo: Path, original: dict[str, str]) -> str:
    """Unified diff of the repository against its original files."""
    out: list[str] = []
    for rel, text in original.items():
        p = repo / rel
        now = p.read_text(encoding="utf-8") if p.exists() else ""
        if now != text:
            out.extend(difflib.unified_diff(text.splitlines(keepends=True), now.splitlines(keepends=True),
                                            f"a/{rel}", f"b/{rel}"))
    return "".join(out)


@contextmanager
def profiled_tools(tools: MutableMapping[str, Callable[..., Any]]) -> Iterator[None]:
    """Wrap every entry of a tool registry in ``agentprof.tool(name=...)`` for the duration; restore after."""
    import agentprof

    originals = dict(tools)
    try:
        for name, fn in originals.items():
            tools[name] = agentprof.tool(name=name)(fn)
        yield
    finally:
        for name, fn in originals.items():
            tools[name] = fn


@contextmanager
def slowed_tools(tools: MutableMapping[str, Callable[..., Any]], factors: Mapping[str, float]) -> Iterator[None]:
    """Make the named tools ``factor`` times slower for the duration: each call runs the tool, then sleeps
    ``(factor - 1)`` times as long as the tool took (a regression to find with ``agentprof diff``)."""
    unknown = sorted(set(factors) - set(tools))
    if unknown:
        raise AgentprofError(f"cannot slow down unknown tool(s) {', '.join(unknown)} (tools: {', '.join(tools)})")
    originals = dict(tools)

    def slow(fn: Callable[..., Any], factor: float) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                time.sleep(max(0.0, (factor - 1.0) * (time.perf_counter() - t0)))

        return wrapper

    try:
        for name, factor in factors.items():
            tools[name] = slow(originals[name], float(factor))
        yield
    finally:
        for name, fn in originals.items():
            tools[name] = fn


def capture_agent_run(traces_dir: str | Path, latency: DeviceLatency, model: str | None = None,
                      repo_dir: str | Path | None = None, tool_slowdown: Mapping[str, float] | None = None,
                      system_prompt: str | Callable[[], str] | None = None) -> AgentRun:
    """Run the demo agent once under ``agentprof.profile`` and return what happened (see :class:`AgentRun`).

    The sample repository is written to a temporary folder, or to ``repo_dir`` (which is then kept).
    ``tool_slowdown`` (``{"run_tests": 5.0}``) makes tools slower (:func:`slowed_tools`); ``system_prompt``
    replaces the agent's (a function is rendered before every model call); both set up a change for
    ``agentprof diff`` to find.

    Raises :class:`AgentprofError` when no trace could be written or the agent did not fix the bug.
    """
    import openai

    import agentprof
    from agentprof.demo import agent
    from agentprof.demo.sample_repo import FILES, materialize
    from agentprof.demo.scripted_model import scripted_reply

    with tempfile.TemporaryDirectory(prefix="agentprof-demo-repo-") as tmp:
        repo = materialize(Path(repo_dir) if repo_dir is not None else Path(tmp) / "calc")
        before = run_repo_tests(repo)
        with ModelServer(script=scripted_reply, latency=latency, absolute_pacing=True) as server:
            http = openai.DefaultHttpxClient(trust_env=False)  # loopback: never through a proxy
            client = openai.OpenAI(base_url=server.openai_base_url, api_key="demo-no-key-needed", max_retries=0,
                                   http_client=http)
            t0 = time.perf_counter()
            try:
                with slowed_tools(agent.TOOLS, tool_slowdown or {}), profiled_tools(agent.TOOLS), \
                        agentprof.profile(name=PROFILE_NAME, out=traces_dir, instrument_json=True,
                                          instrument_subprocess=True, sample=True) as run:
                    answer = agent.run(TASK, repo, client, model or latency.model,
                                       system_prompt=system_prompt if system_prompt is not None
                                       else agent.SYSTEM_PROMPT)
            finally:
                client.close()
            wall = time.perf_counter() - t0
            served = list(server.log)
        after = run_repo_tests(repo)
        diff = repo_diff(repo, FILES)
    if run.path is None or not run.path.exists():
        raise AgentprofError(f"{traces_dir}: the demo's trace could not be written ({run.error})")
    if not after.passed:
        raise AgentprofError(f"the demo agent did not fix the sample repository: {after.failed} of {after.ran} "
                             f"tests still fail (trace kept in {run.path})")
    return AgentRun(run.path, answer, served, before, after, diff, wall, latency)
