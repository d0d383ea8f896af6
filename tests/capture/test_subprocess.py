"""Child processes: CPU credited to the tool that waited for them; opt-in subprocess spans."""

from __future__ import annotations

import subprocess
import sys
import time

import agentprof

from .capture_helpers import attrs, load, of_kind

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


@agentprof.tool
def run_child(seconds):
    return subprocess.run([sys.executable, "-c", BURN.format(s=seconds)], check=True).returncode


def test_child_cpu_is_added_to_the_tool(tmp_path):
    with agentprof.profile("child", out=tmp_path) as run:
        run_child(0.3)
    _, rows = load(run.path)
    (tool,) = of_kind(rows, "tool")  # no subprocess spans unless asked
    assert tool["cpu_ns"] >= 0.3e9  # the child's CPU, the tool's own thread barely used any


def test_instrument_subprocess(tmp_path):
    with agentprof.profile("sub", out=tmp_path, instrument_subprocess=True) as run:
        run_child(0.1)
        out = subprocess.check_output(["echo", "hello"])
        p = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
        while p.poll() is None:
            pass
        try:
            subprocess.run(["/nonexistent/program"])
        except FileNotFoundError:
            pass
    assert out == b"hello\n" and p.returncode == 3
    _, rows = load(run.path)
    subs = [r for r in of_kind(rows, "tool") if r["name"].startswith("execute_tool subprocess:")]
    names = [r["name"] for r in subs]
    assert names == ["execute_tool subprocess:" + n for n in
                     (sys.executable.rsplit("/", 1)[-1], "echo", sys.executable.rsplit("/", 1)[-1], "program")]
    tool = next(r for r in rows if r["name"] == "execute_tool run_child")
    assert subs[0]["parent_id"] == tool["span_id"] and subs[0]["cpu_ns"] >= 0.1e9
    assert [attrs(s).get("agentprof.subprocess.returncode") for s in subs] == [0, 0, 3, None]
    assert subs[3]["status"] == "error" and subs[3]["error_type"] == "FileNotFoundError"
    assert all("agentprof.subprocess.args" not in attrs(s) for s in subs)


def test_orchestration_cpu_is_not_cancelled_by_a_tools_child_processes(tmp_path):
    # the root span counts its thread's CPU only; a tool's cpu_ns adds its child processes' CPU, recorded apart
    # so the loop's own CPU is the root's minus the tools' thread CPU (it was clamped at 0 when the child's was
    # subtracted too)
    from agentprof.analysis import analyze
    from agentprof.trace import read

    with agentprof.profile("loop", out=tmp_path) as run:
        run_child(0.3)
        end = time.thread_time() + 0.1  # this thread's CPU: the process's also counts agentprof's own threads
        while time.thread_time() < end:  # the agent's own loop code
            pass
    _, rows = load(run.path)
    (tool,) = of_kind(rows, "tool")
    assert attrs(tool)["agentprof.cpu.children_ns"] >= 0.3e9
    prof = analyze(read(run.path)).to_dict()["cpu_bound"]
    cpu, err = prof["orchestration_cpu_s"], prof["orchestration_cpu_err_s"]
    assert err is not None and 0 < err < 0.05
    assert cpu >= 0.1 - err and cpu < 0.3
