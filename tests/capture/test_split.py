"""One split of a captured run: a process the SDK spawns inside a model call counts once, as the tool it is, in
``analyze`` and in ``replay`` alike (model time and the Amdahl bound agree)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import openai

import agentprof
from agentprof.analysis import analyze
from agentprof.demo.model_server import Latency, ModelServer, Reply
from agentprof.replay import replay
from agentprof.trace import read

from .capture_helpers import load, of_kind

BURN = "import time\nend = time.process_time() + 0.05\nwhile time.process_time() < end: pass\n"


def credential_helper(request: httpx.Request) -> None:
    """What an SDK auth hook does: spawn a helper process before the request goes out (inside the model call)."""
    subprocess.run([sys.executable, "-c", BURN], check=True)


@agentprof.tool
def shell(seconds: float) -> int:
    return subprocess.run([sys.executable, "-c", BURN.replace("0.05", str(seconds))], check=True).returncode


def test_a_subprocess_inside_a_model_call_counts_once(tmp_path) -> None:
    def latency(req, prompt, cached, output):
        return Latency(ttft_s=0.03, per_token_s=0.0005)

    with ModelServer(script=lambda req: Reply(text="done " * 20), latency=latency) as server:
        http = httpx.Client(event_hooks={"request": [credential_helper]})
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0, http_client=http)
        with agentprof.profile("split", out=tmp_path, instrument_subprocess=True) as run:
            for _ in range(2):
                client.chat.completions.create(model="gpt-oss-120b", messages=[{"role": "user", "content": "go"}])
                shell(0.03)
        http.close()
    _, rows = load(run.path)
    models = of_kind(rows, "model")
    subs = [r for r in of_kind(rows, "tool") if r["name"].startswith("execute_tool subprocess:")]
    model_ids = {m["span_id"] for m in models}
    inside = [s for s in subs if s["parent_id"] in model_ids]
    assert len(models) == 2 and len(inside) >= 2  # the helper ran inside each model call (the SDK may add one)
    trace = read(run.path)
    t = analyze(trace).to_dict()["time"]
    rec = replay(trace, ["h200+x86"], bands=False).recorded
    assert abs(t["model_s"] - rec.model_s) < 1e-3, (t["model_s"], rec.model_s)
    assert abs(t["amdahl_bound_s"] - rec.amdahl_e2e_s) < 1e-3, (t["amdahl_bound_s"], rec.amdahl_e2e_s)
    assert abs(t["tool_s"] - rec.tool_s) < 1e-3, (t["tool_s"], rec.tool_s)
    # the helper's time is tool time in both, not model time
    helper_s = sum((s["end_ns"] - s["start_ns"]) for s in inside) / 1e9
    model_total = sum((m["end_ns"] - m["start_ns"]) for m in models) / 1e9
    assert rec.model_s <= model_total - helper_s + 1e-3
