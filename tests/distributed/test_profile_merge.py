"""Sampled hotspots, CPU-bound shares and per-tool figures merge across partitions as one process computes
them: several captured, sampled sessions analyzed in one process and in partitions of one file each."""

from __future__ import annotations

import pytest

from agentprof.analysis import analyze
from agentprof.distributed.run import analyze_partitioned
from agentprof.importers import load_any

from ..analysis import cpu_heavy_agent


def _sessions(out) -> None:
    for k in range(4):  # sessions of different lengths and work, one trace file each
        cpu_heavy_agent.run(str(out), steps=2 + k, work=60_000 * (k + 1), sample=0.002)


def _close(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0))


def test_sampled_profiles_merge_as_one_process(tmp_path):
    _sessions(tmp_path)
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) == 4
    one = analyze(load_any([tmp_path])).to_dict()
    parted = analyze_partitioned([str(tmp_path)], batch_mb=1e-6)  # one file per partition
    many = parted.to_dict()
    assert one["hotspots"], "the sessions were sampled"
    # hotspots: the same functions in the same places with the same sample counts, seconds equal to rounding
    key = lambda h: (h["where"], h["frame"], h["file"])  # noqa: E731
    a, b = {key(h): h for h in one["hotspots"]}, {key(h): h for h in many["hotspots"]}
    assert a.keys() == b.keys()
    for k, h in a.items():
        assert h["samples"] == b[k]["samples"], k
        for f in ("self_s", "total_s", "self_cpu_s", "total_cpu_s"):
            assert _close(h[f], b[k][f]), (k, f)
    top_loop = [h for h in many["hotspots"] if h["where"] == "orchestration"][0]
    assert top_loop["frame"].endswith("rank_candidate_patches")
    # CPU-bound shares and per-tool figures
    for f in ("orchestration_cpu_s",):
        assert one["time"][f] is not None and _close(one["time"][f], many["time"][f])
    pa, pb = one["cpu_bound"], many["cpu_bound"]
    for f in ("orchestration_cpu_s", "orchestration_busy_s", "orchestration_wall_s", "orchestration_cpu_share"):
        assert _close(pa[f], pb[f]), f
    ta, tb = {t["tool"]: t for t in pa["tools"]}, {t["tool"]: t for t in pb["tools"]}
    assert ta.keys() == tb.keys() == {"read_file", "count_tokens", "fetch"}
    for name, t in ta.items():
        assert t["calls"] == tb[name]["calls"]
        for f in ("wall_s", "cpu_s", "busy_s", "cpu_bound_share"):
            assert _close(t[f], tb[name][f]), (name, f)
    # the analysis' per-tool figures (summed span time, p50, p95): the same from the partitions
    assert [t["name"] for t in one["tools"]] == [t["name"] for t in many["tools"]] and one["tools"]
    for x, y in zip(one["tools"], many["tools"], strict=True):
        assert (x["count"], x["errors"], x["untimed"]) == (y["count"], y["errors"], y["untimed"])
        for f in ("total_s", "p50_s", "p95_s", "max_s"):
            assert _close(x[f], y[f]), (x["name"], f)
    assert pa["sampled"] and pb["sampled"]
    assert sorted(u["samples"] for u in pa["units"]) == sorted(u["samples"] for u in pb["units"])
    assert not any(d["kind"] == "profile_not_merged" for d in many["diagnostics"])


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
