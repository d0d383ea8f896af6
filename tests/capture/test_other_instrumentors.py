"""agentprof's capture stays exact with another openai instrumentation active (OpenTelemetry's openai-v2,
OpenInference, OpenLLMetry), whichever patched the SDK first: streamed calls keep their chunks, time to first
chunk and usage, and the other instrumentation still records its own spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentprof.demo.model_server import ModelServer

SCRIPT = r"""
import asyncio, json, sys
which, order, out = sys.argv[1], sys.argv[2], sys.argv[3]
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

theirs = InMemorySpanExporter()
tp = TracerProvider()
tp.add_span_processor(SimpleSpanProcessor(theirs))
trace.set_tracer_provider(tp)

def instrument():
    if which == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif which == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument(tracer_provider=tp)

if order == "theirs-first":
    instrument()
import openai
import agentprof
if order == "agentprof-first":
    with agentprof.profile("warm-up", out=None):
        pass  # agentprof patches the SDK classes at its first profile
    instrument()

client = openai.OpenAI(max_retries=0)
aclient = openai.AsyncOpenAI(max_retries=0)
msgs = [{"role": "user", "content": "hello there"}]

async def astream():
    s = await aclient.chat.completions.create(model="gpt-4o", messages=msgs, stream=True,
                                              stream_options={"include_usage": True})
    return len([c async for c in s])

with agentprof.profile("with-" + which, out=out) as run:
    n_sync = len(list(client.chat.completions.create(model="gpt-4o", messages=msgs, stream=True,
                                                     stream_options={"include_usage": True})))
    n_async = asyncio.run(astream())
    plain = client.chat.completions.create(model="gpt-4o", messages=msgs)
print(json.dumps({"path": str(run.path), "chunks_read": [n_sync, n_async], "plain_tokens": plain.usage.prompt_tokens,
                  "their_spans": len(theirs.get_finished_spans())}))
"""


MODULES = {"openai-v2": "opentelemetry.instrumentation.openai_v2", "openinference": "openinference.instrumentation.openai",
           "openllmetry": "opentelemetry.instrumentation.openai"}


@pytest.mark.parametrize("order", ["theirs-first", "agentprof-first"])
@pytest.mark.parametrize("which", list(MODULES))
def test_capture_with_another_openai_instrumentation(tmp_path, which, order):
    pytest.importorskip(MODULES[which])  # in the test extra; absent from the oldest-SDK side environment
    with ModelServer() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY="test")
        done = subprocess.run([sys.executable, "-c", SCRIPT, which, order, str(tmp_path)], env=env,
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert "CaptureWarning" not in done.stderr
    with open(got["path"]) as fh:
        spans = [r for r in map(json.loads, fh) if r.get("record") == "span"]
    models = [r["attributes"] for r in spans if r["kind"] == "model"]
    assert len(models) == 3
    streamed = [a for a in models if a.get("gen_ai.request.stream")]
    assert len(streamed) == 2
    for a, n in zip(streamed, got["chunks_read"], strict=True):
        assert not a.get("agentprof.incomplete"), a
        assert a["agentprof.stream.chunks"] == n > 0
        assert a["gen_ai.response.time_to_first_chunk"] > 0
        assert a["gen_ai.usage.input_tokens"] == got["plain_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    plain = next(a for a in models if not a.get("gen_ai.request.stream"))
    assert plain["gen_ai.usage.input_tokens"] == got["plain_tokens"]
    assert got["their_spans"] >= 3  # the other instrumentation still sees every call
