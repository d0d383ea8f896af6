"""The demo server's latencies (agentprof.demo.latency): the replay stage's device model, reached through a
different path (one request at a time) than ``agentprof replay`` takes, so the two must agree; and the
server applies them to the figures it reports."""

from __future__ import annotations

import openai
import pytest

from agentprof.catalog import CatalogError
from agentprof.demo.latency import DeviceLatency
from agentprof.demo.model_server import ModelServer, Reply
from agentprof.errors import AgentprofError
from agentprof.replay import replay
from agentprof.trace import Trace, TraceMeta, spans_from_records

S = 1_000_000_000


def _one_call_trace(inp: int, out: int) -> Trace:
    recs = [{"trace_id": "t", "span_id": "root", "parent_id": None, "name": "invoke_agent x", "kind": "agent",
             "start_ns": 0, "end_ns": 100 * S, "session_id": "s", "attributes": {}},
            {"trace_id": "t", "span_id": "m", "parent_id": "root", "name": "chat gpt-oss-120b", "kind": "model",
             "start_ns": 0, "end_ns": 100 * S, "session_id": "s", "model": "gpt-oss-120b", "input_tokens": inp,
             "output_tokens": out, "attributes": {}}]
    return Trace(TraceMeta(source_format="agentprof"), spans_from_records(recs))


@pytest.mark.parametrize("system", ["h200+x86", "jalapeno", "rubin+vera"])
def test_agrees_with_replaying_the_same_call(system):
    lat = DeviceLatency(system)
    inp, out = 6000, 200
    ttft, per_token = lat.times(inp, 0, out)
    r = replay(_one_call_trace(inp, out), [system], cache_policy="none")
    assert r.systems[0].model_calls_s == pytest.approx(ttft + (out - 1) * per_token, rel=1e-6)


def test_cached_prefix_and_longer_prompts_behave():
    lat = DeviceLatency()
    cold, per_token = lat.times(8000, 0, 100)
    warm, per_token_warm = lat.times(8000, 7000, 100)
    longer, _ = lat.times(16000, 0, 100)
    assert warm < cold < longer  # a cached prefix is not recomputed; more new tokens take longer
    assert per_token > 0 and per_token_warm == pytest.approx(per_token)  # decode reads the same context
    assert lat.times(8000, 0, 1)[1] == 0.0  # one output token: nothing after the first
    assert DeviceLatency("jalapeno").times(8000, 0, 100)[1] < per_token  # the faster decoder per the catalog


def test_wrong_system_or_model_is_a_user_error():
    with pytest.raises(CatalogError, match="unknown system 'tpu-v9'"):
        DeviceLatency("tpu-v9")
    with pytest.raises(AgentprofError, match="unknown model 'llama-9'"):
        DeviceLatency(model="llama-9")


def test_server_reports_the_latency_for_the_figures_it_served():
    lat = DeviceLatency()
    with ModelServer(script=lambda r: Reply(text="a short answer with a few words"), latency=lat,
                     absolute_pacing=True) as s:
        client = openai.OpenAI(base_url=s.openai_base_url, api_key="t", max_retries=0)
        msgs = [{"role": "user", "content": "Summarize the repository layout. " * 40}]
        for extra in ([], [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "and now?"}]):
            stream = client.chat.completions.create(model="gpt-oss-120b", messages=msgs + extra, stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        client.close()
    assert len(s.log) == 2 and s.log[1].cached_tokens > 0
    for call in s.log:
        ttft, per_token = lat.times(call.prompt_tokens, call.cached_tokens, call.output_tokens)
        assert call.latency.ttft_s == pytest.approx(ttft) and call.latency.per_token_s == pytest.approx(per_token)
