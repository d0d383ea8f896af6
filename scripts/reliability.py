#!/usr/bin/env python3
"""Reliability figures of docs/RELIABILITY.md, measured: forks under load, SIGKILL during model calls, full disk /
file-size limit / read-only folder, 100 threads + 100 asyncio tasks, malformed input for every importer (exit
status, one line, peak memory on a 200 MB line), Ctrl-C and signals under ``agentprof run`` on a pseudo-terminal,
and network use of the commands.

It drives the same agent programs the tests use (``tests/capture``, ``tests/importers``, ``tests/test_no_network``)
with larger counts, and prints each figure with how it was obtained.

    .venv/bin/python scripts/reliability.py [--forks 100] [--kills 40] [--huge-mb 200] [--signal-runs 10] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentprof.demo.model_server import ModelServer  # noqa: E402


def forks(n: int, tmp: Path) -> dict:
    from tests.capture.test_fork import FORK_UNDER_LOAD

    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", FORK_UNDER_LOAD, str(tmp), str(n)], capture_output=True, text=True,
                         timeout=600)
    hung, path = out.stdout.split()
    recs = [json.loads(line) for line in Path(path).read_bytes().splitlines()]
    spans = sum(r["record"] == "span" for r in recs)
    fork_recs = [r for r in recs if r["record"] == "fork"]
    final = [r for r in recs if r["record"] == "meta"][-1]
    return {"forks": n, "hung": int(hung), "threads_tracing": 4, "span_lines": spans,
            "meta_spans_plus_fork_records": final["spans"] + sum(r["spans"] for r in fork_recs),
            "fork_records": len(fork_recs), "seconds": round(time.perf_counter() - t, 1)}


def kills(n: int, tmp: Path) -> dict:
    from agentprof.trace.files import read
    from tests.capture.test_sigkill_model import _trial

    rnd = random.Random(18)
    lost = calls = updates = loaded = 0
    with ModelServer() as server:
        for k in range(n):
            done, path = _trial(tmp, server.openai_base_url, k % 4, rnd.uniform(0.0, 0.5))
            trace = read(path)
            loaded += 1
            ids = set()
            for r in trace.spans.filter(trace.spans["kind"] == "model").to_dicts():
                ids.add(json.loads(r["attributes"] or "{}").get("gen_ai.response.id"))
            lost += sum(rid not in ids for rid in done)
            calls += len(done)
            updates += sum(b'"span_update"' in line for line in path.read_bytes().splitlines())
    return {"kills": n, "traces_loaded": loaded, "calls_returned": calls, "model_spans_lost": lost,
            "fingerprints_written_after_their_span": updates}


def faults(tmp: Path) -> dict:
    from agentprof.capture.runner import BOOTSTRAP_DIR, ENV_CONFIG
    from tests.capture.test_resource_faults import AGENT

    def run(mode: str, target: str, env: dict | None = None, prefix: tuple = ()) -> tuple[list, int, float]:
        t = time.perf_counter()
        d = subprocess.run([*prefix, sys.executable, "-c", AGENT, server.openai_base_url, mode, target],
                           capture_output=True, text=True, timeout=300, env=env)
        return json.loads(d.stdout), sum("CaptureWarning" in ln for ln in d.stderr.splitlines()), \
            time.perf_counter() - t

    out = {}
    with ModelServer() as server:
        base, w0, s0 = run("plain", str(tmp / "ok"))
        out["unfaulted"] = {"warnings": w0, "seconds": round(s0, 2)}
        env = dict(os.environ, **{ENV_CONFIG: json.dumps({"path": "/dev/full", "name": "agent"}),
                                  "PYTHONPATH": str(BOOTSTRAP_DIR)})
        cases = {"full disk (/dev/full)": ("run", "-", env, ()),
                 "file-size limit (4 KiB)": ("fsize", str(tmp / "limited"), None, ())}
        ro = tmp / "ro"
        ro.mkdir()
        if os.geteuid() != 0:
            ro.chmod(0o555)
            cases["read-only folder (chmod)"] = ("plain", str(ro), None, ())
        elif shutil.which("unshare") and subprocess.run(["unshare", "-rm", "true"]).returncode == 0:
            cases["read-only folder (ro bind mount)"] = ("plain", str(ro), None, (
                "unshare", "-rm", "sh", "-c",
                f'mount --bind "{ro}" "{ro}" && mount -o remount,bind,ro "{ro}" && exec "$0" "$@"'))
        for name, (mode, target, e, prefix) in cases.items():
            result, warns, secs = run(mode, target, e, prefix)
            out[name] = {"results_unchanged": result == base, "warnings": warns, "seconds": round(secs, 2)}
    return out


def load(tmp: Path) -> dict:
    from tests.capture.test_load import EXPECTED_SPANS, TASKS, THREADS, run_load

    run = run_load(tmp)
    lines = Path(run.path).read_bytes().split(b"\n")[:-1]
    bad = 0
    spans = 0
    for line in lines:
        try:
            spans += json.loads(line)["record"] == "span"
        except ValueError:
            bad += 1
    return {"threads": THREADS, "asyncio_tasks": TASKS, "spans_expected": EXPECTED_SPANS, "spans_written": spans,
            "lost": EXPECTED_SPANS - spans, "interleaved_or_broken_lines": bad}


HUGE_DOCS = {
    "kv-cache-tester": (b'{"id": "big", "requests": [{"t": 0, "in": 10, "out": 1, "model": "', b'", "hash_ids": []}]}'),
    "openhands": (b'{"timestamp": 1733340961.1, "messages": [{"role": "user", "content": "', b'"}], '
                  b'"response": {"model": "m", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}}'),
    "swe-agent": (b'{"trajectory": [{"action": "', b'", "observation": "ok"}], "history": [], "info": {}}'),
    "otlp-json": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01", "spanId": "02", "name": "',
                  b'", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}'),
    "tracelab": (b'{"kind": "round", "text": "', b'"}\n'),
}
"""One document (one line) of each remaining format holding a string of the given size."""


def importers(tmp: Path, huge_mb: int) -> dict:
    from agentprof.cli import main
    from tests.importers.test_malformed import BASES, _cases, _suffix, import_in_child, write_huge_line

    table = {}
    for fmt in sorted(BASES):
        ok = total = located = 0
        for case, data in _cases(fmt).items():
            if fmt == "aider" and case == "not UTF-8":
                continue
            p = tmp / f"{fmt}-{case.replace(' ', '_')}{_suffix(fmt)}"
            p.write_bytes(data)
            err = io.StringIO()
            code = 0
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    main(["import", str(p), "--from", fmt])
                except SystemExit as e:
                    code = int(e.code or 0)
                except BaseException:
                    code = -1
            lines = err.getvalue().strip().splitlines()
            total += 1
            ok += code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {p}")
            located += bool(lines) and re.match(rf"error: {re.escape(str(p))}:\d+: ", lines[0]) is not None
        table[fmt] = {"cases": total, "one_error_line_exit_2": ok, "with_line_number": located}
    huge = {}
    for fmt in sorted(BASES):
        p = tmp / f"huge{_suffix(fmt)}"
        if fmt in HUGE_DOCS:
            with p.open("wb") as f:
                head, tail = HUGE_DOCS[fmt]
                f.write(head + b"x" * (huge_mb << 20) + tail)
        else:
            write_huge_line(p, fmt, huge_mb)
        t = time.perf_counter()
        _, lines, rss_kb, code = import_in_child(p, fmt, 600)
        huge[fmt] = {"exit": code, "peak_rss_mb": round(rss_kb / 1024),
                     "seconds": round(time.perf_counter() - t, 1), "message": (lines or [""])[0][-90:]}
        p.unlink()
    return {"malformed": table, f"one_{huge_mb}_MB_line": huge}


def signals(runs: int, tmp: Path) -> dict:
    """``agentprof run -- python loop.py`` on a pseudo-terminal: Ctrl-C typed, SIGTERM / SIGKILL sent to
    ``agentprof run``; seconds until it (or, for SIGKILL, the program) is gone, and its exit status."""
    import os

    from tests.capture.test_run_signals import Job, gone, kill_quietly, started

    out: dict = {}
    for how in ("ctrl-c", "sigterm", "sigkill"):
        codes, took, left = [], [], 0
        for i in range(runs):
            (tmp / f"{how}{i}").mkdir(parents=True)
            job, pids = Job(tmp / f"{how}{i}"), []
            try:
                agent, tool = started(job, pids)
                t0 = time.monotonic()
                if how == "ctrl-c":
                    os.write(job.fd, b"\x03")
                else:
                    os.kill(job.pid, signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
                code, _ = job.wait(timeout=10.0)
                while not gone(agent) and time.monotonic() - t0 < 10.0:
                    time.sleep(0.01)
                took.append(time.monotonic() - t0)
                codes.append(code)
                time.sleep(0.2)
                left += not (gone(agent) and gone(tool))
            finally:
                kill_quietly(*pids)
                job.close()
        out[how] = {"runs": runs, "exit": sorted(set(map(str, codes))), "max_s": round(max(took), 2),
                    "median_s": round(sorted(took)[len(took) // 2], 2), "program_or_tool_left": left}
    return out


def network(tmp: Path) -> dict:
    from tests.test_no_network import KV, _audited

    out = {}
    for name, args in (("demo", ("demo", "--out", str(tmp / "r"), "--traces", str(tmp / "t"))),
                       ("analyze", ("analyze", str(KV), "--no-progress")),
                       ("report", ("report", str(KV), "-o", str(tmp / "r.html"))),
                       ("replay", ("replay", str(KV), "-s", "jalapeno", "-s", "h200+x86"))):
        code, seen, refused, _ = _audited(*args)
        out[name] = {"exit": code, "loopback_connects": seen, "non_loopback_attempts": refused}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forks", type=int, default=100)
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--huge-mb", type=int, default=200)
    ap.add_argument("--signal-runs", type=int, default=10)
    ap.add_argument("--only", default=None,
                    help="comma-separated: forks,kills,faults,load,importers,signals,network")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    wanted = set((args.only or "forks,kills,faults,load,importers,signals,network").split(","))
    res: dict = {}
    with tempfile.TemporaryDirectory(prefix="agentprof-reliability-") as d:
        tmp = Path(d)
        steps = {"forks": lambda: forks(args.forks, tmp / "forks"), "kills": lambda: kills(args.kills, tmp / "kills"),
                 "faults": lambda: faults(tmp / "faults"), "load": lambda: load(tmp / "load"),
                 "importers": lambda: importers(tmp / "imp", args.huge_mb),
                 "signals": lambda: signals(args.signal_runs, tmp / "signals"), "network": lambda: network(tmp / "net")}
        for name, step in steps.items():
            if name in wanted:
                (tmp / name).mkdir(exist_ok=True)
                (tmp / "imp").mkdir(exist_ok=True)
                res[name] = step()
                if not args.json:
                    print(f"== {name}", json.dumps(res[name], indent=1), flush=True)
    if args.json:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
