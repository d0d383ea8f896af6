"""Replaying real traces: the kv-cache-tester corpus and a Claude Code session, from Python and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.importers import load_any
from agentprof.replay import replay
from agentprof.replay.systems import resolve
from agentprof.trace import write

from .spans import agent, model, span, trace

ROOT = Path(__file__).resolve().parents[2]
KVCT = ROOT / "traces" / "samples" / "kv-cache-tester"
CLAUDE = ROOT / "traces" / "samples" / "claude-code" / "session-3fe1b6bc.jsonl"
CAT = load_catalog()
SYSTEMS = ["h200+x86", "b200+x86", "b200+vera", "gb200+grace", "rubin+vera", "jalapeno"]


@pytest.fixture(scope="module")
def kvct():
    return load_any(str(KVCT))


@pytest.fixture(scope="module")
def kvct_result(kvct):
    return replay(kvct, SYSTEMS, cache_policy="prefix")


def _raw_requests() -> list[tuple[str, dict]]:
    out = []
    for f in sorted(KVCT.glob("*.json")):
        for r in json.loads(f.read_text())["requests"]:
            out.append((f.name, r))
    return out


def test_kv_cache_tester_corpus_replays(kvct_result) -> None:
    res = kvct_result
    raw = _raw_requests()
    files = {name for name, _ in raw}
    assert res.sessions == len(files) == 19
    assert res.model_calls == len(raw)
    # recorded model-call time: the measured API times of the calls that can be replayed
    measured = sum(r["api_time"] for _, r in raw if r.get("api_time") is not None and r.get("out") is not None)
    assert res.recorded.model_calls_s == pytest.approx(measured, rel=1e-6)
    # the recorded wall time of each session runs from 0 to its last response
    ends = {}
    for name, r in raw:
        ends[name] = max(ends.get(name, 0.0), r["t"] + (r.get("api_time") or 0.0))
    assert res.recorded.e2e_s == pytest.approx(sum(ends.values()), rel=1e-6)
    for s in res.systems:
        assert s.error is None, s.error
        assert s.wait_s == pytest.approx(res.recorded.wait_s)  # waits are replayed unchanged
        # Amdahl: the task moves less than its model calls (Jalapeño's declared estimates, with the fitted
        # long-prompt attention efficiency, land within a few % of the recorded calls: checked below)
        if s.name != "jalapeno":
            assert s.model_calls_speedup > s.speedup_vs_recorded > 1.0
        assert s.speedup_vs_recorded <= s.amdahl_bound + 1e-9
        assert s.e2e_s == pytest.approx(s.model_s + s.tool_s + s.orchestration_s + s.wait_s, rel=1e-9)
        assert 0.8 < s.cache["hit_share"] <= 1.0  # agent prompts are mostly a repeated prefix
    by = {s.name: s for s in res.systems}
    assert abs(by["jalapeno"].speedup_vs_recorded - 1.0) < abs(by["jalapeno"].model_calls_speedup - 1.0) + 0.05
    # more bandwidth and compute on the same software: Rubin < B200 < H200 in model-call time
    assert by["rubin+vera"].model_calls_s < by["b200+x86"].model_calls_s < by["h200+x86"].model_calls_s
    # nothing is declared CPU-bound: the two hosts differ only in the serving frontend's tokenizing (host work at
    # each host's single-thread speed), at most every recorded prompt token's share (compacted prompts are shorter)
    d = by["b200+x86"].e2e_s - by["b200+vera"].e2e_s
    assert d == pytest.approx(by["b200+x86"].model_s - by["b200+vera"].model_s, rel=1e-6)
    kimi = CAT.models["kimi-k2.5"]
    dt = (resolve(CAT.system("b200+x86"), kimi, CAT).params.t_tok_s
          - resolve(CAT.system("b200+vera"), kimi, CAT).params.t_tok_s)
    tokens = sum(r.get("in", 0) or 0 for _, r in raw)
    assert 0.0 < d <= dt * tokens
    assert by["h200+x86"].speedup_vs_first == pytest.approx(1.0)
    # closed Claude models replay through a named open stand-in
    models = {r["model"] for _, r in raw}
    assert set(res.standins) == models
    assert all("Kimi K2.5" in v for v in res.standins.values())
    f = res.finding()
    assert "jalapeno model calls" in f and "infinitely fast model" in f


def test_replay_is_vectorized_over_calls(kvct_result) -> None:
    calls = kvct_result.calls
    assert calls.height == kvct_result.replayed_calls * len(SYSTEMS)
    assert (calls["cached_hbm"] <= calls["input_tokens"] - 1).all()
    assert (calls["replayed_s"] > 0).all()


def test_model_override_and_infeasible_system(kvct) -> None:
    res = replay(kvct, ["h100+x86", "jalapeno"], model="deepseek-r1", cache_policy="none")
    h100, jal = res.systems
    assert h100.error and "does not fit" in h100.error and h100.e2e_s is None
    assert jal.e2e_s is not None and jal.deployments[0]["model"] == "deepseek-r1"
    assert all("(--model)" in v for v in res.standins.values())
    assert jal.speedup_vs_first == pytest.approx(1.0)  # the first system that ran is the baseline


def test_concurrency_makes_the_shared_system_slower(kvct) -> None:
    one = replay(kvct, ["b200+x86"], cache_policy="prefix", concurrency=1).systems[0]
    many = replay(kvct, ["b200+x86"], cache_policy="prefix", concurrency=16).systems[0]
    assert many.model_calls_s > one.model_calls_s
    # hit shares of the simulation, which sends the prompts past Kimi's window compacted (--overflow compact)
    two = replay(kvct, ["b200+x86"], cache_policy="prefix", concurrency=2, bands=False).systems[0]
    assert many.cache["hit_share"] <= two.cache["hit_share"]


def test_what_served_calls_wait_for_sums_to_their_time_and_is_never_negative(kvct) -> None:
    """With the serving simulation, a call's parts are the call alone as the server received it (after any
    compaction, with the hits it had) plus queueing for the rest: at one session queueing is close to nothing
    and at eight it grows; no part is ever negative."""
    from agentprof.replay.serving import ServingConfig

    runs = {c: replay(kvct, ["jalapeno"], serving=ServingConfig(concurrency=c), bands=False).systems[0]
            for c in (1, 8)}
    for s in runs.values():
        assert sum(s.waiting_for.values()) == pytest.approx(s.model_calls_s, rel=1e-9)
        assert all(v >= 0 for v in s.waiting_for.values()), s.waiting_for
    assert runs[1].waiting_for["queueing"] < 0.02 * runs[1].model_calls_s
    assert runs[8].waiting_for["queueing"] > runs[1].waiting_for["queueing"]


def test_claude_code_session_replays() -> None:
    t = load_any(str(CLAUDE))
    res = replay(t, ["b200+x86", "jalapeno"])
    assert res.model_calls == t.spans.filter(t.spans["kind"] == "model").height
    assert any("claude" in k for k in res.standins)
    for s in res.systems:
        assert s.speedup_vs_recorded <= s.amdahl_bound + 1e-9
        assert s.e2e_s == pytest.approx(s.model_s + s.tool_s + s.orchestration_s + s.wait_s, rel=1e-9)
        assert s.wait_s == pytest.approx(res.recorded.wait_s)
        assert s.tool_s == pytest.approx(res.recorded.tool_s)  # no tool declared CPU-bound: tool time stays
    assert res.recorded.tool_s > 0 and "tool_s" in res.to_dict()["recorded"]  # tools apart from orchestration


def test_agentprof_trace_file_roundtrip(tmp_path: Path) -> None:
    recs = [agent(0, 60), model("m1", 0, 20, inp=30000, out=500), span("t", "tool", 20, 40),
            model("m2", 40, 60, inp=31000, out=400)]
    p = write(trace(recs), tmp_path / "run.jsonl")
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "replay", str(p), "-s", "b200+x86", "-s",
                        "jalapeno", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["recorded"]["e2e_s"] == pytest.approx(60)
    assert [s["name"] for s in out["systems"]] == ["b200+x86", "jalapeno"]
    for s in out["systems"]:
        for key in ("e2e_s", "model_s", "orchestration_s", "wait_s", "model_share", "speedup_vs_recorded",
                    "speedup_vs_first", "amdahl_bound"):
            assert key in s
    assert out["standins"] == {}  # gpt-oss-120b is an open catalog model
    for s in out["systems"]:
        assert s["tool_s"] == pytest.approx(20)  # the tool is its own column, not orchestration
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "replay", str(p), "-s", "b200+x86"],
                       capture_output=True, text=True, cwd=ROOT, env={"COLUMNS": "200", "PATH": ""})
    assert r.returncode == 0 and "Amdahl" in r.stdout and "b200+x86" in r.stdout


def test_replay_table_fits_100_columns(tmp_path: Path) -> None:
    p = write(trace([agent(0, 4000), model("m1", 0, 2000, inp=30000, out=500), span("t", "tool", 2000, 3000),
                     model("m2", 3000, 4000, inp=31000, out=400)]), tmp_path / "run.jsonl")
    names = ["gb200+grace", "mi355x+x86", "rubin+vera", "h200+x86", "jalapeno"]
    args = [a for n in names for a in ("-s", n)]
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "replay", str(p), *args], capture_output=True,
                       text=True, cwd=ROOT, env={"COLUMNS": "100", "PATH": ""})
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    assert max(len(x) for x in lines) <= 100
    rows = {x.split()[0]: x for x in lines if x.split() and x.split()[0] in names}
    assert sorted(rows) == sorted(names)  # every system name whole, on its own row
    header = next(x for x in lines if x.split()[:1] == ["system"])
    assert all("…" not in rows[n] for n in names) and "…" not in header and "tools" in header


@pytest.mark.parametrize("args, needle", [
    (["-s", "tpu-v9"], "unknown system 'tpu-v9'"),
    (["-s", "b200+x86", "--cache-policy", "lru"], "unknown cache policy 'lru'"),
    (["-s", "b200+x86", "--model", "llama-9"], "unknown model 'llama-9'"),
    (["-s", "b200+x86", "--cpu-bound", "pytest=2"], "FRACTION must be between 0 and 1"),
])
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    p = write(trace([agent(0, 10), model("m1", 0, 10)]), tmp_path / "run.jsonl")
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "replay", str(p), *args], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr


def test_waiting_for_sums_to_the_model_call_time_per_system(kvct_result) -> None:
    for s in kvct_result.systems:
        assert set(s.waiting_for) == {"compute", "bandwidth", "overhead", "kv_load", "queueing"}
        assert sum(s.waiting_for.values()) == pytest.approx(s.model_calls_s, rel=1e-9)
        assert all(v >= 0 for v in s.waiting_for.values())
    # per call too: the parts in the call table sum to each replayed call's time
    calls = kvct_result.calls
    parts = sum(calls[f"wait_{k}_s"] for k in ("compute", "bandwidth", "overhead", "kv_load", "queueing"))
    assert ((parts - calls["replayed_s"]).abs() <= 1e-9 * calls["replayed_s"].abs().max()).all()
    d = kvct_result.to_dict()
    assert all("waiting_for" in s for s in d["systems"])


def test_what_ifs_on_estimated_hardware_carry_a_band(kvct_result) -> None:
    by = {s.name: s for s in kvct_result.systems}
    for name in ("jalapeno", "rubin+vera"):
        b = by[name].band
        assert b["ranged"] and len(b["e2e_s"]) == 2
        fast, slow = b["model_calls_s"]
        assert fast <= by[name].model_calls_s <= slow and fast < slow
    assert not by["h200+x86"].band  # measured hardware, no ranged estimate
    assert any("vera.st_speed" in x for x in by["rubin+vera"].band["ranged"])
    for d in by["jalapeno"].deployments:
        assert d["calibration_level"] == "unseen" and "declared" in d["calibration"]


def test_task_speedups_on_both_clocks(kvct_result, kvct) -> None:
    """The recorded user turns and idle gaps stay in every replay: the speed-up of the agent's own time is
    larger than the wall-clock one, and the same human time is left out on both sides."""
    from agentprof.analysis import analyze

    res = kvct_result
    t = analyze(kvct).time
    human = t.human_wait_s
    assert human > 0.3 * t.wall_s  # the corpus is mostly waiting for its users
    assert res.recorded.agent_active_s == pytest.approx(res.recorded.e2e_s - human, rel=1e-6)
    for s in res.systems:
        assert s.agent_active_s == pytest.approx(s.e2e_s - human, rel=1e-6)
        assert s.speedup_vs_recorded_active == pytest.approx(res.recorded.agent_active_s / s.agent_active_s)
        assert s.speedup_vs_recorded_active > s.speedup_vs_recorded > 1.0
        assert s.speedup_vs_recorded_active <= s.amdahl_bound_active + 1e-9
        assert "agent-active" in res.finding()
    d = res.to_dict()
    assert "speedup_vs_recorded_active" in d["systems"][0]


def test_band_ends_equal_a_fresh_replay_of_each_corner(kvct_result, kvct) -> None:
    """The band replays reuse the trace's human-wait seconds instead of recomputing them: each end equals a
    replay of that corner system on its own (agent-active speed-up included)."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.bands import corner_system

    row = next(s for s in kvct_result.systems if s.name == "jalapeno")
    system = load_catalog().system("jalapeno")
    for end, corner in enumerate(("fast", "slow")):
        fresh = replay(kvct, [corner_system(system, corner)], cache_policy="prefix", bands=False).systems[0]
        assert row.band["e2e_s"][end] == pytest.approx(fresh.e2e_s, rel=1e-12)
        assert row.band["speedup_vs_recorded_active"][end] == pytest.approx(fresh.speedup_vs_recorded_active,
                                                                            rel=1e-12)


def test_the_band_takes_the_estimated_cpu_tier_to_its_range_ends(kvct) -> None:
    """Under the agentic deployment a system no recipe covers gets the estimated CPU tier (500 GiB per instance,
    range HBM only … 2,500 GiB): the band's corners take those ends (listed in ``ranged``), and each end equals
    a replay of that corner on its own; a recipe system's tier is the recipe's whatever the corner."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.bands import ESTIMATED_TIER, corner_system
    from agentprof.replay.serving.deployment import GIB, deployment_for
    from agentprof.replay.systems import resolve

    cat = load_catalog()
    kimi = cat.models["kimi-k2.5"]
    jal = cat.system("jalapeno")
    tiers = {c: deployment_for(resolve(corner_system(jal, c) if c else jal, kimi, cat), "agentic")
             for c in (None, "fast", "slow")}
    assert [tiers[c].cpu_bytes_per_instance / GIB for c in (None, "fast", "slow")] == [500, 2500, 0]
    assert "the band's slow end of 0–2500 GiB" in tiers["slow"].cpu_source
    b200 = cat.system("b200+x86")
    assert deployment_for(resolve(corner_system(b200, "slow"), kimi, cat), "agentic").cpu_bytes(1) == \
        deployment_for(resolve(b200, kimi, cat), "agentic").cpu_bytes(1)

    row = replay(kvct, ["jalapeno"]).systems[0]  # cache auto: the agentic deployment's tier
    assert ESTIMATED_TIER in row.band["ranged"]
    for end, corner in enumerate(("fast", "slow")):
        fresh = slow = replay(kvct, [corner_system(jal, corner)], bands=False).systems[0]
        assert row.band["model_calls_s"][end] == pytest.approx(fresh.model_calls_s, rel=1e-12)
        tier = fresh.deployments[0]["deployment"]["cpu_tier_bytes"]
        assert tier == (2500 * GIB * 2 if corner == "fast" else 0.0)  # two 4-chip instances on 8 chips
    # one session whose context is compacted at Kimi's window (--overflow compact) fits one replica's HBM: the
    # tierless slow corner serves its hits from HBM, no fewer than the same corner with a 1000 GiB tier
    tiered = replay(kvct, [corner_system(jal, "slow")], bands=False, cache_policy="lmcache:cpu=1000GiB").systems[0]
    assert slow.cache["cpu_hit_tokens"] == 0 < tiered.cache["cpu_hit_tokens"]
    assert slow.cache["hit_share"] >= tiered.cache["hit_share"]
    assert ESTIMATED_TIER not in replay(kvct, ["jalapeno"], deployment="benchmark").systems[0].band["ranged"]


def test_standins_with_one_reason_print_as_one_line(kvct_result) -> None:
    from agentprof.report.results import grouped_standins

    lines = grouped_standins(list(kvct_result.standins.values()))
    assert len(set(kvct_result.standins.values())) > 1 and len(lines) == 1  # five notes, one reason
    assert all(name in lines[0] for name in kvct_result.standins)
    assert f"({len(kvct_result.standins)} models) replayed as Kimi K2.5" in lines[0]
    assert grouped_standins(["a replayed as X (why)", "b replayed as Y (why)", "unknown model replayed as X (why)"]
                            ) == ["a, unknown model (2 models) replayed as X (why)", "b replayed as Y (why)"]
