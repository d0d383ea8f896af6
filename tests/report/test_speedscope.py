"""``agentprof export --to speedscope``: validated against speedscope's own file-format schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from agentprof.cli import main
from agentprof.importers import load_any

from ..analysis import cpu_heavy_agent


def _run(argv, capsys) -> tuple[int, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


SCHEMA = Path(__file__).parent / "data" / "speedscope-file-format-schema.json"


@pytest.fixture(scope="module")
def sampled_path(tmp_path_factory):
    return cpu_heavy_agent.run(str(tmp_path_factory.mktemp("ss")), steps=3, sample=0.002).path


def test_export_validates_against_speedscopes_schema(sampled_path, tmp_path, capsys):
    out = tmp_path / "run.speedscope.json"
    code, text = _run(["export", str(sampled_path), "--to", "speedscope", "-o", str(out)], capsys)
    assert code == 0, text
    assert "samples in" in text
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    frames = doc["shared"]["frames"]
    trace = load_any(sampled_path)
    names = [p["name"] for p in doc["profiles"]]
    assert any(n.startswith("orchestration · MainThread · wall") for n in names)
    wall = [p for p in doc["profiles"] if p["name"].endswith("· wall")]
    assert sum(len(p["samples"]) for p in wall) == len(trace.samples)
    for p in doc["profiles"]:
        assert len(p["samples"]) == len(p["weights"])
        assert all(0 <= f < len(frames) for st in p["samples"] for f in st)
        assert p["endValue"] >= p["startValue"]
    orch = next(p for p in wall if p["name"].startswith("orchestration · MainThread"))
    leaf = [frames[st[-1]]["name"] for st in orch["samples"] if st]
    assert "rank_candidate_patches" in leaf


def test_unsampled_trace_is_a_clear_error(tmp_path, capsys):
    run = cpu_heavy_agent.run(str(tmp_path), steps=1, sample=False)
    code, text = _run(["export", str(run.path), "--to", "speedscope", "-o", str(tmp_path / "x.json")], capsys)
    assert code == 2
    assert "error:" in text and "no stack samples" in text and "Traceback" not in text
