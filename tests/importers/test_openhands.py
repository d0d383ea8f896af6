"""OpenHands per-call completion logs: attempts, calls, tools, tokens, exact prompts with cache markers."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from agentprof.importers import load_any

from .importer_helpers import SAMPLES, imported, kinds, median_late_share

FOLDER = SAMPLES / "openhands" / "django__django-10554"


def _docs():
    return sorted((json.loads(f.read_text()) for f in FOLDER.glob("*.json")), key=lambda d: d["timestamp"])


def test_attempts_calls_tools_and_tokens():
    docs = _docs()
    sizes = [len(d["messages"]) for d in docs]
    restarts = [i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1]]
    assert restarts == [5]  # 5 + 35 calls (traces.md)
    tr = imported("openhands/django__django-10554")
    assert kinds(tr.spans, "django__django-10554")["model"] == 5
    assert kinds(tr.spans, "django__django-10554/attempt-2")["model"] == 35
    agent = tr.spans.filter(pl.col("session_id") == "django__django-10554/attempt-2").filter(
        pl.col("kind") == "agent").row(0, named=True)
    assert json.loads(agent["attributes"])["agentprof.session.role"] == "attempt"
    assert agent["parent_session_id"] == "django__django-10554"
    m = tr.spans.filter(pl.col("kind") == "model")
    usages = [d["response"]["usage"] for d in docs]
    assert m.get_column("input_tokens").sum() == sum(u["prompt_tokens"] for u in usages)
    assert m.get_column("output_tokens").sum() == sum(u["completion_tokens"] for u in usages)
    assert m.get_column("cache_read_tokens").sum() == sum(u.get("cache_read_input_tokens") or 0 for u in usages)
    # calls without cache fields stay unknown (null), not zero
    assert m.get_column("cache_read_tokens").null_count() == sum(1 for u in usages if "cache_read_input_tokens" not in u)
    n_tools = sum(len(d["response"]["choices"][0]["message"].get("tool_calls") or []) for d in docs)
    assert kinds(tr.spans)["tool"] == n_tools
    assert set(m.get_column("timing").unique()) == {"derived"}


def test_prompt_band_and_cache_control_markers(tmp_path):
    tr = imported("openhands/django__django-10554")
    m2 = tr.spans.filter((pl.col("kind") == "model") & (pl.col("session_id") == "django__django-10554/attempt-2"))
    assert 0.93 <= median_late_share(m2) <= 0.995
    # strip every cache_control marker: the hashes must not change
    out = tmp_path / "django__django-10554"
    out.mkdir()

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "cache_control"}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    n_markers = 0
    for f in FOLDER.glob("*.json"):
        text = f.read_text()
        n_markers += text.count('"cache_control"')
        (out / f.name).write_text(json.dumps(strip(json.loads(text))))
    assert n_markers > 40
    a = tr.spans.filter(pl.col("kind") == "model").sort("end_ns").get_column("block_hashes").to_list()
    b = load_any(out).spans.filter(pl.col("kind") == "model").sort("end_ns").get_column("block_hashes").to_list()
    assert a == b


def test_unknown_files_in_the_folder_are_skipped_not_fatal(tmp_path):
    out = tmp_path / "run"
    shutil.copytree(FOLDER, out / "django__django-10554")
    shutil.copy(SAMPLES / "openhands" / "metadata.json", out / "metadata.json")
    tr = load_any(out)
    assert kinds(tr.spans)["model"] == 40
    assert any(d.kind == "skipped_files" and "metadata.json" in d.path and "unknown format" in d.message
               for d in tr.diagnostics)


def test_the_restart_between_attempts_is_unrecorded_not_agent_time():
    """Attempt 2 starts 47 min after attempt 1's last call (the runtime was restarted). That gap belongs to
    neither attempt: attempt 1 ends at its last call, and the conversation's split counts the gap as
    ``unrecorded`` wait, not as the agent's own (orchestration) time."""
    from agentprof.analysis import analyze

    docs = _docs()
    ends = [d["timestamp"] for d in docs]
    tr = imported("openhands/django__django-10554")
    main = tr.spans.filter((pl.col("session_id") == "django__django-10554") & (pl.col("kind") == "agent")).row(
        0, named=True)
    assert main["end_ns"] == round(ends[4] * 1e9)  # its own last call, not attempt 2's
    t = analyze(tr).to_dict()["time"]
    gap = ends[5] - ends[4]  # attempt 2's first call has no start: its timed spans begin at its end
    assert t["waits_by_reason"]["unrecorded"] == pytest.approx(gap, abs=1e-3)
    assert t["glue_s"] == pytest.approx(0.0, abs=1e-6)


FIXTURES = SAMPLES.parents[1] / "tests" / "importers" / "fixtures_other"


def test_v1_sdk_logs_latency_tools_and_failed_calls(tmp_path):
    # Synthetic fixture (fixtures_other/README.md): the V1 SDK's Telemetry.log_llm_call layout.
    files = sorted((FIXTURES / "openhands-v1").glob("*.json"))
    docs = sorted((json.loads(f.read_text()) for f in files), key=lambda d: d["timestamp"])
    tr = load_any(files, fmt="openhands")
    m = tr.spans.filter(pl.col("kind") == "model").sort("end_ns")
    assert m.height == len(docs) == 3
    # start = timestamp - latency_sec, both logged by the SDK
    assert m.get_column("end_ns").to_list() == [round(d["timestamp"] * 1e9) for d in docs]
    assert m.get_column("start_ns").to_list() == [round(d["timestamp"] * 1e9) - round(d["latency_sec"] * 1e9)
                                                  for d in docs]
    assert set(m.get_column("timing").to_list()) == {"measured"}
    # the -error.json log is a failed call, not a bad file
    assert m.get_column("status").to_list() == ["ok" if "response" in d else "error" for d in docs]
    assert m.filter(pl.col("status") == "error").get_column("error_type").item() == "RateLimitError"
    ok = [d for d in docs if "response" in d]
    assert m.filter(pl.col("status") == "ok").get_column("input_tokens").to_list() == \
        [d["response"]["usage"]["prompt_tokens"] for d in ok]
    assert m.filter(pl.col("status") == "ok").get_column("cache_read_tokens").to_list() == \
        [d["response"]["usage"]["cache_read_input_tokens"] for d in ok]
    n_tools = sum(len(d["response"]["choices"][0]["message"].get("tool_calls") or []) for d in ok)
    assert kinds(tr.spans)["tool"] == n_tools == 1
    # the top-level 'tools' are part of the prompt: dropping them changes the first call's hashes
    first = json.loads(files[0].read_text())
    del first["tools"]
    (tmp_path / "call.json").write_text(json.dumps(first))
    bare = load_any(tmp_path / "call.json", fmt="openhands").spans.filter(pl.col("kind") == "model")
    assert bare.get_column("prompt_tokens_hashed").item() < m.get_column("prompt_tokens_hashed").to_list()[0]


def test_mock_function_calling_tools_come_from_fncall_response():
    # Synthetic fixture: V0 with mocked function calling logs the text form as 'response'.
    path = next((FIXTURES / "openhands-mock-fncall").glob("*.json"))
    doc = json.loads(path.read_text())
    tr = load_any(path, fmt="openhands")
    t = tr.spans.filter(pl.col("kind") == "tool")
    calls = doc["fncall_response"]["choices"][0]["message"]["tool_calls"]
    assert "tool_calls" not in doc["response"]["choices"][0]["message"]
    assert t.height == len(calls) == 1
    assert json.loads(t.get_column("attributes").item())["gen_ai.tool.call.id"] == calls[0]["id"]
