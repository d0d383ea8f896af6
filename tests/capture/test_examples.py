"""The decorated example agent (examples/profiled_agent.py) runs as a plain script and writes its trace."""

from __future__ import annotations

import os
import subprocess
import sys

from agentprof.demo.model_server import Latency, ModelServer, Reply, ToolCall

from .capture_helpers import REPO, load, of_kind


def script(req):
    if req.turn == 0:
        return Reply(text="Searching.", tool_calls=[ToolCall("search", {"pattern": r"def write_line"})])
    if req.turn == 1:
        return Reply(tool_calls=[ToolCall("read_file", {"path": "writer.py"})])
    return Reply(text="JsonlTraceWriter.write_line in writer.py; one write per line, so yes.")


def test_profiled_agent_example(tmp_path):
    with ModelServer(script=script, latency=lambda *a: Latency(0.02, 0.0)) as server:
        env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="test",
                   AGENTPROF_OUT=str(tmp_path))
        done = subprocess.run([sys.executable, "examples/profiled_agent.py", "--root", "agentprof/trace"], env=env,
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        log = list(server.log)
    assert done.returncode == 0, done.stderr
    assert "one write per line" in done.stdout
    (path,) = tmp_path.glob("answer-*.jsonl")
    _, rows = load(path)
    assert [r["name"] for r in of_kind(rows, "tool")] == ["execute_tool search", "execute_tool read_file"]
    models = of_kind(rows, "model")
    assert len(models) == 3 == len(log)
    assert [m["cache_read_tokens"] for m in models] == [c.cached_tokens for c in log]
    assert all(m["ttft_s"] >= 0.02 for m in models)
