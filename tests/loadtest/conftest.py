"""A prefix-caching OpenAI-compatible server in its own process (so its work never shares the client's
interpreter lock), and the bundled hash-only kv-cache-tester sessions the load tests replay."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentprof.importers import load_any
from agentprof.trace.schema import Trace

ROOT = Path(__file__).resolve().parents[2]
KVCT = ROOT / "traces" / "samples" / "kv-cache-tester"
FOUR = [KVCT / f"trace_{n}.json" for n in ("0062", "0121", "0610", "0726")]  # the samples with ~20K-token prompts


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """Base URL (``…/v1``) of ``python -m agentprof.demo.prefix_server``; it stops when its stdin closes."""
    # a 250 ms base time to first token: what a loaded real server takes, well above this client's overhead
    proc = subprocess.Popen([sys.executable, "-m", "agentprof.demo.prefix_server", "--max-seconds", "240",
                             "--base-ms", "250", "--prefill-us", "5", "--decode-ms", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield json.loads(line)["url"]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def served(url: str, model: str) -> list[dict]:
    """The calls the server answered for ``model``, in arrival order, as the server measured them."""
    root = url.rstrip("/").removesuffix("/v1")
    rows = httpx.get(root + "/agentprof/served", timeout=10).json()["served"]
    return [r for r in rows if r["model"] == model]


@pytest.fixture(scope="module")
def four_sessions() -> Trace:
    return load_any([str(p) for p in FOUR])
