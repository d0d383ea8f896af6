"""Fork safety: children forked while other threads are tracing never hang, their spans land in the parent's
file as whole lines, and the counts in the file add up; multiprocessing's three start methods all work."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from .capture_helpers import load, of_kind, raw_records

FORK_UNDER_LOAD = textwrap.dedent("""
    import os, sys, threading, time
    import agentprof

    @agentprof.tool
    def work(i):
        return agentprof.parse_json('{"i": %d}' % i)["i"]

    @agentprof.tool
    def child_work(i):
        return agentprof.parse_json('{"i": %d}' % i)["i"]

    N = int(sys.argv[2])
    stop = threading.Event()

    def busy():
        i = 0
        while not stop.is_set():
            work(i)
            with agentprof.span("orchestration", "step"):
                i += 1

    prof = agentprof.profile("forks", out=sys.argv[1])
    with prof as run:
        threads = [threading.Thread(target=busy) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        pids = []
        for k in range(N):
            pid = os.fork()
            if pid == 0:  # the child: trace a little, leave the profile, exit without the parent's cleanup
                try:
                    for j in range(3):
                        child_work(j)
                    prof.__exit__(None, None, None)
                finally:
                    os._exit(0)
            pids.append(pid)
        hung = 0
        deadline = time.monotonic() + 60
        for pid in pids:
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    hung += 1
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.002)
        stop.set()
        for t in threads:
            t.join()
    print(hung, run.path, flush=True)
""")


def test_no_child_hangs_when_forking_while_threads_trace(tmp_path):
    n = 100
    out = subprocess.run([sys.executable, "-c", FORK_UNDER_LOAD, str(tmp_path), str(n)], capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    hung, path = out.stdout.split()
    assert int(hung) == 0
    records = raw_records(path)  # every line is whole JSON (no two processes' lines interleaved)
    spans = [r for r in records if r["record"] == "span"]
    forks = [r for r in records if r["record"] == "fork"]
    metas = [r for r in records if r["record"] == "meta"]
    assert len(forks) == n and all(f["spans"] == 6 for f in forks)  # 3 tools + 3 parses each
    final = metas[-1]
    assert final["forks"] == n
    assert final["spans"] + sum(f["spans"] for f in forks) == len(spans)  # the counts add up to the file
    trace, rows = load(path)
    assert trace.meta.extra["fork_spans"] == 6 * n
    root = of_kind(rows, "agent")[0]
    by_id = {r["span_id"]: r for r in rows}
    assert len(by_id) == len(rows)
    child_tools = [r for r in of_kind(rows, "tool") if r["name"] == "execute_tool child_work"]
    assert len(child_tools) == 3 * n and all(r["parent_id"] == root["span_id"] for r in child_tools)  # the children's tools sit under the run's root span


def _square(x):
    import agentprof

    @agentprof.tool
    def square(v):
        return v * v

    return square(x), os.getpid()


MP = textwrap.dedent("""
    import multiprocessing, sys, threading
    import agentprof
    sys.path.insert(0, sys.argv[3])
    from tests.capture.test_fork import _square

    @agentprof.tool
    def spin(i):
        return i

    if __name__ == "__main__":
        method = sys.argv[2]
        stop = threading.Event()
        with agentprof.profile("mp", out=sys.argv[1]) as run:
            t = threading.Thread(target=lambda: [spin(i) for i in iter(lambda: 0 if stop.is_set() else 1, 0)])
            t.start()
            ctx = multiprocessing.get_context(method)
            with ctx.Pool(2) as pool:
                results = pool.map(_square, range(20))
            stop.set()
            t.join()
        print(sum(r for r, _ in results), len({p for _, p in results}), run.path, flush=True)
""")


def _run_mp(tmp_path, method):
    from .capture_helpers import REPO

    out = subprocess.run([sys.executable, "-c", MP, str(tmp_path), method, str(REPO)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    total, workers, path = out.stdout.split()
    assert int(total) == sum(i * i for i in range(20)) and int(workers) >= 1
    return load(path)


def test_multiprocessing_fork_pool_records_into_the_parents_trace(tmp_path):
    trace, rows = _run_mp(tmp_path, "fork")
    squares = [r for r in rows if r["name"] == "execute_tool square"]
    assert len(squares) == 20  # pool workers are forked children: their spans join the run


def test_multiprocessing_forkserver_and_spawn_run_unprofiled_and_unharmed(tmp_path):
    for method in ("forkserver", "spawn"):
        d = tmp_path / method
        trace, rows = _run_mp(d, method)
        # fresh interpreters: no session there, so the results are right and nothing of theirs is recorded
        assert [r for r in rows if r["name"] == "execute_tool square"] == []
        assert len(of_kind(rows, "agent")) == 1


def test_forked_child_killed_leaves_a_loadable_trace(tmp_path):
    code = textwrap.dedent("""
        import os, sys, time
        import agentprof

        @agentprof.tool
        def work(i):
            return i

        with agentprof.profile("k", out=sys.argv[1]) as run:
            pid = os.fork()
            if pid == 0:
                for i in range(5):
                    work(i)
                print("child", flush=True)
                time.sleep(60)
                os._exit(0)
            sys.stdin.readline()
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        print(run.path, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "child"
    proc.stdin.write("\n")
    proc.stdin.flush()
    path = proc.stdout.readline().strip()
    proc.wait(timeout=60)
    assert proc.returncode == 0
    trace, rows = load(path)
    assert len(of_kind(rows, "tool")) == 5
    assert "fork_spans" not in trace.meta.extra  # the killed child never said how many it wrote
    assert raw_records(path)[-1]["forks"] == 1
