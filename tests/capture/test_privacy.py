"""A canary string in prompts, responses, tool arguments/results, child-process arguments, parsed JSON and
error messages never reaches the trace file unless ``capture_content=True`` (checked on the raw bytes)."""

from __future__ import annotations

import json
import subprocess
import sys

import openai
import pytest

import agentprof
from agentprof.demo.model_server import ModelServer, Reply, ToolCall

from ..lazy_import import LazyModule
from .capture_helpers import attrs, load, of_kind

anthropic = LazyModule("anthropic")  # imported by the first test that uses it

CANARY = "CANARY-q8ZpW3vLx"


def echo_script(req):
    if req.turn == 0 and req.tool_names:
        return Reply(tool_calls=[ToolCall(req.tool_names[0], {"secret": CANARY})])
    return Reply(text=f"You said: {req.last_user_text}")


@agentprof.tool
def lookup(secret):
    return {"found": secret}


@agentprof.tool
def explode(secret):
    raise ValueError(f"cannot handle {secret}")


def run_everything(server, out, capture_content):
    oai = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    ant = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    with agentprof.profile("privacy", out=out, capture_content=capture_content, instrument_json=True,
                           instrument_subprocess=True) as run:
        msgs = [{"role": "system", "content": f"Never reveal {CANARY}."}, {"role": "user", "content": CANARY}]
        r = oai.chat.completions.create(model="gpt-4o", messages=msgs, tools=tools)
        call = r.choices[0].message.tool_calls[0]
        args = json.loads(call.function.arguments)  # instrumented json.loads on canary-bearing text
        result = lookup(**args)
        msgs += [r.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
        for _ in oai.chat.completions.create(model="gpt-4o", messages=msgs, stream=True,
                                             stream_options={"include_usage": True}):
            pass
        oai.responses.create(model="gpt-4.1", instructions=CANARY, input=f"repeat {CANARY}")
        ant.messages.create(model="claude-sonnet-4-6", max_tokens=50, system=CANARY,
                            messages=[{"role": "user", "content": [{"type": "text", "text": CANARY}]}])
        with ant.messages.stream(model="claude-sonnet-4-6", max_tokens=50,
                                 messages=[{"role": "user", "content": CANARY}]) as s:
            s.get_final_text()
        agentprof.parse_json(json.dumps({"k": CANARY}))
        subprocess.run([sys.executable, "-c", "pass", CANARY], check=True)
        subprocess.run(f"true {CANARY}", shell=True, check=True)
        with pytest.raises(ValueError):
            explode(CANARY)
        with agentprof.span("orchestration", "plan"):
            pass
    return run


def test_canary_absent_by_default(tmp_path):
    with ModelServer(script=echo_script) as server:
        run = run_everything(server, tmp_path, capture_content=False)
    raw = run.path.read_bytes()
    assert CANARY.encode() not in raw
    assert CANARY.encode().hex().encode() not in raw
    _, rows = load(run.path)
    # everything was still recorded: hashes and counts instead of text
    assert len(of_kind(rows, "model")) == 5 and len(of_kind(rows, "parse")) == 2
    tools = of_kind(rows, "tool")
    assert {t["name"] for t in tools} >= {"execute_tool lookup", "execute_tool explode",
                                          "execute_tool subprocess:true"}
    assert all(m["prompt_tokens_hashed"] > 0 for m in of_kind(rows, "model"))


def test_canary_present_when_content_is_captured(tmp_path):
    with ModelServer(script=echo_script) as server:
        run = run_everything(server, tmp_path, capture_content=True)
    raw = run.path.read_bytes()
    assert raw.count(CANARY.encode()) >= 10
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    first = attrs(models[0])
    assert CANARY in first["gen_ai.input.messages"]
    assert json.loads(first["gen_ai.output.messages"])[0]["parts"][0]["type"] == "tool_call"
    streamed = attrs(models[1])
    assert CANARY in streamed["gen_ai.output.messages"]  # the echo came back through the stream
    assert CANARY in attrs(models[2])["gen_ai.system_instructions"]
    explode_span = next(t for t in of_kind(rows, "tool") if t["name"] == "execute_tool explode")
    assert CANARY in attrs(explode_span)["agentprof.error.message"]
    sub = next(t for t in of_kind(rows, "tool") if t["name"].startswith("execute_tool subprocess:python"))
    assert CANARY in attrs(sub)["agentprof.subprocess.args"]
