"""SWE-agent trajectories (1.x replay demonstration and a 0.x GPT-4 run)."""

from __future__ import annotations

import json

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
