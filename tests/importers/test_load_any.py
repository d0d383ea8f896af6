"""load_any and ``agentprof import``: detection, mixed inputs, determinism, bad input, the CLI summary."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from agentprof.errors import TraceFormatError
from agentprof.importers import detect_format, load_any
from agentprof.importers.cli import import_cmd
from agentprof.trace import read

from .importer_helpers import SAMPLES, imported, jsonl

CC_MAIN = SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
CODEX = next((SAMPLES / "codex").glob("rollout-*.jsonl"))


@pytest.mark.parametrize("path,fmt", [
    (CC_MAIN, "claude-code"), (CODEX, "codex"), (SAMPLES / "kv-cache-tester" / "trace_0001.json", "kv-cache-tester"),
    (next((SAMPLES / "openhands" / "django__django-10554").glob("*.json")), "openhands"),
    (SAMPLES / "mini-swe-agent" / "django__django-13807.traj.json", "mini-swe-agent"),
    (SAMPLES / "swe-agent" / "pydicom__pydicom-1458.traj", "swe-agent"),
    (SAMPLES / "aider" / ".aider.llm.history", "aider"), (SAMPLES / "SOURCES.md", "unknown"),
    (SAMPLES / "openhands" / "metadata.json", "unknown")])
def test_detect_format(path, fmt):
    assert detect_format(path) == fmt


OTHER = Path(__file__).parent / "fixtures_other"


@pytest.mark.parametrize("name,fmt", [
    ("openhands-v1/anthropic__claude-sonnet-4-5-20250929-1760000015.250-9c1d-error.json", "openhands"),
    ("swe-agent-retry.traj", "swe-agent"), ("swe-agent-query.traj", "swe-agent"),
    ("aider-blocks.llm.history", "aider"), ("pydantic-ai-agent-run.otlp.json", "otlp-json")])
def test_detect_later_layouts(name, fmt):
    """Failed-call logs of the OpenHands V1 SDK and retry-agent SWE-agent files are found in a folder too."""
    assert detect_format(OTHER / name) == fmt


def test_a_folder_of_v1_logs_keeps_its_failed_call():
    t = load_any(OTHER / "openhands-v1")
    models = t.spans.filter(pl.col("kind") == "model")
    assert models.height == 3 and models.get_column("status").to_list().count("error") == 1


def test_all_samples_at_once_and_deterministic(tmp_path):
    """Importing the same input twice gives identical output (ids, order, bytes of the written file)."""
    a = load_any(SAMPLES)
    b = load_any(SAMPLES)
    assert a.spans.equals(b.spans) and a.meta == b.meta
    assert [d.to_dict() for d in a.diagnostics] == [d.to_dict() for d in b.diagnostics]
    assert set(a.meta.extra["formats"]) == {"claude-code", "codex", "openhands", "mini-swe-agent", "swe-agent",
                                            "aider", "kv-cache-tester", "tracelab"}
    a_path, b_path = tmp_path / "a.parquet", tmp_path / "b.parquet"
    from agentprof.trace import write

    write(a, a_path)
    write(b, b_path)
    assert a_path.read_bytes() == b_path.read_bytes()
    # and the agentprof files read back as the same trace
    back = load_any(a_path)
    assert back.spans.equals(a.spans)
    sessions = a.spans.get_column("session_id").n_unique()
    assert sessions == 5 + 1 + 2 + 1 + 2 + 1 + 19 + 2  # the TraceLab round trace holds two sessions


def test_same_file_twice_is_imported_once(tmp_path):
    shutil.copy(CODEX, tmp_path / "copy.jsonl")
    tr = load_any([CODEX, tmp_path / "copy.jsonl"])
    assert tr.spans.filter(pl.col("kind") == "model").height == 66
    assert any(d.kind == "duplicate_input" for d in tr.diagnostics)


def _cut(src, dst, keep_lines, extra=b""):
    lines = src.read_bytes().split(b"\n")
    dst.write_bytes(b"\n".join(lines[:keep_lines]) + b"\n" + extra)


def test_truncated_last_line_is_skipped_with_a_diagnostic(tmp_path):
    p = tmp_path / "s.jsonl"
    raw = CC_MAIN.read_bytes()
    p.write_bytes(raw[: raw.index(b"\n", len(raw) // 2) + 200])  # cut inside a line, no final newline
    tr = load_any(p)
    assert [d.kind for d in tr.diagnostics if d.kind == "truncated_last_line"] == ["truncated_last_line"]
    assert tr.spans.filter(pl.col("kind") == "model").height > 50


def test_broken_line_in_the_middle_names_file_and_line(tmp_path):
    p = tmp_path / "rollout-x.jsonl"
    lines = CODEX.read_text().splitlines()
    lines[40] = lines[40][: len(lines[40]) // 2]
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError, match=r"rollout-x\.jsonl:41: not valid JSON"):
        load_any(p)
    tr = load_any(p, skip_bad_lines=True)
    assert [d.line for d in tr.diagnostics if d.kind == "bad_line"] == [41]
    assert any(d.kind == "skipped_lines" and d.message.startswith("1 ") for d in tr.diagnostics)


def test_wrong_types_are_located(tmp_path):
    recs = jsonl(CC_MAIN)
    i = next(k for k, r in enumerate(recs) if r.get("type") == "assistant")
    recs[i]["message"]["content"] = 42
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    with pytest.raises(TraceFormatError,
                       match=rf"s\.jsonl:{i + 1}: assistant record: message.content must be a string or list"):
        load_any(p)
    recs = jsonl(CODEX)
    recs[5]["payload"] = ["x"]
    q = tmp_path / "rollout-y.jsonl"
    q.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    with pytest.raises(TraceFormatError, match=r"rollout-y\.jsonl:6: response_item record: 'payload' must be an object"):
        load_any(q)
    assert load_any(q, skip_bad_lines=True).spans.height > 0


def test_unknown_record_kinds_are_counted_not_fatal(tmp_path):
    lines = CC_MAIN.read_text().splitlines()
    new = json.dumps({"type": "hologram", "uuid": "x", "sessionId": "258c7280-ae70-4798-800f-63464d01a85d"})
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(lines[:10] + [new, new] + lines[10:]) + "\n")
    tr = load_any(p)
    d = [d for d in tr.diagnostics if d.kind == "unknown_record"]
    assert len(d) == 1 and d[0].line == 11 and d[0].message.startswith("2 record(s) of unknown kind 'hologram'")
    ref = load_any(CC_MAIN)
    ids = ("trace_id", "span_id", "parent_id", "attributes")  # attributes hold source line numbers
    assert tr.spans.drop(*ids).equals(ref.spans.drop(*ids))
    q = tmp_path / "rollout-u.jsonl"
    q.write_text(CODEX.read_text() + json.dumps({"timestamp": "2026-05-11T09:00:00Z", "type": "future_thing",
                                                 "payload": {}}) + "\n")
    assert any(d.kind == "unknown_record" for d in load_any(q).diagnostics)


def test_another_format_with_explicit_from_is_an_error():
    with pytest.raises(TraceFormatError, match=r"not a codex file \(it looks like claude-code\)"):
        load_any(CC_MAIN, fmt="codex")
    with pytest.raises(TraceFormatError, match=r"not a claude-code file \(it looks like kv-cache-tester\)"):
        load_any(SAMPLES / "kv-cache-tester" / "trace_0001.json", fmt="claude-code")


def test_unreadable_and_unknown_inputs(tmp_path):
    from agentprof.errors import AgentprofError

    with pytest.raises(AgentprofError, match="no such file"):
        load_any(tmp_path / "nope.jsonl")
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(TraceFormatError, match="cannot tell which agent wrote this file"):
        load_any(tmp_path / "x.json")
    with pytest.raises(AgentprofError, match="no trace files found"):
        load_any(tmp_path, fmt="codex")


def test_cli_json_summary_counts(tmp_path):
    out = tmp_path / "t.parquet"
    r = CliRunner().invoke(import_cmd, [str(SAMPLES / "codex"), str(SAMPLES / "openhands"), "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    for key in ("format", "sessions", "model_calls", "tool_calls", "input_tokens", "cache_read_tokens",
                "cache_write_tokens", "output_tokens", "diagnostics"):
        assert key in s
    assert (s["format"], s["sessions"], s["model_calls"]) == ("mixed", 3, 66 + 40)
    codex_total = [r["payload"]["info"]["total_token_usage"] for r in jsonl(CODEX) if r["type"] == "event_msg"
                   and r["payload"]["type"] == "token_count" and r["payload"].get("info")][-1]
    oh = imported("openhands/django__django-10554").spans.filter(pl.col("kind") == "model")
    assert s["input_tokens"] == codex_total["input_tokens"] + oh.get_column("input_tokens").sum()
    assert s["diagnostics"] == {"skipped_files": 1}
    assert read(out).spans.height == imported("codex").spans.height + oh.height + 39 + 2


def test_cli_human_summary_and_skip_count(tmp_path):
    p = tmp_path / "rollout-x.jsonl"
    lines = CODEX.read_text().splitlines()
    lines[40] = "{broken"
    p.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(import_cmd, [str(p), "--skip-bad-lines"])
    assert r.exit_code == 0 and "model calls" in r.output and "skipped" in r.output and "1 bad" in r.output


def test_cli_errors_are_one_line_with_exit_status_2(tmp_path):
    p = tmp_path / "rollout-x.jsonl"
    p.write_text('{"timestamp": "2026-05-11T09:00:00Z", "type": "session_meta", "payload": {"id": "a"}}\n{oops\n{}\n')
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "import", str(p)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and "rollout-x.jsonl:2: not valid JSON" in r.stderr


CC_SMALL = SAMPLES / "claude-code" / "session-3fe1b6bc.jsonl"


def _with_leading_metadata(src: Path, dst: Path) -> Path:
    """``src`` as Claude Code 2.1.x writes it now: session metadata records first (``mode``,
    ``permission-mode``, ``ai-title``: the shapes public Claude Code session readers parse and skip)."""
    sid = next(r["sessionId"] for r in jsonl(src) if isinstance(r.get("sessionId"), str))
    head = [{"type": "mode", "mode": "default", "sessionId": sid},
            {"type": "permission-mode", "permissionMode": "default", "sessionId": sid},
            {"type": "ai-title", "aiTitle": "fix the build", "sessionId": sid}]
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("".join(json.dumps(r) + "\n" for r in head) + src.read_text())
    return dst


def test_a_claude_code_folder_whose_sessions_begin_with_mode_records_imports(tmp_path):
    """The issue's case: ``import ~/.claude/projects/<project>/`` said "no trace files found" because the
    session files open with ``mode``/``permission-mode`` records; the single file imported."""
    proj = tmp_path / "-home-me-repo"
    f = _with_leading_metadata(CC_SMALL, proj / CC_SMALL.name)
    assert detect_format(f) == "claude-code"
    tr = load_any(proj)
    want = imported("claude-code/session-3fe1b6bc.jsonl").spans
    assert tr.spans.filter(pl.col("kind") == "model").height == want.filter(pl.col("kind") == "model").height > 0
    lead = [d for d in tr.diagnostics if d.kind == "leading_records_skipped"]
    assert len(lead) == 1 and lead[0].line == 4 and "'mode'" in lead[0].message and "3 leading" in lead[0].message
    unknown = {d.message for d in tr.diagnostics if d.kind == "unknown_record"}
    assert any("'permission-mode'" in m for m in unknown) and any("'mode'" in m for m in unknown)


def test_leading_unknown_records_are_read_past_in_every_jsonl_format(tmp_path):
    """Every JSON Lines format is recognized past a few records of no known kind (a newer version's header)."""
    junk = "".join(json.dumps({"type": f"future-header-{i}", "v": i}) + "\n" for i in range(5))
    for src, fmt in ((CODEX, "codex"), (CC_SMALL, "claude-code"),
                     (Path(__file__).parent / "fixtures_other" / "pydantic-ai-agent-run.otlp.json", "otlp-json")):
        if not src.exists():
            continue
        p = tmp_path / f"{fmt}.jsonl"
        p.write_text(junk + src.read_text())
        assert detect_format(p) == fmt, fmt


def test_a_mixed_folder_reports_each_files_format_and_every_skipped_file(tmp_path):
    d = tmp_path / "mixed"
    _with_leading_metadata(CC_SMALL, d / "claude" / CC_SMALL.name)
    shutil.copy(CODEX, d / "codex" / CODEX.name) if (d / "codex").mkdir(parents=True) is None else None
    shutil.copy(SAMPLES / "kv-cache-tester" / "trace_0001.json", d / "trace_0001.json")
    (d / "notes.jsonl").write_text(json.dumps({"type": "todo", "text": "x"}) + "\n")
    (d / "config.json").write_text('{"theme": "dark"}')
    (d / "empty.jsonl").write_text("")
    r = CliRunner().invoke(import_cmd, [str(d), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert s["files_by_format"] == {"claude-code": 1, "codex": 1, "kv-cache-tester": 1}
    assert {Path(p).name: f for p, f in s["file_formats"].items()} == {
        CC_SMALL.name: "claude-code", CODEX.name: "codex", "trace_0001.json": "kv-cache-tester"}
    reasons = {Path(x["path"]).name: x["reason"] for x in s["skipped_files"]}
    assert set(reasons) == {"notes.jsonl", "config.json", "empty.jsonl"}
    assert "'todo'" in reasons["notes.jsonl"] and "empty" in reasons["empty.jsonl"]
    human = CliRunner().invoke(import_cmd, [str(d)])
    assert human.exit_code == 0, human.output
    for name in (CC_SMALL.name, CODEX.name, "trace_0001.json", "notes.jsonl", "config.json"):
        assert name in human.output
    assert "skipped" in human.output and "kv-cache-tester" in human.output


def test_a_folder_with_nothing_importable_says_why_for_each_file(tmp_path):
    from agentprof.errors import AgentprofError

    (tmp_path / "a.jsonl").write_text(json.dumps({"type": "todo"}) + "\n")
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(AgentprofError, match=r"skipped 2 file\(s\).*a\.jsonl: unknown format.*'todo'"):
        load_any(tmp_path)
