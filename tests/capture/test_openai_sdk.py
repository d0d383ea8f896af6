"""The openai SDK driven against the loopback model server inside profiled agents with tools.

Expected token figures are not hard-coded: they are what the server reported for each request (its log),
and the trace must carry them in the OTel meaning (OpenAI's cached tokens are already part of the prompt).
"""

from __future__ import annotations

import asyncio

import openai
import pytest

import agentprof
from agentprof.analysis import analyze
from agentprof.demo.model_server import ErrorReply, Latency, ModelServer, RawReply, Reply, ToolCall

from .capture_helpers import attrs, load, of_kind, only_trace

TTFT = 0.05
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "word_count", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}},
]


def tool_script(req):
    """Turn 0: two tool calls; later turns: a final answer."""
    if req.turn == 0:
        return Reply(tool_calls=[ToolCall("read_file", {"path": req.body["metadata"]["file"]}),
                                 ToolCall("word_count", {"text": "one two three four"})])
    return Reply(text=f"The file has {req.tool_results[0].count(chr(10))} lines; counted {req.tool_results[1]} words.",
                 reasoning_tokens=5)


def latency(req, prompt, cached, output):
    return Latency(ttft_s=TTFT, per_token_s=0.0005)


@agentprof.tool
def read_file(path):
    with open(path) as f:
        return f.read()


@agentprof.tool
def word_count(text):
    return str(len(text.split()))


REGISTRY = {"read_file": read_file, "word_count": word_count}


def run_tools(tool_calls):
    results = []
    for tc in tool_calls:
        args = agentprof.parse_json(tc["arguments"], name="tool_args")
        results.append({"role": "tool", "tool_call_id": tc["id"], "content": REGISTRY[tc["name"]](**args)})
    return results


def streamed_turn(client, messages, file):
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True}, metadata={"file": file})
    text, calls = [], {}
    for chunk in stream:
        for ch in chunk.choices:
            text.append(ch.delta.content or "")
            for tc in ch.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                slot["id"] = slot["id"] or tc.id
                slot["name"] = slot["name"] or tc.function.name
                slot["arguments"] += tc.function.arguments or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


def check_against_server(models, log):
    """Each model span carries exactly what the server reported for that request."""
    assert len(models) == len(log)
    for row, served in zip(models, log, strict=True):
        assert row["provider"] == "openai"
        assert row["input_tokens"] == served.prompt_tokens
        assert row["cache_read_tokens"] == served.cached_tokens
        assert row["output_tokens"] == served.output_tokens
        assert row["reasoning_tokens"] == served.reasoning_tokens
        assert row["stream"] is served.stream
        assert row["status"] == "ok"
        assert row["prompt_tokens_hashed"] > 0 and row["segments"]


def test_streamed_tool_agent(tmp_path, tmp_path_factory):
    data = tmp_path_factory.mktemp("data") / "notes.txt"
    data.write_text("alpha\nbeta\ngamma\n")
    with ModelServer(script=tool_script, latency=latency) as server:
        @agentprof.profile(out=tmp_path)
        def coding_agent(task):
            client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
            messages = [{"role": "system", "content": "You are a careful assistant. " * 30},
                        {"role": "user", "content": task}]
            for _ in range(4):
                text, calls = streamed_turn(client, messages, str(data))
                if not calls:
                    return text
                messages.append({"role": "assistant", "content": text or None, "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls]})
                messages.extend(run_tools(calls))
            return None

        answer = coding_agent("How many lines does the file have?")
        log = list(server.log)
    assert answer == "The file has 3 lines; counted 4 words."
    trace, rows = load(only_trace(tmp_path))
    kinds = [r["kind"] for r in rows]
    assert kinds.count("agent") == 1 and kinds.count("model") == 2
    assert kinds.count("tool") == 2 and kinds.count("parse") == 2
    models = of_kind(rows, "model")
    check_against_server(models, log)
    # the second prompt repeats the first one, so the server served part of it from its cache
    assert log[1].cached_tokens > 0 and models[1]["cache_read_tokens"] == log[1].cached_tokens
    root = of_kind(rows, "agent")[0]
    for r in rows:
        if r is not root:
            assert r["parent_id"] == root["span_id"]  # sequential agent: everything directly under the run
        assert r["session_id"] == root["session_id"]
    for m in models:
        assert TTFT <= m["ttft_s"] < (m["end_ns"] - m["start_ns"]) / 1e9
        assert m["name"] == "chat gpt-4o-mini" and m["model"] == "gpt-4o-mini"
        assert attrs(m)["agentprof.stream.chunks"] > 1
    first, second = models
    # chained block hashes: the second prompt starts with the first one's full blocks
    assert second["block_hashes"][: len(first["block_hashes"])] == first["block_hashes"]
    assert [r["name"] for r in of_kind(rows, "tool")] == ["execute_tool read_file", "execute_tool word_count"]
    assert all(r["cpu_ns"] is not None and r["cpu_ns"] >= 0 for r in of_kind(rows, "tool"))
    sent = [ToolCall("read_file", {"path": str(data)}), ToolCall("word_count", {"text": "one two three four"})]
    assert [attrs(p)["agentprof.parse.bytes"] for p in of_kind(rows, "parse")] == \
        [len(c.arguments_json().encode()) for c in sent]
    assert trace.meta.tokenizer == "cl100k_base" and trace.meta.capture_overhead_ns > 0
    # the prompts were fingerprinted on agentprof's background thread: its CPU is kept apart from the time on
    # the agent's threads (the figure a user compares with wall time), and both reach the analysis
    assert trace.meta.capture_background_cpu_ns > 0
    a = analyze(trace)
    co = a.to_dict()["capture_overhead"]
    assert co["s"] == trace.meta.capture_overhead_ns / 1e9
    assert co["background_cpu_s"] == trace.meta.capture_background_cpu_ns / 1e9
    assert co["total_s"] == pytest.approx(co["s"] + co["background_cpu_s"])  # the process CPU figure
    # one figure: the terminal's sentence and the report's payload carry the analysis' numbers, band included
    from agentprof.report.formats import fmt_capture_cost
    from agentprof.report.payload import build_payload

    line = fmt_capture_cost(co)
    assert line.startswith(f"agentprof's own cost while capturing: {co['total_s'] * 1e3:.1f} ms of CPU")
    assert f"grows by between {co['s'] * 1e3:.1f} ms" in line and f"and {co['total_s'] * 1e3:.1f} ms" in line
    assert build_payload(trace, a)["meta"]["capture"] == co


def test_plain_async_responses_and_helpers(tmp_path):
    def script(req):
        return Reply(text="Short answer with a few words in it.")

    with ModelServer(script=script, latency=latency) as server:
        sync = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        aclient = openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        msgs = [{"role": "user", "content": "hello " * 40}]

        async def async_part():
            r = await aclient.chat.completions.create(model="gpt-4o", messages=msgs)
            s = await aclient.chat.completions.create(model="gpt-4o", messages=msgs, stream=True,
                                                      stream_options={"include_usage": True})
            async for _ in s:
                pass
            async with aclient.chat.completions.stream(model="gpt-4o", messages=msgs,
                                                       stream_options={"include_usage": True}) as st:
                async for _ in st:
                    pass
            return r

        with agentprof.profile("mixed", out=tmp_path) as run:
            plain = sync.chat.completions.create(model="gpt-4o", messages=msgs)
            with sync.chat.completions.stream(model="gpt-4o", messages=msgs,
                                              stream_options={"include_usage": True}) as st:
                final = st.get_final_completion()
            resp = sync.responses.create(model="gpt-4.1", instructions="Be brief.", input="hello " * 40)
            events = list(sync.responses.create(model="gpt-4.1", instructions="Be brief.", input="hello " * 40,
                                                stream=True))
            with sync.responses.stream(model="gpt-4.1", input="hello " * 40) as rs:
                for _ in rs:
                    pass
            ar = asyncio.run(async_part())
        log = list(server.log)
    assert plain.choices[0].message.content == final.choices[0].message.content == ar.choices[0].message.content
    assert resp.output_text == "Short answer with a few words in it."
    assert events[-1].type == "response.completed"
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    assert len(models) == 8 == len(log)
    check_against_server(models, log)
    assert [m["stream"] for m in models] == [False, True, False, True, True, False, True, True]
    for m in models:
        if m["stream"]:
            assert m["ttft_s"] >= TTFT
        else:
            assert m["ttft_s"] is None
    assert [m["name"] for m in models][2:5] == ["chat gpt-4.1"] * 3


def test_api_error_is_recorded_and_reraised(tmp_path):
    with ModelServer(script=lambda req: ErrorReply(400, "model does not exist", "invalid_request_error")) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        with pytest.raises(openai.BadRequestError) as info, agentprof.profile("err", out=tmp_path) as run:
            client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    assert "model does not exist" in str(info.value)
    _, rows = load(run.path)
    (model,) = of_kind(rows, "model")
    assert model["status"] == "error" and model["error_type"] == "openai.BadRequestError"
    assert attrs(model)["http.response.status_code"] == 400
    root = of_kind(rows, "agent")[0]
    assert root["status"] == "error" and root["error_type"] == "openai.BadRequestError"


def test_broken_response_object_never_breaks_the_agent(tmp_path, recwarn):
    bodies = iter([
        {"id": "x", "object": "chat.completion", "model": "m", "choices": [], "usage": "not a usage object"},
        {"id": "y", "object": "chat.completion", "model": "m", "usage": {"prompt_tokens": -5, "completion_tokens": 2}},
    ])
    with ModelServer(script=lambda req: RawReply(next(bodies))) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        with agentprof.profile("odd", out=tmp_path) as run:
            a = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            b = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert a.id == "x" and a.usage == "not a usage object" and b.id == "y"
    trace, rows = load(run.path)
    models = of_kind(rows, "model")
    assert len(models) == 2 and all(m["status"] == "ok" for m in models)
    assert models[0]["input_tokens"] is None
    # impossible figures are kept out of the columns' trust: reported as diagnostics
    assert any("negative input_tokens" in d.message for d in trace.diagnostics)


def test_iterable_messages_reach_both_sdk_and_trace(tmp_path, server):
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    with agentprof.profile("gen", out=tmp_path) as run:
        client.chat.completions.create(model="m", messages=(m for m in [{"role": "user", "content": "a b c d"}]))
    assert server.log[0].prompt_tokens > 0
    _, rows = load(run.path)
    assert of_kind(rows, "model")[0]["prompt_tokens_hashed"] > 0


def test_no_profile_no_recording(tmp_path, server):
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content.startswith("Done.")
    assert not list(tmp_path.iterdir())
