"""Malformed input for every importer: one ``error: PATH:LINE: reason`` line and exit 2 (never a traceback,
never a hang, bounded memory), ``--skip-bad-lines`` goes on and counts, nothing is dropped without a
diagnostic; a Hypothesis property test mutates the real sample files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentprof.errors import TraceFormatError
from agentprof.importers import load_any

from ..cli_support import run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "traces" / "samples"
BASES = {
    "claude-code": SAMPLES / "claude-code" / "session-3fe1b6bc.jsonl",
    "codex": next((SAMPLES / "codex").glob("*.jsonl")),
    "openhands": sorted((SAMPLES / "openhands").rglob("*.json"))[0],
    "mini-swe-agent": SAMPLES / "mini-swe-agent" / "django__django-13807.traj.json",
    "swe-agent": SAMPLES / "swe-agent" / "marshmallow-code__marshmallow-1867.traj",
    "aider": SAMPLES / "aider" / ".aider.llm.history",
    "kv-cache-tester": SAMPLES / "kv-cache-tester" / "trace_0393.json",
    "otlp-json": ROOT / "tests" / "importers" / "fixtures_other" / "pydantic-ai-agent-run.otlp.json",
    "tracelab": SAMPLES / "tracelab" / "round_trace.jsonl",
}


def _suffix(fmt: str) -> str:
    base = BASES[fmt]
    return ".llm.history" if fmt == "aider" else "".join(base.suffixes[-2:]) if fmt == "mini-swe-agent" \
        else base.suffix


def _cases(fmt: str) -> dict[str, bytes]:
    raw = BASES[fmt].read_bytes()
    i = raw.find(b'"', len(raw) // 2)
    other = BASES["kv-cache-tester" if fmt != "kv-cache-tester" else "otlp-json"].read_bytes()
    return {
        "garbage": bytes(range(256)) * 8,
        "empty": b"",
        "deep nesting": b"[" * 50_000 + b"]" * 50_000 + b"\n",
        "deep objects": b'{"a":' * 5_000 + b"1" + b"}" * 5_000 + b"\n",
        "wrong JSON types": b'{"type": ["x"], "payload": 5, "messages": 5, "requests": "x", "trajectory": 1}\n',
        "not objects": b"[1, 2, 3]\n\"text\"\n5\n",
        "another format": other,
        "hello world": b'{"hello": "world"}\n',
        "not UTF-8": raw[:i + 1] + b"\xff\xfe" + raw[i + 1:],
    }


def _one_error_line(err: str, path: Path) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("fmt", sorted(BASES))
def test_malformed_input_is_one_error_line(capsys, tmp_path, fmt):
    located = 0
    for case, data in _cases(fmt).items():
        if fmt == "aider" and case == "not UTF-8":
            continue  # a text log: read with replacement characters and a diagnostic (test below)
        path = tmp_path / f"{case.replace(' ', '_')}{_suffix(fmt)}"
        path.write_bytes(data)
        code, out, err = run(capsys, "import", str(path), "--from", fmt, "--json")
        assert code == 2, (case, out, err)
        _one_error_line(err, path)
        located += re.match(rf"error: {re.escape(str(path))}:\d+: ", err) is not None
        code, _, err = run(capsys, "import", str(path), "--json")  # auto: the same promise
        if case == "another format":  # detection reads it as what it is (or by its name, and refuses it)
            assert code == 0 or (code == 2 and len(err.strip().splitlines()) == 1), err
            continue
        assert code == 2, (case, err)
        _one_error_line(err, path)
    assert located >= 5  # most errors name the line


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "otlp-json", "kv-cache-tester", "swe-agent"])
def test_skip_bad_lines_goes_on_and_counts(capsys, tmp_path, fmt):
    good = tmp_path / f"good{_suffix(fmt)}"
    good.write_bytes(BASES[fmt].read_bytes())
    for case in ("garbage", "deep nesting", "wrong JSON types", "not UTF-8"):
        (tmp_path / f"{case.replace(' ', '_')}{_suffix(fmt)}").write_bytes(_cases(fmt)[case])
    files = sorted(str(p) for p in tmp_path.iterdir())
    code, out, err = run(capsys, "import", *files, "--from", fmt, "--skip-bad-lines", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["model_calls"] > 0  # the good file is in
    assert s["skipped"] >= 3  # every bad one is counted


def test_truncated_jsonl_keeps_what_was_written(capsys, tmp_path):
    for fmt in ("claude-code", "codex"):
        raw = BASES[fmt].read_bytes()
        cut = tmp_path / f"cut{_suffix(fmt)}"
        cut.write_bytes(raw[: int(len(raw) * 0.6)])
        code, out, err = run(capsys, "import", str(cut), "--json")
        assert code == 0, err
        assert json.loads(out)["diagnostics"].get("truncated_last_line") == 1


def test_truncated_and_non_utf8_aider_log_says_so(capsys, tmp_path):
    raw = BASES["aider"].read_bytes()
    cut = tmp_path / "cut.llm.history"
    cut.write_bytes(raw[: int(len(raw) * 0.6)])
    code, out, err = run(capsys, "import", str(cut), "--json")
    assert code == 0 and json.loads(out)["diagnostics"]["truncated_last_line"] == 1
    bad = tmp_path / "bad.llm.history"
    bad.write_bytes(raw.replace(b"SYSTEM Act", b"SYSTEM A\xffct", 1))
    code, out, err = run(capsys, "import", str(bad), "--json")
    assert code == 0 and json.loads(out)["diagnostics"]["not_utf8"] == 1


def test_hello_world_is_not_an_empty_kv_cache_tester_session(capsys, tmp_path):
    p = tmp_path / "hello.json"
    p.write_text('{"hello": "world"}')
    code, _, err = run(capsys, "import", str(p), "--from", "kv-cache-tester")
    assert code == 2 and "kv-cache-tester" in err


def test_from_on_a_folder_names_what_it_could_not_recognise(capsys, tmp_path):
    for i, f in enumerate(sorted((SAMPLES / "kv-cache-tester").glob("*.json"))[:3]):
        (tmp_path / f"t{i}.json").write_bytes(f.read_bytes())
    (tmp_path / "mystery.json").write_text('{"hello": "world"}')
    code, out, err = run(capsys, "import", str(tmp_path), "--from", "kv-cache-tester", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["files"] == 3 and s["diagnostics"]["skipped_files"] == 1


def test_end_before_start_spans_are_skipped_with_skip_bad_lines(capsys, tmp_path):
    p = tmp_path / "t.jsonl"
    recs = [{"record": "meta", "format": "agentprof-trace", "version": 1},
            {"record": "span", "trace_id": "t", "span_id": "a", "parent_id": None, "name": "invoke_agent x",
             "kind": "agent", "start_ns": 0, "end_ns": 100, "attributes": {"agentprof.session.id": "s"}},
            {"record": "span", "trace_id": "t", "span_id": "b", "parent_id": "a", "name": "execute_tool y",
             "kind": "tool", "start_ns": 50, "end_ns": 10, "attributes": {"agentprof.session.id": "s"}}]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    code, _, err = run(capsys, "import", str(p))
    assert code == 2 and err.startswith(f"error: {p}:3: span ends before it starts")
    code, out, err = run(capsys, "import", str(p), "--skip-bad-lines", "--json")
    assert code == 0 and json.loads(out)["skipped"] == 1


def test_symlink_loops_fifos_and_devices(capsys, tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "good.json").write_bytes(BASES["kv-cache-tester"].read_bytes())
    os.symlink(folder / "b.jsonl", folder / "a.jsonl")
    os.symlink(folder / "a.jsonl", folder / "b.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    os.symlink("/dev/zero", folder / "zero.jsonl")
    code, out, err = run(capsys, "import", str(folder), "--json")  # must not block on the FIFO or /dev/zero
    assert code == 0, err
    s = json.loads(out)
    assert s["files"] == 1 and s["diagnostics"]["skipped_files"] == 4  # two looping links, the FIFO, the device
    for name, what in (("a.jsonl", "symbolic link loop"), ("pipe.jsonl", "FIFO"), ("zero.jsonl", "device")):
        code, _, err = run(capsys, "import", str(folder / name))
        assert code == 2 and what in err, err
        _one_error_line(err, folder / name)


HUGE = textwrap.dedent("""
    import resource, sys
    from agentprof.cli import main
    code = 0
    try:
        main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
    try:  # this process's own high-water mark (ru_maxrss would carry the parent's across exec)
        with open("/proc/self/status") as f:
            peak = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("PEAK", peak, code, file=sys.stderr)
""")


def write_huge_line(path: Path, fmt: str, mb: int) -> None:
    """A file of ``fmt`` whose one record is a line of ``mb`` MiB (also written by scripts/reliability.py)."""
    big = b"x" * (mb << 20)
    with path.open("wb") as f:
        if fmt in ("codex", "claude-code"):
            f.write(BASES[fmt].read_bytes().split(b"\n", 1)[0] + b"\n")
            f.write(b'{"type":"event_msg","payload":{"type":"agent_message","message":"' + big + b'"}}\n')
        elif fmt == "aider":
            f.write(b"TO LLM 2024-01-01T00:00:00\n-------\nSYSTEM " + big + b"\n")
        else:
            f.write(b'{"trajectory_format": "mini-swe-agent-1", "messages": [{"role": "user", "content": "'
                    + big + b'"}, {"role": "assistant", "content": "ok"}], "info": {}}')


def import_in_child(path: Path, fmt: str, timeout: float) -> tuple[subprocess.CompletedProcess, list[str], int, str]:
    """``agentprof import PATH --from FMT`` in a fresh process: the run, its stderr lines, its peak RSS (KiB)
    and its exit code (as text)."""
    done = subprocess.run([sys.executable, "-c", HUGE, "import", str(path), "--from", fmt], capture_output=True,
                          text=True, timeout=timeout)
    *lines, peak = done.stderr.strip().splitlines()
    _, rss_kb, code = peak.split()
    return done, lines, int(rss_kb), code


@pytest.mark.parametrize("fmt", ["codex", "aider", "mini-swe-agent"])
def test_one_huge_line_is_refused_in_bounded_memory(tmp_path, fmt):
    """A 200 MB line: refused (over the 64 MiB record limit) with a located error, peak RSS well under 1 GB."""
    path = tmp_path / f"huge{_suffix(fmt)}"
    write_huge_line(path, fmt, 200)
    done, lines, rss_kb, code = import_in_child(path, fmt, 300)
    assert "Traceback" not in done.stderr
    assert rss_kb < 1_000_000  # KiB: under 1 GB peak
    assert code == "2" and len(lines) == 1 and lines[0].startswith(f"error: {path}:"), done.stderr
    assert "limit" in lines[0]


@settings(max_examples=int(os.environ.get("AGENTPROF_HYPOTHESIS_EXAMPLES", "60")), deadline=None, database=None,
          derandomize="AGENTPROF_HYPOTHESIS_EXAMPLES" not in os.environ,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fmt=st.sampled_from(sorted(BASES)), data=st.data())
def test_mutated_samples_never_crash(capsys, tmp_path_factory, fmt, data):
    """Cut, flip, insert and duplicate bytes of a real sample: the import succeeds or says one error line."""
    raw = bytearray(BASES[fmt].read_bytes()[:200_000])
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["cut", "flip", "insert", "dup", "delete"]))
        pos = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if op == "cut":
            del raw[pos:]
        elif op == "flip" and raw:
            raw[pos] = data.draw(st.integers(0, 255))
        elif op == "insert":
            raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=20)) or b"{"
        elif op == "dup":
            raw[pos:pos] = raw[pos:pos + data.draw(st.integers(1, 500))]
        else:
            del raw[pos:pos + data.draw(st.integers(1, 200))]
    path = tmp_path_factory.mktemp("mut") / f"m{_suffix(fmt)}"
    path.write_bytes(bytes(raw))
    for args in (("--from", fmt), ("--from", fmt, "--skip-bad-lines")):
        code, out, err = run(capsys, "import", str(path), "--json", *args)
        assert "Traceback" not in err
        if code:
            assert code == 2
            _one_error_line(err, path)
        else:
            json.loads(out)


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_an_unreadable_timestamp_is_refused_with_its_line(tmp_path, fmt):
    lines = BASES[fmt].read_text(encoding="utf-8").splitlines()
    n = next(i for i, text in enumerate(lines) if i >= 2 and '"timestamp"' in text)
    rec = json.loads(lines[n])
    rec["timestamp"] = "yesterday"
    lines[n] = json.dumps(rec)
    path = tmp_path / BASES[fmt].name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError) as e:
        load_any([path])
    assert (e.value.path, e.value.line) == (str(path), n + 1)
    assert e.value.reason.startswith("timestamp 'yesterday' is not an ISO 8601 time")
    kept = load_any([path], skip_bad_lines=True)
    assert [(d.kind, d.line) for d in kept.diagnostics if d.kind == "bad_line"] == [("bad_line", n + 1)]
