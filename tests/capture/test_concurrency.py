"""Concurrency: no span is lost and every span nests under the span that was current when its work was
handed over, across thread pools, raw threads and asyncio tasks, without changes to the agent's code."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import agentprof
from agentprof.capture import wrap

from .capture_helpers import load, of_kind, only_trace

STEPS, PER_STEP = 10, 10  # 100 tool calls


@agentprof.tool
def work(step, i):
    payload = agentprof.parse_json(json.dumps({"step": step, "i": i}), name="args")
    return payload["step"] * 100 + payload["i"]


@agentprof.tool(name="async_work")
async def async_work(step, i):
    await asyncio.sleep(0.001 * (i % 3))
    payload = agentprof.parse_json(json.dumps({"step": step, "i": i}), name="args")
    await asyncio.sleep(0)
    return payload["step"] * 100 + payload["i"]


def check_tree(rows, step_names, tool_name):
    """Every tool sits under its step (by the step number it was given), every parse under its tool."""
    by_id = {r["span_id"]: r for r in rows}
    assert len(by_id) == len(rows)  # no duplicate span ids
    root = of_kind(rows, "agent")[0]
    steps = {r["name"]: r for r in rows if r["name"] in step_names}
    assert len(steps) == STEPS and all(s["parent_id"] == root["span_id"] for s in steps.values())
    tools = [r for r in rows if r["name"] == f"execute_tool {tool_name}"]
    parses = of_kind(rows, "parse")
    assert len(tools) == STEPS * PER_STEP and len(parses) == STEPS * PER_STEP
    children = {}
    for p in parses:
        children.setdefault(p["parent_id"], []).append(p)
    for t in tools:
        step_span = by_id[t["parent_id"]]
        assert step_span["name"] in step_names
        assert len(children[t["span_id"]]) == 1  # its own parse, nowhere else
        assert t["start_ns"] >= step_span["start_ns"] and t["end_ns"] <= step_span["end_ns"]
    counts = {}
    for t in tools:
        counts[by_id[t["parent_id"]]["name"]] = counts.get(by_id[t["parent_id"]]["name"], 0) + 1
    assert set(counts.values()) == {PER_STEP}
    assert all(r["session_id"] == root["session_id"] for r in rows)


def test_thread_pool_created_before_the_profile(tmp_path):
    pool = ThreadPoolExecutor(max_workers=8)  # worker threads exist before profiling starts
    list(pool.map(lambda x: x, range(8)))
    with agentprof.profile("threads", out=tmp_path):
        results = []
        for step in range(STEPS):
            with agentprof.span("orchestration", f"step {step}"):
                futures = [pool.submit(work, step, i) for i in range(PER_STEP)]
                results += [f.result() for f in futures]
    pool.shutdown()
    assert sorted(results) == sorted(s * 100 + i for s in range(STEPS) for i in range(PER_STEP))
    _, rows = load(only_trace(tmp_path))
    check_tree(rows, {f"step {s}" for s in range(STEPS)}, "work")


def test_raw_threads_and_map(tmp_path):
    with agentprof.profile("raw", out=tmp_path):
        for step in range(STEPS):
            with agentprof.span("orchestration", f"step {step}"):
                if step % 2:
                    threads = [threading.Thread(target=work, args=(step, i)) for i in range(PER_STEP)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                else:
                    with ThreadPoolExecutor(4) as ex:
                        list(ex.map(work, [step] * PER_STEP, range(PER_STEP)))
    _, rows = load(only_trace(tmp_path))
    check_tree(rows, {f"step {s}" for s in range(STEPS)}, "work")


def test_asyncio_tasks(tmp_path):
    @agentprof.profile(out=tmp_path)
    async def async_agent():
        async def step(n):
            async with agentprof.span("orchestration", f"step {n}"):
                return await asyncio.gather(*(async_work(n, i) for i in range(PER_STEP)))

        return await asyncio.gather(*(step(n) for n in range(STEPS)))

    out = asyncio.run(async_agent())
    assert [x for xs in out for x in xs] == [s * 100 + i for s in range(STEPS) for i in range(PER_STEP)]
    _, rows = load(only_trace(tmp_path))
    check_tree(rows, {f"step {s}" for s in range(STEPS)}, "async_work")


def test_wrap_helper_for_foreign_pools(tmp_path):
    from multiprocessing.pool import ThreadPool

    with agentprof.profile("pool", out=tmp_path), ThreadPool(4) as pool:
        for step in range(STEPS):
            with agentprof.span("orchestration", f"step {step}"):
                pool.starmap(wrap(work), [(step, i) for i in range(PER_STEP)])
    _, rows = load(only_trace(tmp_path))
    check_tree(rows, {f"step {s}" for s in range(STEPS)}, "work")


def test_concurrent_profiles_keep_their_own_spans(tmp_path):
    @agentprof.profile(out=tmp_path)
    async def agent(n):
        await asyncio.gather(*(async_work(n, i) for i in range(5)))
        return n

    async def main():
        return await asyncio.gather(*(agent(n) for n in range(6)))

    assert asyncio.run(main()) == list(range(6))

    def threaded(n):
        with agentprof.profile(f"thread{n}", out=tmp_path / "t"):
            for i in range(5):
                work(n, i)

    threads = [threading.Thread(target=threaded, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    files = sorted(tmp_path.glob("agent-*.jsonl")) + sorted((tmp_path / "t").glob("*.jsonl"))
    assert len(files) == 10
    sessions = set()
    for f in files:
        _, rows = load(f)
        assert len(rows) == 1 + 5 + 5 and len(of_kind(rows, "agent")) == 1
        assert len({r["session_id"] for r in rows}) == 1
        sessions.add(rows[0]["session_id"])
        # each file holds one agent's calls: all tools carry the same step number n
        assert len({json.dumps(r["parent_id"]) for r in of_kind(rows, "tool")}) == 1
    assert len(sessions) == 10
