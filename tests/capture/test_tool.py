"""``@agentprof.tool``: names, sync/async, CPU time (async: only the tool's own steps), content opt-in."""

from __future__ import annotations

import asyncio
import time

import pytest

import agentprof

from .capture_helpers import attrs, load, of_kind


def spin(seconds):
    """Busy CPU for ``seconds`` of thread time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@agentprof.tool
def busy(seconds):
    spin(seconds)
    return "done"


@agentprof.tool(name="sleepy")
async def sleepy_cpu(seconds, sleep):
    spin(seconds)
    await asyncio.sleep(sleep)
    spin(seconds)
    return "ok"


def test_names_and_wrapping():
    assert busy.__name__ == "busy" and busy.__agentprof_tool__ == "busy"
    assert sleepy_cpu.__name__ == "sleepy_cpu" and sleepy_cpu.__agentprof_tool__ == "sleepy"
    assert asyncio.iscoroutinefunction(sleepy_cpu)
    with pytest.raises(TypeError):
        agentprof.tool("search")


PATHS = pytest.mark.parametrize("warm", [False, True], ids=["general-path", "hot-path"])
"""A tool's first call in a session takes the general path; later ones the hot path (capture.hot_tool)."""


@PATHS
def test_sync_tool_cpu(tmp_path, warm):
    with agentprof.profile("cpu", out=tmp_path) as run:
        if warm:
            busy(0.0)
        busy(0.05)
        time.sleep(0.05)
        assert run._session.hot_spans == int(warm)
    _, rows = load(run.path)
    tool = of_kind(rows, "tool")[-1]
    assert tool["name"] == "execute_tool busy"
    assert 0.05e9 <= tool["cpu_ns"] <= (tool["end_ns"] - tool["start_ns"])
    a = attrs(tool)
    assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == "busy"
    assert "gen_ai.tool.call.arguments" not in a


@PATHS
def test_async_tool_cpu_excludes_other_tasks(tmp_path, warm):
    async def noisy_neighbour():
        for _ in range(10):
            spin(0.01)  # 0.1 s of CPU on the same thread, while the tool awaits
            await asyncio.sleep(0.005)

    async def main():
        if warm:
            await sleepy_cpu(0.0, 0.0)
        await asyncio.gather(sleepy_cpu(0.02, 0.1), noisy_neighbour())

    with agentprof.profile("async-cpu", out=tmp_path) as run:
        asyncio.run(main())
        assert run._session.hot_spans == int(warm)
    _, rows = load(run.path)
    tool = of_kind(rows, "tool")[-1]
    assert tool["name"] == "execute_tool sleepy"
    wall = tool["end_ns"] - tool["start_ns"]
    assert wall >= 0.1e9
    # its own 2 x 20 ms, not the neighbour's 100 ms that ran on the same thread meanwhile
    assert 0.04e9 <= tool["cpu_ns"] < 0.09e9


def test_content_only_when_asked(tmp_path):
    with agentprof.profile("content", out=tmp_path / "on", capture_content=True) as on:
        busy(0.0)
    with agentprof.profile("content", out=tmp_path / "off") as off:
        busy(0.0)
    a_on = attrs(of_kind(load(on.path)[1], "tool")[0])
    a_off = attrs(of_kind(load(off.path)[1], "tool")[0])
    assert a_on["gen_ai.tool.call.arguments"] == '{"seconds": 0.0}'
    assert a_on["gen_ai.tool.call.result"] == "done"
    assert "gen_ai.tool.call.arguments" not in a_off and "gen_ai.tool.call.result" not in a_off


@agentprof.tool
def lines(n):
    for i in range(n):
        time.sleep(0.01)
        yield i


@agentprof.tool(name="alines")
async def async_lines(n):
    for i in range(n):
        await asyncio.sleep(0.01)
        yield i


def test_generator_tools_span_their_iteration(tmp_path):
    async def consume():
        return [i async for i in async_lines(3)]

    with agentprof.profile("gen", out=tmp_path) as run:
        assert list(lines(3)) == [0, 1, 2]
        assert asyncio.run(consume()) == [0, 1, 2]
        g = lines(10)
        next(g)
        g.close()  # stopped early: the span still ends
    _, rows = load(run.path)
    tools = of_kind(rows, "tool")
    assert [t["name"] for t in tools] == ["execute_tool lines", "execute_tool alines", "execute_tool lines"]
    assert all(t["end_ns"] - t["start_ns"] >= 0.03e9 for t in tools[:2])
    assert all(t["status"] == "ok" for t in tools)
