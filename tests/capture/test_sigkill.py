"""A run killed with SIGKILL leaves a trace that loads with every span that had ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from .capture_helpers import load, of_kind

CHILD = textwrap.dedent("""
    import sys, time
    import agentprof

    @agentprof.tool
    def work(i):
        return agentprof.parse_json('{"i": %d}' % i)

    with agentprof.profile("killed", out=sys.argv[1]):
        i = 0
        while True:
            work(i)
            print("ended", i, flush=True)   # printed after the tool span ended
            i += 1
            if i == int(sys.argv[2]):
                with agentprof.span("wait", "stuck"):
                    time.sleep(60)
""")


def run_and_kill(tmp_path, stop_after, kill_after_lines):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(stop_after)], stdout=subprocess.PIPE,
                            text=True)
    ended = []
    try:
        for line in proc.stdout:
            ended.append(int(line.split()[1]))
            if len(ended) >= kill_after_lines:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    (path,) = tmp_path.glob("killed-*.jsonl")
    return ended, path


def test_killed_while_idle(tmp_path):
    ended, path = run_and_kill(tmp_path, stop_after=30, kill_after_lines=30)
    trace, rows = load(path)
    tools = of_kind(rows, "tool")
    assert len(tools) == 30 and len(of_kind(rows, "parse")) == 30
    assert of_kind(rows, "agent") == [] and of_kind(rows, "wait") == []  # still open when killed
    assert trace.meta.name == "killed"


def test_killed_mid_burst(tmp_path):
    ended, path = run_and_kill(tmp_path, stop_after=10**9, kill_after_lines=300)
    trace, rows = load(path)  # a line cut in half at the end is skipped with a diagnostic, never an error
    tools = of_kind(rows, "tool")
    recorded = {int(p["start_ns"]) for p in tools}
    assert len(recorded) == len(tools) >= len(ended)  # every tool reported as ended is in the file
    assert all(d.kind == "truncated_last_line" for d in trace.diagnostics)
