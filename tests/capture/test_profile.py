"""The session model: one profile, one session, one trace file; nesting; decorator and context-manager forms."""

from __future__ import annotations

import asyncio
import re

import pytest

import agentprof
from agentprof.capture.session import current

from .capture_helpers import attrs, load, of_kind, only_trace, raw_records


@agentprof.tool
def step(x):
    return x + 1


def test_decorator_names_file_and_root(tmp_path):
    @agentprof.profile(out=tmp_path)
    def fix_bug(n):
        assert current() is not None
        return sum(step(i) for i in range(n))

    assert fix_bug(3) == 6
    assert current() is None
    path = only_trace(tmp_path)
    assert re.fullmatch(r"fix_bug-\d{8}T\d{6}Z\.jsonl", path.name)
    recs = raw_records(path)
    assert recs[0]["record"] == "meta" and recs[0]["format"] == "agentprof-trace"
    assert recs[0]["source_format"] == "agentprof" and recs[0]["block_size"] == 64
    assert recs[0]["name"] == "fix_bug" and recs[0]["tool_version"] == agentprof.__version__
    assert recs[-1]["record"] == "meta" and recs[-1]["capture_overhead_ns"] > 0 and recs[-1]["spans"] == 4
    trace, rows = load(path)
    (root,) = of_kind(rows, "agent")
    assert root["name"] == "invoke_agent fix_bug" and root["parent_id"] is None
    assert attrs(root)["gen_ai.agent.name"] == "fix_bug"
    assert all(r["session_id"] == root["session_id"] for r in rows)
    assert all(r["start_ns"] >= root["start_ns"] and r["end_ns"] <= root["end_ns"] for r in rows)
    assert trace.meta.capture_overhead_ns == recs[-1]["capture_overhead_ns"]


def test_each_call_is_its_own_run(tmp_path):
    @agentprof.profile("again", out=tmp_path)
    def agent():
        step(1)

    agent()
    agent()
    files = sorted(tmp_path.glob("again-*.jsonl"))
    assert len(files) == 2  # same second: the second run gets a -2 suffix, nothing is overwritten
    assert len({load(f)[1][0]["session_id"] for f in files}) == 2


def test_bare_decorator_and_async_context_manager(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @agentprof.profile
    def plain():
        return step(1)

    assert plain() == 2
    assert len(list((tmp_path / "traces").glob("plain-*.jsonl"))) == 1  # default out="traces/"

    async def main():
        async with agentprof.profile("async-cm", out=tmp_path) as run:
            await asyncio.sleep(0)
            step(2)
        return run

    run = asyncio.run(main())
    _, rows = load(run.path)
    assert [r["kind"] for r in rows] == ["agent", "tool"]
    assert run.spans == 2 and run.session_id == rows[0]["session_id"]
    assert run.trace_id == rows[0]["trace_id"]


def test_agent_exception_propagates_unchanged_and_is_recorded(tmp_path):
    class Boom(Exception):
        pass

    err = Boom("the agent failed")

    @agentprof.tool
    def failing_tool():
        raise err

    @agentprof.profile(out=tmp_path)
    def agent():
        failing_tool()

    with pytest.raises(Boom) as info:
        agent()
    assert info.value is err
    _, rows = load(only_trace(tmp_path))
    tool, = of_kind(rows, "tool")
    root, = of_kind(rows, "agent")
    for r in (tool, root):
        assert r["status"] == "error" and r["error_type"].endswith("Boom")
        assert "the agent failed" not in (r["attributes"] or "")  # messages can hold content: not stored


def test_nested_profile_is_a_subsession(tmp_path):
    with agentprof.profile("outer", out=tmp_path / "outer") as outer:
        step(1)
        with agentprof.span("tool", "delegate"), agentprof.profile("inner", out=tmp_path / "inner") as inner:
            step(2)
            step(3)
        step(4)
    _, orows = load(outer.path)
    _, irows = load(inner.path)
    oroot = next(r for r in orows if r["name"] == "invoke_agent outer")
    iroot_in_outer = next(r for r in orows if r["name"] == "invoke_agent inner")
    delegate = next(r for r in orows if r["name"] == "delegate")
    # outer file: everything, the sub-session linked to its parent session and nested under "delegate"
    assert len(orows) == 1 + 2 + 1 + 1 + 2
    assert iroot_in_outer["parent_id"] == delegate["span_id"]
    assert iroot_in_outer["parent_session_id"] == oroot["session_id"]
    assert attrs(iroot_in_outer)["agentprof.session.role"] == "subagent"
    inner_ids = {r["span_id"] for r in irows}
    assert {r["span_id"] for r in orows if r["session_id"] == iroot_in_outer["session_id"]} == inner_ids
    # inner file: only the sub-session, with its own root as the root
    assert len(irows) == 3
    iroot = of_kind(irows, "agent")[0]
    assert iroot["parent_id"] is None and iroot["span_id"] == iroot_in_outer["span_id"]
    assert all(r["parent_id"] == iroot["span_id"] for r in irows if r is not iroot)


def test_span_kinds_are_validated():
    with pytest.raises(ValueError, match="unknown span kind 'llm'"):
        agentprof.span("llm", "x")
    with pytest.raises(ValueError):
        agentprof.span("tool", "")
    assert agentprof.capture.KINDS == __import__("agentprof.trace.schema", fromlist=["KINDS"]).KINDS


def test_custom_spans_and_wait_reason(tmp_path):
    with agentprof.profile("custom", out=tmp_path) as run:
        with agentprof.span("wait", "user approval", attributes={"agentprof.wait.reason": "permission"}) as s:
            s.set_attribute("app.note", "fine")
        with agentprof.span("orchestration", "plan"):
            sum(range(20000))
    _, rows = load(run.path)
    wait = next(r for r in rows if r["kind"] == "wait")
    assert attrs(wait) == {"agentprof.wait.reason": "permission", "app.note": "fine"}
    assert wait["cpu_ns"] is None
    plan = next(r for r in rows if r["name"] == "plan")
    assert plan["cpu_ns"] > 0


def test_outside_a_profile_everything_passes_through(tmp_path):
    assert step(1) == 2
    with agentprof.span("tool", "x") as s:
        s.set_attribute("a", 1)
    assert agentprof.parse_json('{"a": 1}') == {"a": 1}
    assert list(tmp_path.iterdir()) == []


def test_root_under_an_application_span_is_a_root_in_the_file(tmp_path):
    from opentelemetry.sdk.trace import TracerProvider

    app = TracerProvider(shutdown_on_exit=False).get_tracer("app")
    with app.start_as_current_span("request") as outer, agentprof.profile("inside", out=tmp_path) as run:
        step(1)
    _, rows = load(run.path)
    root = of_kind(rows, "agent")[0]
    assert root["parent_id"] is None  # the application's span is not in this file
    assert root["trace_id"] == f"{outer.get_span_context().trace_id:032x}"  # but the trace continues it


def test_forked_child_leaving_the_profile_does_not_end_the_run(tmp_path):
    import os

    with agentprof.profile("fork", out=tmp_path) as run:
        step(1)
        pid = os.fork()
        if pid == 0:  # the child records its own span, leaves the profile as `with` would, and exits
            step(2)
            run._session.finish(None)
            os._exit(0)
        os.waitpid(pid, 0)
        step(3)
    _, rows = load(run.path)  # one root, no duplicate span ids (the reader validates that)
    assert len(of_kind(rows, "agent")) == 1 and len(of_kind(rows, "tool")) == 3
