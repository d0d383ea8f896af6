"""``agentprof analyze`` and ``agentprof cachesim`` end to end on the shared samples."""

from __future__ import annotations

import json

import pytest

from ..cli_support import run
from .analysis_helpers import SAMPLES


def test_analyze_json_on_a_folder(capsys):
    code, out, _ = run(capsys, "analyze", str(SAMPLES / "kv-cache-tester"), "--json", "--no-progress")
    assert code == 0
    d = json.loads(out)
    assert d["sessions"] == d["conversations"] == 19 and d["model_calls"] > 900
    assert 0.9 < d["redundancy"]["session_hit_rate"]["median"] <= 1
    assert d["source"]["hash_scheme"] == "kv-cache-tester"


def test_analyze_terminal_output(capsys):
    code, out, _ = run(capsys, "analyze", str(SAMPLES / "codex"), "--no-progress")
    assert code == 0
    for text in ("Time", "Amdahl bound", "Prompt redundancy", "Cache misses", "idle_gap_ttl", "fix:"):
        assert text in out


def test_analyze_groups_misses_by_cause(capsys):
    """Each cause's fix is printed once, with the calls it covers numbered as the report numbers them."""
    code, out, _ = run(capsys, "analyze", str(SAMPLES / "codex"), "--json", "--no-progress")
    misses = json.loads(out)["cache_misses"]
    tops = {}
    for m in misses:
        top = max(m["causes"], key=lambda c: c["score"])
        tops.setdefault(top["cause"], []).append(m["call_index"] + 1)
    assert len(misses) > len(tops) >= 2  # some cause covers several calls
    code, out, _ = run(capsys, "analyze", str(SAMPLES / "codex"), "--no-progress")
    text = out[out.index("Cache misses"):]
    assert text.count("fix:") == len(tops)
    assert f"Cache misses: {len(misses)} in {len(tops)} cause(s)" in text
    for cause, calls in tops.items():
        line = next(x for x in text.splitlines() if x.strip().startswith(cause))
        assert f"{len(calls)} call(s): " + ", ".join(str(c) for c in calls[:3]) in line


@pytest.mark.parametrize("sample", ["claude-code", "codex"])
def test_model_time_without_a_first_token_is_not_called_prefill(capsys, sample):
    """Claude Code's log records no first token: its model time is not a 0 s prefill plus a 0 s decode; Codex's
    records some, and only those calls are split."""
    code, out, _ = run(capsys, "analyze", str(SAMPLES / sample), "--json", "--no-progress")
    t = json.loads(out)["time"]
    code, out, _ = run(capsys, "analyze", str(SAMPLES / sample), "--no-progress")
    assert code == 0
    rows = {line[:27].strip(): line[27:].split() for line in out.splitlines() if line.startswith("  ")}
    unsplit = t["model_s"] - t["model_ttft_s"] - t["model_decode_s"]
    assert unsplit > 1 and "no first token recorded" in rows
    assert ("TTFT / prefill" in rows) == (t["model_ttft_s"] > 0)


def test_analyze_empty_trace_is_a_clear_error(capsys, tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text('{"record":"meta","format":"agentprof-trace","version":1,"name":"crashed"}\n')
    code, _, err = run(capsys, "analyze", str(p))
    assert code == 2 and err.startswith("error:") and "no spans" in err and len(err.strip().splitlines()) == 1


def test_cachesim_json(capsys):
    code, out, _ = run(capsys, "cachesim", str(SAMPLES / "claude-code"), "--model", "gpt-oss-120b",
                       "--tier", "hbm=2GiB", "--tier", "cpu=20GiB", "--json", "--no-progress")
    assert code == 0
    d = json.loads(out)
    s = d["simulation"]
    assert [t["name"] for t in s["tiers"]] == ["hbm", "cpu"] and s["block"] == 256
    assert s["tiers"][0]["capacity_bytes"] == 2 * 1024**3
    assert 0 < s["hit_rate"] <= d["sweep"]["unlimited_hit_rate"]
    assert d["sweep"]["capacity_at_target_bytes"] > 0


def test_cachesim_provider_mode_and_stand_in(capsys):
    code, out, _ = run(capsys, "cachesim", str(SAMPLES / "claude-code"), "--model", "claude-opus-4-6",
                       "--provider", "anthropic", "--no-sweep", "--no-progress")
    assert code == 0
    assert "stand-in" in out and "TTL 300 s" in out and "provider" in out


@pytest.mark.parametrize("args,msg", [
    (("--block", "100"), "multiple of the trace's block size"),
    (("--tier", "gpu=1GiB"), "tier must be hbm, cpu or disk"),
    (("--tier", "cpu=lots"), "cannot read size"),
    (("--ttl", "5 weeks"), "cannot read duration"),
])
def test_cachesim_bad_options(capsys, args, msg):
    code, _, err = run(capsys, "cachesim", str(SAMPLES / "codex"), "--model", "deepseek-r1", "--no-progress",
                       *args)
    assert code == 2 and msg in err and err.startswith("error:")


def test_help_has_examples(capsys):
    for cmd in ("analyze", "cachesim"):
        code, out, _ = run(capsys, cmd, "--help")
        assert code == 0 and "Examples:" in out and f"agentprof {cmd} " in out


def test_analyze_unknown_format_names_where_from_exists(capsys, tmp_path):
    odd = tmp_path / "odd.json"
    odd.write_text('{"hello": "world"}')
    code, _, err = run(capsys, "analyze", str(odd), "--no-progress")
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "agentprof import FILE --from FORMAT" in err  # named with the command that has the option
    code, help_text, _ = run(capsys, "analyze", "--help")
    if "--from" not in help_text:  # analyze itself has no --from: it must not be suggested as analyze's
        assert " pass --from" not in err and "use --from" not in err


def test_analyze_takes_what_trace_load_returns(tmp_path):
    import agentprof.trace
    from agentprof.analysis import analyze
    from agentprof.importers import load_any
    from agentprof.trace.files import write_jsonl

    path = write_jsonl(load_any(SAMPLES / "codex"), tmp_path / "t.jsonl")
    table = agentprof.trace.load(path)
    a = analyze(table)
    b = analyze(agentprof.trace.read(path))
    assert a.to_dict()["model_calls"] == b.to_dict()["model_calls"] > 0
    assert analyze(str(path)).to_dict()["model_calls"] == b.to_dict()["model_calls"]
