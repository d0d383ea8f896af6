"""SWE-agent trajectories (1.x replay demonstration and a 0.x GPT-4 run)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from .importer_helpers import SAMPLES, imported, kinds


def test_steps_become_calls_and_actions_tools():
    tr = imported("swe-agent")
    for name in ("marshmallow-code__marshmallow-1867", "pydicom__pydicom-1458"):
        doc = json.loads((SAMPLES / "swe-agent" / f"{name}.traj").read_text())
        steps = doc["trajectory"]
        k = kinds(tr.spans, name)
        assert k["model"] == len(steps) == doc["info"]["model_stats"]["api_calls"]
        assert k["tool"] == sum(1 for s in steps if s["action"].strip())
        agent = tr.spans.filter((pl.col("session_id") == name) & (pl.col("kind") == "agent")).row(0, named=True)
        attrs = json.loads(agent["attributes"])
        assert attrs.get("agentprof.reported_tokens_sent") == doc["info"]["model_stats"]["tokens_sent"]
    # no timestamps anywhere in the format
    assert set(tr.spans.get_column("timing").unique()) == {"unknown"}
    replay = tr.spans.filter((pl.col("session_id") == "marshmallow-code__marshmallow-1867") &
                             (pl.col("kind") == "agent")).get_column("attributes").item()
    assert json.loads(replay)["agentprof.swe_agent.replay"] is True
    durations = tr.spans.filter((pl.col("session_id") == "marshmallow-code__marshmallow-1867") &
                                (pl.col("kind") == "tool")).get_column("attributes").to_list()
    doc = json.loads((SAMPLES / "swe-agent" / "marshmallow-code__marshmallow-1867.traj").read_text())
    assert [json.loads(a)["agentprof.tool.duration_s"] for a in durations] == \
        [float(s["execution_time"]) for s in doc["trajectory"]]
    # 1.x steps carry their exact input, so every step's prompt was hashed
    m = tr.spans.filter((pl.col("session_id") == "marshmallow-code__marshmallow-1867") & (pl.col("kind") == "model"))
    assert m.get_column("block_hashes").null_count() == 0


FIXTURES = Path(__file__).parent / "fixtures_other"


def test_query_steps_are_exact_prompts():
    # Synthetic fixture (fixtures_other/README.md): SWE-agent 1.x names each step's exact model input ``query``.
    from agentprof.importers import load_any

    path = FIXTURES / "swe-agent-query.traj"
    doc = json.loads(path.read_text())
    m = load_any(path, fmt="swe-agent").spans.filter(pl.col("kind") == "model").sort("span_id")
    assert m.height == len(doc["trajectory"])
    assert m.get_column("block_hashes").null_count() == 0
    for a in m.get_column("attributes").to_list():
        assert "agentprof.prompt.approximate" not in json.loads(a)  # exact input, not the 0.x history guess
    # each step's prompt extends the previous one: later calls hash more tokens
    by_step = sorted((json.loads(a)["agentprof.step"], n) for a, n in
                     zip(m.get_column("attributes").to_list(), m.get_column("prompt_tokens_hashed").to_list(),
                         strict=True))
    assert [n for _, n in by_step] == sorted(n for _, n in by_step) and by_step[0][1] < by_step[-1][1]
    assert set(m.get_column("model").to_list()) == {"claude-sonnet-4-20250514"}  # from replay_config
    assert set(m.get_column("provider").to_list()) == {"anthropic"}


def test_retry_agent_attempts_are_child_sessions(tmp_path):
    # Synthetic fixture: a RetryAgent .traj holds every attempt plus a top-level copy of the chosen one.
    from agentprof.importers import load_any

    path = FIXTURES / "swe-agent-retry.traj"
    doc = json.loads(path.read_text())
    tr = load_any(path, fmt="swe-agent")
    total = sum(len(a["trajectory"]) for a in doc["attempts"])
    assert kinds(tr.spans)["model"] == total == doc["info"]["model_stats"]["api_calls"]  # the copy is not counted
    agents = tr.spans.filter(pl.col("kind") == "agent")
    roles = sorted(json.loads(a)["agentprof.session.role"] for a in agents.get_column("attributes").to_list())
    assert roles == ["attempt"] * len(doc["attempts"]) + ["main"]
    for n, att in enumerate(doc["attempts"], start=1):
        assert kinds(tr.spans, f"swe-agent-retry/attempt-{n}")["model"] == len(att["trajectory"])
    # an attempts-only file (RetryAgent with choose=False) has no top-level trajectory: still imported
    f = tmp_path / "x.traj"
    f.write_text(json.dumps({"attempts": doc["attempts"]}))
    assert kinds(load_any(f, fmt="swe-agent").spans)["model"] == total
