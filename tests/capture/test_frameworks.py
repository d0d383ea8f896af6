"""Tools of openai-agents, pydantic-ai and LangGraph are recorded with no per-tool decoration, against the
loopback OpenAI-compatible server, streamed and not; a tool also decorated with ``@agentprof.tool`` is
recorded once."""

from __future__ import annotations

import asyncio
import json

import pytest

import agentprof
from agentprof.demo.model_server import ModelServer, Reply, ToolCall

from .capture_helpers import load

TOOLS = ("get_weather", "add_numbers", "shout")


def three_tools_then_answer(req):
    """First turn: call the three tools; then answer from their results."""
    if not req.tool_results:
        return Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="c1"),
                                 ToolCall("add_numbers", {"a": 2, "b": 3}, id="c2"),
                                 ToolCall("shout", {"text": "hi"}, id="c3")])
    return Reply(text="Oslo is sunny; 2 + 3 = 5; HI")


def get_weather(city: str) -> str:
    """Weather of a city."""
    return f"{city}: sunny"


def add_numbers(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@agentprof.tool
def shout(text: str) -> str:
    """Upper-case text (decorated too: must be counted once)."""
    return text.upper()


@pytest.fixture
def server():
    with ModelServer(script=three_tools_then_answer) as s:
        yield s


def tool_spans(path):
    _, rows = load(path)
    return [r for r in rows if r["kind"] == "tool"], [r for r in rows if r["kind"] == "model"]


def check(path, framework):
    tools, models = tool_spans(path)
    assert sorted(r["name"] for r in tools) == sorted(f"execute_tool {t}" for t in TOOLS), tools
    assert len(models) == 2 and all(m["status"] == "ok" for m in models)
    first_call_end = min(m["end_ns"] for m in models)
    second_call_start = max(m["start_ns"] for m in models)
    for r in tools:  # between the call that asked for them and the call that read their results
        assert first_call_end <= r["start_ns"] <= r["end_ns"] <= second_call_start
        assert r["status"] == "ok"
        via = json.loads(r["attributes"]).get("agentprof.tool.framework")
        assert via == (None if r["name"] == "execute_tool shout" else framework)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_agents_function_tools(tmp_path, server, stream):
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    agents.set_trace_processors([])  # no export to OpenAI's tracing backend (agentprof re-adds its own)
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    model = agents.OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
    agent = agents.Agent(name="helper", instructions="Use the tools.", model=model,
                         tools=[agents.function_tool(get_weather), agents.function_tool(add_numbers),
                                agents.function_tool(shout)])

    async def go():
        if stream:
            result = agents.Runner.run_streamed(agent, "weather, sum, shout")
            async for _ in result.stream_events():
                pass
            return result.final_output
        return (await agents.Runner.run(agent, "weather, sum, shout")).final_output

    with agentprof.profile("openai-agents", out=tmp_path) as run:
        answer = asyncio.run(go())
    assert "Oslo" in answer
    check(run.path, "openai-agents")


@pytest.mark.parametrize("stream", [False, True])
def test_pydantic_ai_tools(tmp_path, server, stream):
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.openai_base_url, api_key="test"))
    agent = pydantic_ai.Agent(model, tools=[get_weather, add_numbers, shout], instructions="Use the tools.")

    async def go():
        if stream:
            async with agent.run_stream("weather, sum, shout") as result:
                return await result.get_output()
        return (await agent.run("weather, sum, shout")).output

    with agentprof.profile("pydantic-ai", out=tmp_path) as run:
        answer = asyncio.run(go())
    assert "Oslo" in answer
    check(run.path, "pydantic-ai")


@pytest.mark.parametrize("stream", [False, True])
def test_langgraph_tools(tmp_path, server, stream):
    pytest.importorskip("langgraph")
    lc_openai = pytest.importorskip("langchain_openai")
    from langchain_core.tools import tool as lc_tool
    from langgraph.prebuilt import create_react_agent

    llm = lc_openai.ChatOpenAI(model="gpt-4o", base_url=server.openai_base_url, api_key="test", max_retries=0,
                               streaming=stream)
    graph = create_react_agent(llm, [lc_tool(get_weather), lc_tool(add_numbers), lc_tool(shout)])
    with agentprof.profile("langgraph", out=tmp_path) as run:
        if stream:
            for _ in graph.stream({"messages": [("user", "weather, sum, shout")]}, stream_mode="values"):
                pass
        else:
            out = graph.invoke({"messages": [("user", "weather, sum, shout")]})
            assert "Oslo" in out["messages"][-1].content
    check(run.path, "langchain")


def test_langchain_partial_json_attempts_are_partial_not_failed(tmp_path):
    """LangChain re-parses a streamed tool call's arguments on every chunk (``parse_partial_json``); with
    ``instrument_json`` those attempts are kept as parse spans classed partial, not failed parses, while the
    agent's own failed ``json.loads`` still fails."""
    pytest.importorskip("langgraph")
    lc_openai = pytest.importorskip("langchain_openai")
    from langchain_core.tools import tool as lc_tool
    from langgraph.prebuilt import create_react_agent

    from agentprof.analysis import analyze
    from agentprof.importers import load_any

    def script(req):
        if not req.tool_results:
            return Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo " * 20}, id="c1")])
        return Reply(text="Oslo is sunny")

    with ModelServer(script=script) as srv:
        llm = lc_openai.ChatOpenAI(model="gpt-4o", base_url=srv.openai_base_url, api_key="test", max_retries=0,
                                   streaming=True)
        graph = create_react_agent(llm, [lc_tool(get_weather)])
        with agentprof.profile("partial", out=tmp_path, instrument_json=True) as run:
            for _ in graph.stream({"messages": [("user", "weather")]}, stream_mode="values"):
                pass
            with pytest.raises(json.JSONDecodeError):
                json.loads('{"mine": ')  # the agent's own parse of bad text: a failure
    _, rows = load(run.path)
    parses = [r for r in rows if r["kind"] == "parse"]
    classes = [json.loads(r["attributes"]).get("agentprof.parse.partial") for r in parses]
    incomplete = [r for r, c in zip(parses, classes, strict=True) if c == "incomplete"]
    assert len(incomplete) > 5 and all(r["status"] == "ok" for r in incomplete)
    assert "complete" in classes
    own = [r for r, c in zip(parses, classes, strict=True) if c is None and r["status"] == "error"]
    assert len(own) == 1, [(r["status"], r["attributes"]) for r in parses if "partial" not in r["attributes"]]
    f = analyze(load_any([run.path])).failures
    assert f["partial_parses"]["count"] == len(incomplete) + classes.count("complete")
    assert f["partial_parses"]["incomplete"] == len(incomplete) and f["tool_calls"] == 0


@pytest.mark.parametrize("how", ["set_tracing_disabled", "run_config"])
def test_openai_agents_tools_with_tracing_disabled(tmp_path, server, how):
    """Common with non-OpenAI backends: the SDK's tracing off records no function spans, so the tools are
    recorded below it (each once, between the two model calls)."""
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    agents.set_trace_processors([])
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    model = agents.OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
    agent = agents.Agent(name="helper", instructions="Use the tools.", model=model,
                         tools=[agents.function_tool(get_weather), agents.function_tool(add_numbers),
                                agents.function_tool(shout)])
    config = agents.RunConfig(tracing_disabled=True) if how == "run_config" else None
    if how == "set_tracing_disabled":
        agents.set_tracing_disabled(True)
    try:
        with agentprof.profile("openai-agents-untraced", out=tmp_path) as run:
            answer = asyncio.run(agents.Runner.run(agent, "weather, sum, shout", run_config=config)).final_output
    finally:
        agents.set_tracing_disabled(False)
    assert "Oslo" in answer
    check(run.path, "openai-agents")
