"""Context propagation into threads: what is patched, when, and the ``wrap`` helper."""

from __future__ import annotations

import concurrent.futures
import threading

import agentprof
from agentprof.capture import context, wrap
from agentprof.capture.session import current

from .capture_helpers import load, of_kind

ORIGINAL_SUBMIT = concurrent.futures.ThreadPoolExecutor.submit
ORIGINAL_START = threading.Thread.start


def test_patches_only_while_profiling(tmp_path):
    assert concurrent.futures.ThreadPoolExecutor.submit is ORIGINAL_SUBMIT
    with agentprof.profile("a", out=tmp_path):
        assert concurrent.futures.ThreadPoolExecutor.submit is not ORIGINAL_SUBMIT
        assert threading.Thread.start is not ORIGINAL_START
        with agentprof.profile("b", out=tmp_path):
            pass
        assert threading.Thread.start is not ORIGINAL_START  # still one profile active
    assert concurrent.futures.ThreadPoolExecutor.submit is ORIGINAL_SUBMIT
    assert threading.Thread.start is ORIGINAL_START
    assert all(p.count == 0 for p in context.PROPAGATION.patches)


def test_threads_see_the_session_and_outlive_it_harmlessly(tmp_path):
    seen = []
    release = threading.Event()

    def worker():
        seen.append(current())
        release.wait(5)
        with agentprof.span("tool", "late"):  # the session has finished by now: ignored
            seen.append(current())

    with agentprof.profile("t", out=tmp_path) as run:
        t = threading.Thread(target=worker)
        t.start()
        while not seen:
            pass
    release.set()
    t.join()
    assert seen[0] is run._session and seen[1] is None
    assert [r["kind"] for r in load(run.path)[1]] == ["agent"]


def test_wrap_runs_in_the_context_it_was_made_in(tmp_path):
    @agentprof.tool
    def t():
        return current()

    with agentprof.profile("w", out=tmp_path) as run, agentprof.span("orchestration", "hand-over"):
        bound = wrap(t)
    assert bound.__name__ == "t"
    results = []
    threads = [threading.Thread(target=lambda: results.append(bound())) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [None, None, None]  # the session ended before the calls: nothing recorded, no error
    assert len(of_kind(load(run.path)[1], "tool")) == 0
