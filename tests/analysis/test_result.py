"""The analysis result reports agentprof's own capture time for the traces it captured (and only those)."""

from __future__ import annotations

import pytest

import agentprof
from agentprof.analysis import analyze
from agentprof.importers import load_any

from .analysis_helpers import SAMPLES


def test_capture_overhead_is_reported_for_captured_traces_only(tmp_path):
    @agentprof.tool
    def step() -> None:
        pass

    paths = []
    for name in ("one", "two"):
        with agentprof.profile(name, out=tmp_path) as run:
            for _ in range(50):
                step()
        paths.append(run.path)
    traces = [load_any(p) for p in paths]
    for t in traces:
        a = analyze(t)
        co = a.to_dict()["capture_overhead"]
        assert co["s"] == t.meta.capture_overhead_ns / 1e9 > 0
        assert co["share_of_wall"] == pytest.approx(co["s"] / a.time.wall_s)
        bg = t.meta.capture_background_cpu_ns or 0  # tools only: no fingerprint work
        assert co["total_s"] == pytest.approx(co["s"] + bg / 1e9)
        assert co["total_share_of_wall"] == pytest.approx(co["total_s"] / a.time.wall_s)
    both = load_any(paths)  # several captured traces: their overheads add up
    assert both.meta.capture_overhead_ns == sum(t.meta.capture_overhead_ns for t in traces)
    assert analyze(load_any(SAMPLES / "codex")).to_dict()["capture_overhead"] is None  # imported: not ours
