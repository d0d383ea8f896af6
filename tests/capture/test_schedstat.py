"""agentprof.capture.schedstat's per-thread run-queue reader and where sessions record a span's wait for a CPU:
each thread reads its own file, a forked child its own, and spans carry ``agentprof.runq_ns`` only where no
stack sampler runs (the samples carry the wait then)."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

import agentprof
from agentprof import semconv as sc
from agentprof.capture.schedstat import thread_runq_ns

from .capture_helpers import raw_records

linux = pytest.mark.skipif(not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"),
                           reason="no schedstat (not Linux, or schedstats off)")


@linux
def test_each_thread_and_a_forked_child_read_their_own_wait():
    here = thread_runq_ns()
    assert here >= 0 and thread_runq_ns() >= here  # cumulative
    other: list[int] = []
    t = threading.Thread(target=lambda: other.append(thread_runq_ns()))
    t.start()
    t.join()
    assert _fresh() >= here  # what this thread's own file says
    assert other and other[0] >= 0
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reads its own thread (its file opened afresh), not the parent's through the old fd
        os.close(r)
        own = [0, 0, 0]
        own[0] = _fresh()
        own[1] = thread_runq_ns()
        own[2] = _fresh()
        os.write(w, " ".join(map(str, own)).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    before, got, after = map(int, os.read(r, 200).split())
    os.close(r)
    assert before <= got <= after


def _fresh() -> int:
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat", encoding="ascii") as f:
        return int(f.read().split()[1])


@agentprof.tool(name="nap")
def nap() -> None:
    time.sleep(0.005)


@linux
@pytest.mark.skipif(sys.platform != "linux", reason="Linux only")
def test_spans_record_their_wait_unless_a_sampler_runs(tmp_path):
    with agentprof.profile("runq", out=tmp_path / "plain") as plain:
        nap()
        nap()
        with agentprof.span("parse", "decode"):
            pass
    with agentprof.profile("runq-sampled", out=tmp_path / "sampled", sample=0.005) as sampled:
        nap()
    spans = [r for r in raw_records(plain.path) if r.get("record") == "span"]
    timed = [r for r in spans if r["kind"] in ("tool", "parse")]
    assert len(timed) == 3 and all(r["attributes"][sc.RUNQ_NS] >= 0 for r in timed)
    # a sleeping tool waits for a CPU only to wake up: its 5 ms asleep are not a wait (on a loaded machine the
    # wake-up itself can take milliseconds, so the bound is the span's time less the sleep)
    assert all(r["attributes"][sc.RUNQ_NS] <= r["end_ns"] - r["start_ns"] - 5_000_000 for r in timed
               if r["name"] == "execute_tool nap")
    (root,) = [r for r in spans if r["kind"] == "agent"]
    assert root["attributes"][sc.RUNQ_NS] >= 0  # the run's own, as before
    tools = [r for r in raw_records(sampled.path) if r.get("kind") == "tool"]
    assert tools and all(sc.RUNQ_NS not in r["attributes"] for r in tools)
