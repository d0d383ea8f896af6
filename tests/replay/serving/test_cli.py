"""``agentprof replay --concurrency`` and ``agentprof capacity`` end to end, and their one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentprof.importers import load_any
from agentprof.trace import write

from ...cli_support import run
from ..spans import agent, model, span, trace
from .conftest import KVCT

SERVING_KEYS = ("concurrency", "ttft_s", "tpot_s", "queue_s", "task_s", "task_speedup_median", "tasks_per_hour",
                "output_tokens_per_s", "hit_share", "utilization", "energy_wh_per_task", "cost_per_task")


@pytest.mark.parametrize("sample", ["mini-swe-agent", "openhands"])
def test_logs_with_inferred_times_give_durations(capsys, sample) -> None:
    # these logs stamp replies only: a call whose start is unknown must not turn a task into a Unix timestamp
    code, out, err = run(capsys, "replay", str(KVCT.parent / sample), "-s", "h200+x86", "--concurrency", "4",
                         "--json")
    assert code == 0, err
    d = json.loads(out)
    sv = d["systems"][0]["serving"]
    spans = load_any(str(KVCT.parent / sample)).spans
    wall = (spans["end_ns"].max() - spans["start_ns"].min()) / 1e9  # the whole recording, retries included
    assert 0 < sv["task_s"]["p90"] <= wall * 8 and sv["task_s"]["p90"] < 30 * 86400
    assert sv["tasks_per_hour"] > 0.1 and sv["tasks_completed"] == 4
    assert sv["energy_wh_per_task"] < sv["power"]["busy_kw"] * 1000 * sv["makespan_s"] / 3600
    assert sv["beyond_context"] == {**sv["beyond_context"], "count": 0, "policy": "compact", "sessions": 0}


def test_replay_concurrency_json_has_a_serving_object_per_system(capsys) -> None:
    code, out, err = run(capsys, "replay", str(KVCT), "-s", "h200+x86", "-s", "rubin+vera", "--concurrency", "8",
                         "--cache-policy", "lmcache:cpu=1TB", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["concurrency"] == 8
    for s in d["systems"]:
        sv = s["serving"]
        for k in SERVING_KEYS:
            assert k in sv, k
        for k in ("ttft_s", "tpot_s", "queue_s"):
            assert set(sv[k]) == {"p50", "p90", "p99"}
        assert set(sv["task_s"]) == {"p50", "p90"}
        assert set(sv["hit_share"]) == {"hbm", "cpu", "disk", "total"}
        assert sv["power"]["boundary"] and sv["cost_per_task"]["usd_per_hour_source"]
        # the row's cache figures are the simulation's
        assert s["cache"]["hit_share"] == pytest.approx(sv["hit_share"]["total"])
    h200, rubin = (s["serving"] for s in d["systems"])
    assert h200["host_link"]["key"] == "pcie5-x16" and rubin["host_link"]["key"] == "nvlink-c2c-vera"
    # the explicit tier replaces the deployment's; H200 keeps the rest of its agentic recipe (85 % of HBM)
    assert d["cache_policy"].startswith("lmcache")
    for sv in (h200, rubin):
        assert sv["deployment"]["cpu_tier_bytes"] == 1e12 and sv["deployment"]["cpu_tier_from"] == "--cache-policy"
    assert h200["deployment"]["level"] == "recipe" and h200["deployment"]["mem_util"] == 0.85
    assert rubin["deployment"]["level"] == "estimate" and rubin["deployment"]["mem_util"] == 0.9


def test_the_deployment_supplies_the_cache_unless_a_policy_or_benchmark_is_asked(capsys) -> None:
    def serving(*extra: str) -> list[dict]:
        code, out, err = run(capsys, "replay", str(KVCT), "-s", "jalapeno", "-s", "b200+x86", "--concurrency", "2",
                             *extra, "--json")
        assert code == 0, err
        d = json.loads(out)
        return [s["serving"] | {"_policy": d["cache_policy"], "_band": s.get("band") or {}} for s in d["systems"]]

    jal, b200 = serving()
    # Jalapeño's band moves the estimated tier too, and carries the simulation's figures at both corners
    band = jal["_band"]
    assert "agentic.default.cpu_tier_gib_per_instance" in band["ranged"]
    fast, slow = band["serving_ttft_p50_s"]
    assert fast <= jal["ttft_s"]["p50"] <= slow and fast < slow
    assert band["serving_tasks_per_hour"][0] >= band["serving_tasks_per_hour"][1]
    assert "agentic.default.cpu_tier_gib_per_instance" not in b200["_band"].get("ranged", [])  # the recipe's tier
    assert jal["_policy"].startswith("auto: each system's agentic deployment")
    # no recipe for Jalapeño: the recipes' 500 GiB per serving instance, an estimate with its range
    inst = jal["attention"]["instances"]
    assert jal["deployment"]["level"] == "estimate" and jal["deployment"]["cpu_tier_bytes"] == 500 * 2**30 * inst
    assert jal["deployment"]["cpu_tier_from"].startswith("deployment: estimate") and "2,500" in \
        jal["deployment"]["cpu_tier_from"]
    assert b200["deployment"]["cpu_tier_bytes"] == 1000 * 2**30 and b200["attention"]["kv_dtype"] == "fp8"
    assert "Deployment: agentic" in b200["why"] and "LMCache CPU tier 1,000 GiB" in b200["why"]
    # --cache-policy prefix: HBM only, the recipe's KV dtype and HBM share kept
    _, b200p = serving("--cache-policy", "prefix")
    assert b200p["deployment"]["cpu_tier_bytes"] == 0 and b200p["hit_share"]["cpu"] == 0.0
    assert b200p["deployment"]["kv_dtype"] == "fp8" and b200p["deployment"]["mem_util"] == 0.95
    assert b200p["deployment"]["cpu_tier_from"] == "--cache-policy"
    # --deployment benchmark: none of it
    _, b200b = serving("--deployment", "benchmark")
    dep = b200b["deployment"]
    assert dep["name"] == "benchmark" and dep["cpu_tier_bytes"] == 0 and dep["mem_util"] == 0.9
    assert b200b["attention"]["kv_dtype"] == "bf16" and b200b["kv_pool_tokens"] < b200p["kv_pool_tokens"] / 2


def test_cache_policy_none_turns_the_prefix_cache_off(capsys) -> None:
    code, out, _ = run(capsys, "replay", str(KVCT), "-s", "b200+x86", "--concurrency", "2", "--cache-policy", "none",
                       "--json")
    assert code == 0
    sv = json.loads(out)["systems"][0]["serving"]
    assert sv["hit_share"]["total"] == 0.0 and sv["cold_calls"]["count"] == sv["calls"]


def test_replay_terminal_shows_the_serving_panel(capsys) -> None:
    code, out, _ = run(capsys, "replay", str(KVCT), "-s", "b200+x86", "--concurrency", "4", "--cap-wait", "60")
    assert code == 0
    assert "serving: 4 concurrent session(s)" in out and "calls in flight" in out and "energy boundary" in out


def test_the_why_reads_as_short_lines_in_a_terminal(capsys, monkeypatch) -> None:
    # the one-paragraph why (JSON, the report's folded panel) runs past 200 words; the terminal prints the same
    # figures as lines of under 60 words each
    from agentprof.replay.serving.why import why_lines

    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run(capsys, "replay", str(KVCT), "-s", "b200+x86", "--concurrency", "8", "--json")
    assert code == 0, err
    sv = json.loads(out)["systems"][0]["serving"]
    lines = why_lines(sv)
    assert len(sv["why"].split()) > 100 and len(lines) >= 6
    assert all(0 < len(line.split()) <= 60 for line in lines)
    figures = re.compile(r"\d[\d,.]*\d|\d")
    assert sorted(figures.findall(sv["why"])) == sorted(figures.findall(" ".join(lines)))
    code, term, _ = run(capsys, "replay", str(KVCT), "-s", "b200+x86", "--concurrency", "8")
    assert code == 0
    flat = " ".join(term.split())
    assert all(" ".join(line.split()) in flat for line in lines)
    assert " ".join(sv["why"].split()) not in flat


def test_capacity_finds_the_largest_concurrency_meeting_the_slo(capsys) -> None:
    # one attention layout (tensor-parallel: its simulations are the cheap ones) so the search alone is tested
    # (the calls beyond Kimi's context are compacted, --overflow compact: the tail is the long prompts that fit)
    code, out, err = run(capsys, "capacity", str(KVCT), "-s", "b200+x86", "--slo", "ttft_p99=7s",
                         "--max-concurrency", "64", "--attention", "tp", "--json")
    assert code == 0, err
    d = json.loads(out)
    row = d["systems"][0]
    n = row["concurrency"]
    assert 1 <= n < 64
    assert row["serving"]["ttft_s"]["p99"] <= 7
    assert row["first_failing"]["concurrency"] == n + 1 and row["first_failing"]["ttft_p99_s"] > 7
    assert row["tasks_per_hour"] > 0 and row["tasks_per_hour_per_kw"] > 0 and row["energy_wh_per_task"] > 0
    assert row["cost_per_task"]["self_hosted_usd"] > 0
    tried = {t["concurrency"]: t["meets"] for t in row["tried"]}
    assert all(v for k, v in tried.items() if k <= n) and not any(v for k, v in tried.items() if k > n)


def test_capacity_terminal(capsys) -> None:
    code, out, _ = run(capsys, "capacity", str(KVCT), "-s", "rubin+vera", "--slo", "ttft_p99=120s",
                       "--slo", "tpot_p99=100ms", "--max-concurrency", "4", "--attention", "tp")
    assert code == 0
    assert "largest concurrency that meets the SLO" in out and "rubin+vera" in out
    assert "rubin+vera: band (every ranged estimate at its fast / slow end) up to" in " ".join(out.split())


def test_capacity_bands_search_each_corner(capsys) -> None:
    """A system resting on estimates is searched again at its ranges' fast and slow ends (the estimated CPU tier
    among them); the fast end serves at least as many sessions; --no-bands skips it; and where even one session
    misses the SLO the error says what the fast end would serve."""
    args = ("capacity", str(KVCT), "-s", "rubin+vera", "--slo", "ttft_p99=3s", "--max-concurrency", "32",
            "--attention", "tp", "--json")
    code, out, err = run(capsys, *args)
    assert code == 0, err
    row = json.loads(out)["systems"][0]
    fast, slow = row["band"]["concurrency"]
    assert fast >= row["concurrency"] >= slow and fast > slow
    assert {"rubin.hbm_bw", "agentic.default.cpu_tier_gib_per_instance"} <= set(row["band"]["ranged"])
    # each moved number with its evidence class: Rubin's bandwidth is NVIDIA's figure, Vera's CPU speed an estimate
    ev = row["band"]["evidence"]
    assert set(ev) == set(row["band"]["ranged"])
    assert ev["rubin.hbm_bw"] == "vendor" and ev["vera.st_speed"] == "estimate" and ev["rubin.fp8_flops"] == "estimate"
    code, out, err = run(capsys, *(a if a != "32" else "2" for a in args), "--no-bands")  # a short search will do
    assert code == 0 and "band" not in json.loads(out)["systems"][0]
    # one Jalapeño session's p99 is 19 s (its cold first prompts), its fast end serves more
    code, _, err = run(capsys, "capacity", str(KVCT), "-s", "jalapeno", "--slo", "ttft_p99=15s",
                       "--max-concurrency", "4", "--attention", "tp")
    assert code != 0 and "even one session gets" in err and "at its fast end: up to" in err


def _no_tokens(tmp_path: Path) -> Path:
    t = trace([agent(0, 10), span("m1", "model", 0, 10, name="chat gpt-oss-120b", model="gpt-oss-120b")])
    return write(t, tmp_path / "no-tokens.jsonl")


@pytest.mark.parametrize("args, needle", [
    (["capacity", str(KVCT), "-s", "b200+x86", "--slo", "ttft_p99=1ms"], "no concurrency meets ttft_p99 <= 0.001 s"),
    (["capacity", str(KVCT), "-s", "h100+x86", "--model", "deepseek-r1", "--slo", "ttft_p99=5s"], "does not fit"),
    (["capacity", str(KVCT), "-s", "b200+x86", "--slo", "latency=5s"], "expected METRIC_PCT=VALUE"),
    (["replay", "NOTOKENS", "-s", "b200+x86", "--concurrency", "4"], "no model call has input and output token"),
    (["capacity", "NOTOKENS", "-s", "b200+x86", "--slo", "ttft_p99=5s"], "no model call has input and output token"),
    (["replay", str(KVCT), "-s", "b200+x86", "--concurrency", "2", "--cache-ttl", "-1"], "TTL must be positive"),
])
def test_bad_input_is_one_line(capsys, tmp_path: Path, args: list[str], needle: str) -> None:
    p = str(_no_tokens(tmp_path))
    code, out, err = run(capsys, *[p if a == "NOTOKENS" else a for a in args])
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert out == ""  # nothing half-written


def test_help_has_examples(capsys) -> None:
    code, out, _ = run(capsys, "capacity", "--help")
    assert code == 0 and "Examples:" in out and "--slo" in out


def test_model_call_lacking_tokens_keeps_its_time_without_loading_the_server(capsys, tmp_path: Path) -> None:
    t = trace([agent(0, 100), model("m1", 0, 10), span("m2", "model", 20, 30, name="chat gpt-oss-120b",
                                                       model="gpt-oss-120b"), model("m3", 40, 50)])
    p = write(t, tmp_path / "mixed.jsonl")
    code, out, err = run(capsys, "replay", str(p), "-s", "b200+x86", "--concurrency", "2", "--json")
    assert code == 0, err
    sv = json.loads(out)["systems"][0]["serving"]
    # one recorded session cycled into two slots: 2 x 2 simulated calls; m2 is a fixed delay
    assert sv["sessions"] == 2 and sv["calls"] == 4 and any("lack token counts" in n for n in sv["notes"])
