"""``agentprof demo`` as a user runs it: a child process started from an unrelated folder, with the other
bundled sample and chosen systems; the files land where the options say and the output names them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import polars as pl

from agentprof.demo.samples import SAMPLES, sample_paths
from agentprof.importers import load_any


def test_demo_command_with_the_claude_code_sample(tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "demo", "--out", "out", "--traces", "tr",
                        "--sample", "claude-code", "--system", "jalapeno", "--system", "b200+vera",
                        "--serve-on", "b200+x86"],
                       cwd=work, capture_output=True, text=True, timeout=240, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr[-3000:]
    traces = list((work / "tr").glob("demo-agent-*.jsonl"))
    assert len(traces) == 1
    report = work / "out" / "demo.html"
    assert report.is_file()
    for needle in ("fixed the planted bug", "b200+vera", "jalapeno", "Amdahl bound", "Simulated:", "Real:",
                   str(traces[0].relative_to(work)), "b200+x86"):  # the served system: only in what is simulated
        assert needle in r.stdout, needle
    assert "h200+x86" not in r.stdout  # only the systems asked for
    m = re.search(r'<script id="agentprof-data" type="application/json">(.*?)</script>', report.read_text(), re.S)
    assert m
    d = json.loads(m.group(1))["compare"]
    assert [x["label"] for x in d["runs"]][1] == SAMPLES["claude-code"].label
    assert [w["name"] for w in d["whatif"]] == ["recorded", "jalapeno", "b200+vera"]
    # the imported trace holds the main session and its subagent and compaction segments
    trace = load_any(sample_paths(SAMPLES["claude-code"]))
    rows = {x["key"]: x["values"] for x in d["table"]}
    assert rows["model_calls"][1] == trace.spans.filter(pl.col("kind") == "model").height
    assert trace.spans["session_id"].n_unique() > 1
