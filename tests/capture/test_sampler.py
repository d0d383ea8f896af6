"""The opt-in stack sampler: ``agentprof run --sample``, the interval option, and its failures staying inside."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

import agentprof
from agentprof.capture import sampler as sampler_mod
from agentprof.capture.sampler import DEFAULT_INTERVAL_S, interval_of
from agentprof.importers import load_any

from .test_cli import agentprof_run, trace_from

SCRIPT = textwrap.dedent("""
    import threading

    def busy_loop_of_the_script(n):
        x = 0
        for i in range(n):
            x = (x * 7 + i) % 10007
        return x

    def worker():
        busy_loop_of_the_script(300_000)

    t = threading.Thread(target=worker, name="helper")
    t.start()
    busy_loop_of_the_script(600_000)
    t.join()
""")


def test_interval_option():
    assert interval_of(True) == DEFAULT_INTERVAL_S <= 0.010
    assert interval_of(False) is None and interval_of(None) is None
    assert interval_of(0.002) == 0.002
    with pytest.raises(ValueError):
        interval_of(0.0)
    with pytest.raises(ValueError):
        agentprof.profile("x", sample=60)


def test_run_sample_records_every_thread(tmp_path):
    script = tmp_path / "busy.py"
    script.write_text(SCRIPT)
    done = agentprof_run(["--out", str(tmp_path), "--sample-interval", "2", "--", "python", str(script)],
                         env=None, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    path = trace_from(done.stderr)
    recs = [json.loads(x) for x in Path(path).read_text().splitlines()]
    assert recs[-1]["sampling"]["interval_ns"] == 2_000_000 and recs[-1]["sampling"]["samples"] > 0
    trace = load_any(path)
    s = trace.samples
    names = set(s.thread_name)
    assert "MainThread" in names and "helper" in names
    assert not any(n.startswith("agentprof-") for n in names)  # agentprof's own threads are left out
    leaves = {s.frame_name[s.stack(int(n))[-1]] for n in s.node if s.stack(int(n))}
    assert "busy_loop_of_the_script" in leaves
    assert (s.cpu_ns >= 0).all() and s.cpu_ns.sum() > 0
    # the run's root span carries its thread CPU
    root = trace.spans.filter(trace.spans["kind"] == "agent")
    assert root.get_column("cpu_ns")[0] > 0


def test_sampler_failure_only_warns_and_the_agent_goes_on(tmp_path, monkeypatch):
    def broken(self, *interrupted):
        raise RuntimeError("sampler broke")

    monkeypatch.setattr(sampler_mod.Sampler, "_tick", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with agentprof.profile("broken", out=tmp_path, sample=0.001) as run:
            total = sum(i * i for i in range(200_000))
            import time

            time.sleep(0.02)
    assert total == sum(i * i for i in range(200_000))
    assert any("sampling stacks" in str(w.message) for w in caught)
    assert load_any(run.path).spans.height == 1  # the root span is written; no samples
    assert sys.getswitchinterval() == pytest.approx(0.005)  # restored


def _spin_in_named_function(n):
    x = 0
    for i in range(n):
        x = (x * 7 + i) % 10007
    return x


def _waiting_in_named_function(seconds):
    time.sleep(seconds)


def _worker_in_named_function():
    _spin_in_named_function(400_000)


def _leaves(trace):
    s = trace.samples
    return {s.frame_name[s.stack(int(n))[-1]] for n in s.node if s.stack(int(n))}, s


def test_signal_sampler_on_the_main_thread_is_removed_after(tmp_path):
    assert threading.current_thread() is threading.main_thread()
    with agentprof.profile("sig", out=tmp_path, sample=0.002) as run:
        assert signal.getsignal(signal.SIGPROF) == run._session.sampler._on_signal
        _spin_in_named_function(500_000)
        _waiting_in_named_function(0.15)  # no CPU: the signal is quiet, the watchdog thread samples
        t = threading.Thread(target=_worker_in_named_function, name="worker")
        t.start()
        t.join()  # the main thread blocked: the worker is sampled by the watchdog thread
    meta = [json.loads(x) for x in run.path.read_text().splitlines()][-1]["sampling"]
    assert meta["mode"] == "signal" and "SIGPROF" in meta["sampler"]
    leaves, s = _leaves(load_any(run.path))
    assert {"_spin_in_named_function", "_waiting_in_named_function"} <= leaves
    assert "worker" in set(s.thread_name)
    names = {s.frame_name[f] for n in s.node for f in s.stack(int(n))}
    assert not names & {"Sampler._tick", "Sampler._on_signal", "_tick", "_on_signal"}  # the handler's own frames
    assert signal.getsignal(signal.SIGPROF) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_the_handler_never_waits_for_a_lock_its_thread_holds(tmp_path):
    with agentprof.profile("held", out=tmp_path, sample=0.002) as run:
        smp = run._session.sampler
        assert smp.mode == "signal"
        smp.pause(True)
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)  # paused: the timer is disarmed
        smp.pause(False)
        assert signal.getitimer(signal.ITIMER_PROF)[1] == pytest.approx(0.002)
        before = len(smp._t)
        with smp._lock:  # as if the signal came while this thread writes the batch
            smp._on_signal(signal.SIGPROF, sys._getframe())  # returns at once (a deadlock would hang here)
            assert len(smp._t) == before
        smp._on_signal(signal.SIGPROF, sys._getframe())
        assert smp._error is None
    leaves, _ = _leaves(load_any(run.path))
    assert "test_the_handler_never_waits_for_a_lock_its_thread_holds" in leaves


def test_an_agents_sigprof_handler_is_kept_and_the_thread_sampler_used(tmp_path):
    hits = []

    def agents_handler(signum, frame):
        hits.append(signum)

    old = signal.signal(signal.SIGPROF, agents_handler)
    try:
        with agentprof.profile("theirs", out=tmp_path, sample=0.002) as run:
            assert signal.getsignal(signal.SIGPROF) is agents_handler
            _spin_in_named_function(300_000)
        assert signal.getsignal(signal.SIGPROF) is agents_handler
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
        meta = [json.loads(x) for x in run.path.read_text().splitlines()][-1]["sampling"]
        assert meta["mode"] == "thread" and meta["samples"] > 0
    finally:
        signal.signal(signal.SIGPROF, old)


def test_a_profile_started_off_the_main_thread_uses_the_thread_sampler(tmp_path):
    got = {}

    def body():
        with agentprof.profile("offmain", out=tmp_path, sample=0.002) as run:
            _spin_in_named_function(300_000)
        got["path"] = run.path

    t = threading.Thread(target=body)
    t.start()
    t.join()
    meta = [json.loads(x) for x in got["path"].read_text().splitlines()][-1]["sampling"]
    assert meta["mode"] == "thread" and meta["samples"] > 0
    leaves, _ = _leaves(load_any(got["path"]))
    assert "_spin_in_named_function" in leaves
    assert signal.getsignal(signal.SIGPROF) == signal.SIG_DFL


def test_no_sampling_by_default(tmp_path):
    with agentprof.profile("plain", out=tmp_path) as run:
        sum(range(10000))
    assert load_any(run.path).samples is None
    assert "samples" not in run.path.read_text()


KILLED = textwrap.dedent("""
    import sys, time
    import agentprof

    @agentprof.tool
    def work(n):
        return sum(i * i for i in range(n))

    with agentprof.profile("killed", out=sys.argv[1], sample=0.002):
        t0 = time.monotonic()
        while True:
            work(20000)
            if time.monotonic() - t0 > 1.6:   # past the first flush of samples (about once a second)
                print("flushed", flush=True)
                time.sleep(60)
""")


def test_sigkill_leaves_spans_and_flushed_samples_readable(tmp_path):
    import os
    import signal
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "flushed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    (path,) = tmp_path.glob("killed-*.jsonl")
    trace = load_any(path)
    assert trace.spans.filter(trace.spans["kind"] == "tool").height > 10
    assert trace.samples is not None and len(trace.samples) > 20
    rows = profile_of(trace)
    assert any(w.startswith("tool:work") for w in rows)


def profile_of(trace):
    from agentprof.analysis.hotspots import attribute

    return set(attribute(trace).where.tolist())


EXECS = textwrap.dedent("""
    import os, sys, time
    import agentprof

    with agentprof.profile("execs", out=sys.argv[1], sample=0.002):
        t = time.process_time()
        while time.process_time() - t < 0.05:  # the profiling timer is running
            pass
        os.execv(sys.executable, [sys.executable, "-c",
                 "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass\\nprint('survived')"])
""")


def test_a_program_the_agent_execs_does_not_inherit_the_profiling_timer(tmp_path):
    import subprocess

    # interval timers survive execve and SIGPROF's default action ends a process: without the exec guard the
    # new program would die at its first tick ("Profiling timer expired", status -SIGPROF)
    done = subprocess.run([sys.executable, "-c", EXECS, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "survived"
    assert os.execv.__name__ == "execv" and not hasattr(os.execv, "__wrapped__")  # not left patched here


def test_the_exec_guard_rearms_the_timer_when_the_exec_fails(tmp_path):
    with agentprof.profile("failing-exec", out=tmp_path, sample=0.002) as run:
        assert run._session.sampler.mode == "signal"
        with pytest.raises(OSError):
            os.execv(str(tmp_path / "no-such-program"), ["x"])
        assert signal.getitimer(signal.ITIMER_PROF)[1] > 0  # sampling goes on
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert not hasattr(os.execv, "__wrapped__")
