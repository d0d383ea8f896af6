"""The tool-call hot path records what the general path records, and gives way to it wherever they could differ."""

from __future__ import annotations

import asyncio
import re
import threading
import warnings

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

import agentprof
from agentprof import semconv as sc
from agentprof.capture.failsafe import CaptureWarning

from .capture_helpers import load, raw_records
from .test_otlp import collector  # noqa: F401  (fixture)


@agentprof.tool
def add(a, b=1):
    return a + b


VARYING = ("span_id", "start_ns", "end_ns")


def _same_shape(record):
    """A tool record without what differs from call to call (ids, times, CPU and the wait for one)."""
    out = {k: v for k, v in record.items() if k not in VARYING}
    out["attributes"] = {k: v for k, v in record["attributes"].items() if k not in (sc.CPU_NS, sc.RUNQ_NS)}
    return out


def test_hot_and_general_paths_write_the_same_line(tmp_path):
    with agentprof.profile("same", out=tmp_path) as run:
        sess = run._session
        assert sess.hot is not None
        hot = [add(i) for i in range(3)]  # the first call fills the tool's cache on the general path
        assert sess.hot_spans == 2
        sess.hot = None
        general = [add(i, b=2) for i in range(3)]
        assert sess.hot_spans == 2
        sess.refresh_hot()
    assert hot == [1, 2, 3] and general == [2, 3, 4]
    lines = [line for line in run.path.read_bytes().splitlines() if b'"execute_tool add"' in line]
    records = [r for r in raw_records(run.path) if r.get("name") == "execute_tool add"]
    assert len(records) == 6 and len({r["span_id"] for r in records}) == 6
    assert all(_same_shape(r) == _same_shape(records[0]) for r in records)
    # byte for byte, once the varying numbers are blanked: same keys, same order, same escaping
    blank = [re.sub(rb'"(span_id|start_ns|end_ns|agentprof\.cpu_ns|agentprof\.runq_ns)":"?[0-9a-f]+"?', rb'"\1":0', x)
             for x in lines]
    assert len(set(blank)) == 1
    # where the thread's schedstat is readable, both paths record the calls' wait for a CPU
    assert all(sc.RUNQ_NS in r["attributes"] for r in records) == (sess.runq is not None)
    (root,) = [r for r in raw_records(run.path) if r.get("kind") == "agent"]
    for r in records:
        assert r["parent_id"] == root["span_id"] and r["trace_id"] == root["trace_id"]
        assert r["start_ns"] <= r["end_ns"] and r["attributes"][sc.CPU_NS] >= 0
    t, rows = load(run.path)
    assert t.meta.extra["spans"] == 7  # the final meta counts both paths' spans


@agentprof.tool
async def async_add(a, b=1):
    await asyncio.sleep(0)
    return a + b


def test_async_tools_run_hot_and_write_the_same_line(tmp_path):
    async def calls(b):
        return [await async_add(i, b=b) for i in range(3)]

    with agentprof.profile("async-same", out=tmp_path) as run:
        sess = run._session
        hot = asyncio.run(calls(1))
        assert sess.hot_spans == 2
        sess.hot = None
        general = asyncio.run(calls(2))
        sess.refresh_hot()
        with pytest.raises(TypeError):  # an exception on the hot path: recorded, propagated unchanged
            asyncio.run(async_add("x"))
        assert sess.hot_spans == 2
    assert hot == [1, 2, 3] and general == [2, 3, 4]
    records = [r for r in raw_records(run.path) if r.get("name") == "execute_tool async_add"]
    assert len(records) == 7
    assert all(_same_shape(r) == _same_shape(records[0]) for r in records[:6])
    assert records[6]["status"] == "error" and records[6]["error_type"] == "TypeError"


def test_changes_through_the_span_api_take_the_general_way(tmp_path):
    @agentprof.tool
    def noted(mode):
        span = otel_trace.get_current_span()
        if mode == "attr":
            span.set_attribute("app.note", "kept")
        elif mode == "status":
            span.set_status(Status(StatusCode.ERROR, "bad"))
        elif mode == "name":
            span.update_name("execute_tool renamed")
        elif mode == "raise":
            raise LookupError("from the tool")
        return mode

    with agentprof.profile("api", out=tmp_path) as run:
        noted("plain")
        noted("plain")
        assert run._session.hot_spans == 1
        for mode in ("attr", "status", "name"):
            assert noted(mode) == mode
        err = LookupError("x")
        with pytest.raises(LookupError) as caught:
            noted("raise")
        assert str(caught.value) == "from the tool" and caught.value is not err
        assert run._session.hot_spans == 1
    records = [r for r in raw_records(run.path) if r.get("kind") == "tool"]
    by_mode = dict(zip(["plain", "plain2", "attr", "status", "name", "raise"], records, strict=True))
    assert by_mode["attr"]["attributes"]["app.note"] == "kept"
    assert by_mode["status"]["status"] == "error" and by_mode["status"]["error_type"] is None
    assert by_mode["name"]["name"] == "execute_tool renamed"
    assert by_mode["raise"]["status"] == "error" and by_mode["raise"]["error_type"] == "LookupError"
    assert all(r["attributes"][sc.CPU_NS] >= 0 for r in records)


def test_spans_inside_a_hot_tool_nest_under_it_and_it_under_the_application_span(tmp_path):
    app = TracerProvider(shutdown_on_exit=False).get_tracer("app")

    @agentprof.tool
    def outer():
        with app.start_as_current_span("app.inside"):
            return add(1)

    with agentprof.profile("nest", out=tmp_path) as run:
        outer()
        add(0)  # every tool's cache filled: the calls below run hot
        with app.start_as_current_span("app.step") as step:
            outer()
        step_id = f"{step.get_span_context().span_id:016x}"
        assert run._session.hot_spans >= 2
    records = raw_records(run.path)
    last_outer = [r for r in records if r.get("name") == "execute_tool outer"][-1]
    last_add = [r for r in records if r.get("name") == "execute_tool add"][-1]
    assert last_outer["parent_id"] == step_id  # the application's span was current: the tool nests under it
    assert last_outer["trace_id"] == f"{step.get_span_context().trace_id:032x}"
    assert last_outer["attributes"][sc.SESSION_ID] == run.session_id
    # the add call inside it: under the application's span the tool opened (not in the file), same trace
    assert last_add["trace_id"] == last_outer["trace_id"]
    assert last_add["parent_id"] not in (last_outer["parent_id"], last_outer["span_id"], None)
    assert last_add["end_ns"] <= last_outer["end_ns"]


def test_a_profile_that_turns_otlp_on_takes_enclosing_sessions_off_the_hot_path(tmp_path, collector, monkeypatch):  # noqa: F811
    with agentprof.profile("outer", out=tmp_path) as outer:
        add(0)
        add(0)
        assert outer._session.hot is not None and outer._session.hot_spans == 1
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        with agentprof.profile("inner", out=tmp_path) as inner:
            assert inner._session.hot is None  # two files to write: the general path
            assert outer._session.hot is None  # spans must reach OTLP now
            add(1)
        add(2)
        assert outer._session.hot_spans == 1
    names = [s.name for s in collector.wait_for(3)]
    assert names.count("execute_tool add") >= 2


def test_content_capture_never_runs_hot(tmp_path):
    with agentprof.profile("content", out=tmp_path, capture_content=True) as run:
        add(1)
        add(2)
        assert run._session.hot is None and run._session.hot_spans == 0
    records = [r for r in raw_records(run.path) if r.get("kind") == "tool"]
    assert [r["attributes"][sc.TOOL_CALL_RESULT] for r in records] == ["2", "3"]


def test_a_tool_still_running_when_its_session_ends(tmp_path):
    started, release, done = threading.Event(), threading.Event(), []

    @agentprof.tool
    def slow():
        started.set()
        release.wait(10)
        return "late"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with agentprof.profile("early-end", out=tmp_path) as run:
            release.set()
            slow()  # fills the tool's cache: the next call runs hot
            release.clear()
            started.clear()
            t = threading.Thread(target=lambda: done.append(slow()))  # the thread inherits the session
            t.start()
            assert started.wait(10)
        release.set()  # the session has ended and its file is closed while the tool runs
        t.join(10)
    assert done == ["late"]
    assert not [w for w in caught if issubclass(w.category, CaptureWarning)]
    _, rows = load(run.path)  # complete and valid; the late call is not in it
    assert [r["name"] for r in rows] == ["invoke_agent early-end", "execute_tool slow"]


def test_custom_spans_run_hot_and_record_what_the_general_path_records(tmp_path):
    def phase(note=None):
        with agentprof.span("orchestration", "plan") as s:
            if note:
                s.set_attribute("app.note", note)
            add(1)  # nests under the phase
            return s.span_id

    with agentprof.profile("custom", out=tmp_path) as run:
        sess = run._session
        ids = [phase(), phase(), phase()]
        hot = sess.hot_spans
        sess.hot = None
        ids += [phase(), phase()]
        sess.refresh_hot()
        ids.append(phase(note="kept"))
        with pytest.raises(KeyError), agentprof.span("orchestration", "plan"):
            raise KeyError("x")
        with agentprof.span("wait", "user"):  # a kind that measures no CPU: always the general path
            pass
    assert hot == 3 + 2  # the three phases, and the add calls inside them after the first (which fills its cache)
    records = raw_records(run.path)
    plans = [r for r in records if r.get("name") == "plan"]
    assert [r["span_id"] for r in plans[:6]] == ids
    assert all(_same_shape(r) == _same_shape(plans[0]) for r in plans[:5])
    assert plans[5]["attributes"]["app.note"] == "kept" and sc.CPU_NS in plans[5]["attributes"]
    assert plans[6]["status"] == "error" and plans[6]["error_type"] == "KeyError"
    adds = [r for r in records if r.get("name") == "execute_tool add"]
    assert [a["parent_id"] for a in adds] == ids
    (wait,) = [r for r in records if r.get("name") == "user"]
    assert sc.CPU_NS not in wait["attributes"]


def test_parses_run_hot_with_their_byte_counts(tmp_path):
    docs = ['{"a": 1}', '{"path": "src/\u00e9t\u00e9.py", "n": [1, 2, 3]}', b'[1, 2, 3, 4]']
    with agentprof.profile("parse", out=tmp_path, instrument_json=True) as run:
        sess = run._session
        hot = [agentprof.parse_json(d, name="args") for d in docs]
        import json
        loaded = json.loads('{"via": "json.loads"}')  # instrument_json: the same path, span json.loads
        assert sess.hot_spans == 4
        sess.hot = None
        general = [agentprof.parse_json(d, name="args") for d in docs]
        sess.refresh_hot()
        with pytest.raises(ValueError):  # a parse error on the hot path: recorded, propagated unchanged
            agentprof.parse_json("{broken", name="args")
    assert hot == general and loaded == {"via": "json.loads"}
    records = [r for r in raw_records(run.path) if r.get("kind") == "parse"]
    args = [r for r in records if r["name"] == "args"]
    sizes = [len(d.encode() if isinstance(d, str) else d) for d in docs]
    assert [r["attributes"][sc.PARSE_BYTES] for r in args[:6]] == sizes * 2
    shapes = [{**_same_shape(r), "attributes": {k: v for k, v in r["attributes"].items()
                                                 if k not in (sc.CPU_NS, sc.RUNQ_NS, sc.PARSE_BYTES)}} for r in args[:6]]
    assert all(s == shapes[0] for s in shapes)
    assert args[6]["status"] == "error" and args[6]["error_type"] == "json.decoder.JSONDecodeError"
    assert args[6]["attributes"][sc.PARSE_BYTES] == len("{broken")
    (via,) = [r for r in records if r["name"] == "json.loads"]
    assert via["attributes"][sc.PARSE_BYTES] == len('{"via": "json.loads"}')
