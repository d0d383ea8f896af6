"""Time split along the critical path, the Amdahl bound, and sub-agents nested in their conversation:
hand-timed span tables (exact figures) and a real captured run with known sleeps (within 2 %)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

import agentprof
from agentprof.analysis import analyze
from agentprof.demo.model_server import Latency, ModelServer, Reply

from .analysis_helpers import TraceBuilder

BUCKETS = ("model_s", "tool_s", "parse_s", "orchestration_s", "wait_s")


def _time(trace):
    return analyze(trace).to_dict()["time"]


def test_sequential_session_buckets_sum_to_wall():
    b = TraceBuilder()
    b.session("s", 0, 10)
    b.model("s", 1, 3, ttft=0.5, stream=True)
    tool = b.span("s", "tool", 4, 7)
    b.span("s", "parse", 5, 5.5, parent=tool)
    b.span("s", "wait", 8, 9, **{"agentprof.wait.reason": "user"})
    t = _time(b.trace())
    assert t["wall_s"] == pytest.approx(10)
    assert t["model_s"] == pytest.approx(2) and t["model_ttft_s"] == pytest.approx(0.5)
    assert t["model_decode_s"] == pytest.approx(1.5)
    assert t["tool_s"] == pytest.approx(2.5) and t["parse_s"] == pytest.approx(0.5)
    assert t["wait_s"] == pytest.approx(1) and t["waits_by_reason"] == {"user_turn": pytest.approx(1)}  # old name
    assert t["orchestration_s"] == pytest.approx(4) and t["glue_s"] == pytest.approx(4)
    assert t["startup_s"] == pytest.approx(1)  # the glue before the first span (the model call at 1 s)
    assert sum(t[k] for k in BUCKETS) == pytest.approx(t["wall_s"])
    assert t["critical_path_s"] == pytest.approx(6)
    assert t["span_sum_s"] == pytest.approx(2 + 3 + 0.5 + 1)
    assert t["amdahl_bound_s"] == pytest.approx(8)


def test_parallel_tools_count_once_on_the_critical_path():
    b = TraceBuilder()
    b.session("s", 0, 5)
    b.model("s", 0, 1)
    for end in (2, 3, 4):  # three tools started together
        b.span("s", "tool", 1, end)
    b.model("s", 4, 5)
    t = _time(b.trace())
    assert t["tool_s"] == pytest.approx(3)  # the longest, not 1 + 2 + 3
    assert t["span_sum_s"] == pytest.approx(2 + 6)
    assert t["critical_path_s"] == pytest.approx(5)
    assert t["critical_path_s"] < t["span_sum_s"]
    assert t["amdahl_bound_s"] == pytest.approx(3)


def test_amdahl_keeps_work_that_ran_alongside_the_model():
    b = TraceBuilder()
    b.session("s", 0, 4)
    b.model("s", 0, 4)
    b.span("s", "tool", 1, 3)  # background work while the model runs
    t = _time(b.trace())
    assert t["wall_s"] == pytest.approx(4)
    assert t["amdahl_bound_s"] == pytest.approx(2)


def test_wrapper_span_around_a_model_call_only_works_outside_it():
    b = TraceBuilder()
    b.session("s", 0, 6)
    step = b.span("s", "orchestration", 0, 5)
    b.model("s", 1, 4, parent=step)
    t = _time(b.trace())
    assert t["model_s"] == pytest.approx(3)
    assert t["orchestration_s"] == pytest.approx(3)  # 2 s of the step itself + 1 s glue
    assert t["glue_s"] == pytest.approx(1) and t["startup_s"] == 0.0  # the step starts with the session
    assert t["amdahl_bound_s"] == pytest.approx(3)


def test_subagents_nest_inside_the_tool_that_ran_them():
    b = TraceBuilder()
    b.session("main", 0, 10)
    task_a = b.span("main", "tool", 2, 8, name="execute_tool Task")
    task_b = b.span("main", "tool", 2, 6, name="execute_tool Task")
    b.session("sub-a", 2.5, 7.5, parent_session="main", role="subagent", parent_span=task_a)
    b.model("sub-a", 3, 7)
    b.session("sub-b", 2, 6, parent_session="main", role="subagent", parent_span=task_b)
    b.model("sub-b", 2, 5.5)
    a = analyze(b.trace())
    t = a.to_dict()["time"]  # the conversation: sub-agent time inside the Task tools
    assert t["wall_s"] == pytest.approx(10)
    assert t["model_s"] == pytest.approx(4)  # sub-a's call is on the critical path, sub-b's is hidden
    assert t["tool_s"] == pytest.approx(1)  # Task a's own time around its sub-agent
    assert t["orchestration_s"] == pytest.approx(4 + 1)  # main glue 4 s + sub-a glue 1 s
    assert sum(t[k] for k in BUCKETS) == pytest.approx(10)
    assert t["span_sum_s"] == pytest.approx(6 + 4 + 4 + 3.5)
    rows = {r["session_id"]: r for r in a.sessions.to_dicts()}
    assert rows["main"]["tool_s"] == pytest.approx(6)  # alone, the main session only sees its tools
    assert rows["sub-a"]["model_s"] == pytest.approx(4) and rows["sub-a"]["wall_s"] == pytest.approx(5)


def test_untimed_spans_are_left_out_with_a_note():
    b = TraceBuilder()
    b.session("s", 0, 4)
    b.model("s", 0, 1)
    b.span("s", "tool", None, None)
    a = analyze(b.trace())
    assert a.time.wall_s == pytest.approx(4) and a.time.tool_s == 0
    assert any(d["kind"] == "untimed_spans" for d in a.diagnostics)


def test_captured_run_with_known_sleeps(tmp_path):
    """A real profiled agent: glue code, an SDK model call against the loopback server (server-side TTFT),
    a span-timed model phase, a tool, three parallel tools, a parse and a user wait, each a known sleep.

    Expected figures are the sleeps; phases that involve more than a sleep (the HTTP round trip of the SDK
    call, starting threads) are timed by the test's own stopwatch around them.
    """
    ttft = 0.4

    def latency(req, prompt, cached, out):
        return Latency(ttft_s=ttft, per_token_s=0.0)

    @agentprof.tool
    def work(seconds: float) -> str:
        time.sleep(seconds)
        return "ok"

    watch: dict[str, float] = {}

    def timed(key, fn):  # on the spans' own clock (time_ns): a span inside it cannot come out longer than it
        t0 = time.time_ns()
        fn()
        watch[key] = watch.get(key, 0.0) + (time.time_ns() - t0) / 1e9

    def call_model():
        for _ in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                stream=True):
            pass

    def parallel_tools():
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(work, (0.15, 0.25, 0.35)))

    def sleep(key, seconds):  # the test's own stopwatch: a loaded machine oversleeps, the truth is what elapsed
        timed(key, lambda: time.sleep(seconds))

    with ModelServer(script=lambda req: Reply(text="done"), latency=latency) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "warm up"}])  # not profiled
        with agentprof.profile("timing", out=tmp_path) as run:
            t_body = time.time_ns()
            sleep("glue", 0.2)
            timed("sdk", call_model)
            with agentprof.span("model", "chat local-model"):
                sleep("local_model", 0.3)
            timed("tool", lambda: work(0.3))
            sleep("glue", 0.15)
            timed("parallel", parallel_tools)
            with agentprof.span("parse", "parse plan"):
                sleep("parse", 0.2)
            with agentprof.span("wait", "approval", attributes={"agentprof.wait.reason": "permission"}):
                sleep("wait", 0.25)
            sleep("glue", 0.1)
            # what no stopwatch covers: the code between the phases (span set-up, a loaded machine's preemption)
            between = (time.time_ns() - t_body) / 1e9 - sum(watch.values())
    trace = run.load()
    a = analyze(trace)
    t = a.time
    assert watch["sdk"] >= ttft and watch["parallel"] >= 0.35 and watch["glue"] >= 0.45
    spans = trace.spans
    tools = spans.filter(spans["kind"] == "tool").sort("start_ns")
    sdk = spans.filter((spans["kind"] == "model") & (spans["name"] != "chat local-model"))
    assert sdk.height == 1 and tools.height == 4
    # Inside a stopwatch phase, what no span covers (the SDK's set-up before its span opens, starting the
    # pool's threads) is orchestration: read from the raw spans, not the analysis (a loaded machine: ~10 ms).
    single, pooled = tools.head(1), tools.tail(3)
    pooled_union = (pooled["end_ns"].max() - pooled["start_ns"].min()) / 1e9  # the three overlap: one interval
    tool_gap = watch["tool"] - (single["end_ns"][0] - single["start_ns"][0]) / 1e9 + watch["parallel"] - pooled_union
    sdk_gap = watch["sdk"] - (sdk["end_ns"][0] - sdk["start_ns"][0]) / 1e9
    assert -0.002 <= tool_gap < 0.1 and -0.002 <= sdk_gap < 0.1, (tool_gap, sdk_gap)
    expected = {"model_s": watch["sdk"] - sdk_gap + watch["local_model"],
                "tool_s": watch["tool"] + watch["parallel"] - tool_gap,
                "parse_s": watch["parse"], "wait_s": watch["wait"],
                "orchestration_s": watch["glue"] + tool_gap + sdk_gap}
    assert 0 <= between < 0.1, between
    # the run's time outside every stopwatch (between them, and from the root span's start and to its end around
    # the body): orchestration, or a span's own set-up; a loaded machine stretches it
    outside = t.wall_s - sum(watch.values())
    assert between - 0.002 <= outside < 0.1, (outside, between)
    for k, v in expected.items():
        slack = max(0.02 * v, outside + 0.002) if k == "orchestration_s" else 0.02 * v
        assert getattr(t, k) == pytest.approx(v, abs=slack), (k, getattr(t, k), v, between)
    assert t.wall_s == pytest.approx(sum(expected.values()), rel=0.02)
    assert t.wait_by_reason == {"approval": pytest.approx(watch["wait"], rel=0.02)}
    assert ttft <= t.model_ttft_s <= watch["sdk"]  # the streamed call's first chunk
    durs = sorted(((tools["end_ns"] - tools["start_ns"]) / 1e9).to_list())
    tool_sum = sum(durs)
    # each tool span holds its sleep (a sleep never ends early) and no more than the stopwatch around it
    assert all(d >= s for d, s in zip(durs, sorted((0.3, 0.15, 0.25, 0.35)), strict=True))
    assert tool_sum <= watch["tool"] + 3 * watch["parallel"]
    assert t.tool_s < tool_sum  # parallel tools count once
    assert t.amdahl_bound_s == pytest.approx(t.wall_s - expected["model_s"], rel=0.02)


def _imported(trace, fmt: str = "codex"):
    from dataclasses import replace

    return replace(trace, meta=replace(trace.meta, source_format=fmt, extra={**trace.meta.extra, "formats": [fmt]}))


def test_agent_active_time_leaves_out_user_approval_and_idle_waits():
    """wall 100 s: model 10, tool 10, a user turn 30, an approval 20, a retry back-off 5 (agent time), glue."""
    b = TraceBuilder()
    b.session("s", 0, 100)
    b.model("s", 0, 10)
    b.span("s", "tool", 10, 20)
    b.span("s", "wait", 20, 50, **{"agentprof.wait.reason": "user_turn"})
    b.span("s", "wait", 50, 70, **{"agentprof.wait.reason": "permission"})  # old name of approval
    b.span("s", "wait", 70, 75, **{"agentprof.wait.reason": "retry"})
    b.model("s", 75, 95)
    t = _time(b.trace())
    assert t["waits_by_reason"] == {"user_turn": pytest.approx(30), "approval": pytest.approx(20),
                                    "retry": pytest.approx(5)}
    assert t["agent_active_s"] == pytest.approx(50)  # 100 - 30 - 20
    assert t["amdahl_bound_s"] == pytest.approx(70) and t["amdahl_bound_active_s"] == pytest.approx(20)
    sh = t["shares"]
    assert sh["of_wall"]["model"] == pytest.approx(0.3) and sh["of_agent_active"]["model"] == pytest.approx(0.6)
    assert sh["of_agent_active"]["wait"] == pytest.approx(5 / 50)  # the retry only
    assert sh["of_wall"]["max_speedup"] == pytest.approx(100 / 70)
    assert sh["of_agent_active"]["max_speedup"] == pytest.approx(50 / 20)


def test_gaps_between_imported_records_are_residue_or_idle_not_orchestration():
    b = TraceBuilder()
    b.session("s", 0, 1000)
    b.model("s", 0, 10)
    b.model("s", 10.5, 20)      # 0.5 s between records: residue
    b.model("s", 50, 60)        # 30 s nobody accounts for: orchestration (the CLI's own time, hooks)
    b.model("s", 600, 1000)     # 540 s with nothing recorded: idle
    captured = _time(b.trace())
    assert captured["orchestration_s"] == pytest.approx(570.5) and "residue" not in captured["waits_by_reason"]
    t = _time(_imported(b.trace()))
    assert t["waits_by_reason"] == {"residue": pytest.approx(0.5), "idle": pytest.approx(540)}
    assert t["orchestration_s"] == pytest.approx(30) and t["glue_s"] == pytest.approx(30)
    assert sum(t[k] for k in BUCKETS) == pytest.approx(t["wall_s"])
    assert t["agent_active_s"] == pytest.approx(1000 - 540)
    assert t["critical_path_s"] == pytest.approx(1000 - 570.5)
