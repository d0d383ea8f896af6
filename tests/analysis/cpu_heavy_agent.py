"""A fixture agent whose own loop (outside any span) spends most of its time in one named function,
``rank_candidate_patches``; its tools sleep, parse JSON and run a thread-pool tool, so samples land in every
kind of place."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import agentprof
from agentprof.capture import Run


def rank_candidate_patches(n: int) -> int:
    """Pure-Python CPU work: the hotspot the tests expect on top."""
    score = 0
    for i in range(n):
        score = (score * 31 + i) % 1_000_003
    return score


@agentprof.tool
def read_file(path: str) -> str:
    time.sleep(0.03)  # I/O-bound: waits
    return json.dumps({"path": path, "lines": list(range(200))})


@agentprof.tool
def count_tokens(text: str) -> int:
    total = 0
    for ch in text * 20:
        total += ord(ch) & 3
    return total


@agentprof.tool
async def fetch(url: str) -> str:
    await asyncio.sleep(0.003)
    return url


def run(out: str, steps: int = 4, work: int = 600_000, sample: bool | float = True) -> Run:
    with agentprof.profile("cpu-heavy", out=out, sample=sample) as run, ThreadPoolExecutor(2) as pool:
        for step in range(steps):
            rank_candidate_patches(work)
            doc = agentprof.parse_json(read_file(f"src/{step}.py"), name="tool_result")
            pool.submit(count_tokens, json.dumps(doc)).result()
            # the async tool in an event loop of a pool thread (the caller may already run a loop on this one)
            pool.submit(asyncio.run, fetch(f"http://127.0.0.1/{step}")).result()
    return run
