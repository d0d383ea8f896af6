"""The prompt fingerprint thread's cost: every CPU nanosecond the thread spends while a profile records model
calls is charged to that profile (waking from its queue and retaking the GIL included, not only the hashing)."""

from __future__ import annotations

import time

import openai

import agentprof
from agentprof.capture import fingerprint
from agentprof.demo.model_server import ModelServer


def _calls(client: openai.OpenAI, n: int) -> None:
    msgs = [{"role": "system", "content": "You are a careful coding agent. " * 40}]
    for i in range(n):
        msgs.append({"role": "user", "content": f"step {i}: fix the failing test " * 8})
        stream = client.chat.completions.create(model="gpt-4o", messages=msgs, stream=True)
        msgs.append({"role": "assistant", "content": "".join(c.choices[0].delta.content or ""
                                                            for c in stream if c.choices)})


def _settle(run: agentprof.Profile) -> None:
    """Wait until the fingerprint thread has charged its last job (it does so just after the call's span ends)."""
    sess = run._session
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for call in list(sess.pending):
            call._ended.wait(1.0)
        before = sess.background_cpu_ns
        time.sleep(0.05)
        if not sess.pending and sess.background_cpu_ns == before:
            return


def test_background_cpu_is_the_fingerprint_threads_whole_cpu_time(tmp_path):
    with ModelServer() as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        with agentprof.profile("warm-up", out=tmp_path) as run:  # loads the tokenizer, starts the thread
            _calls(client, 2)
            _settle(run)
        worker = fingerprint._worker._thread
        assert worker is not None and worker.is_alive()
        clock = time.pthread_getcpuclockid(worker.ident)
        with agentprof.profile("measured", out=tmp_path) as run:
            c0 = time.clock_gettime_ns(clock)
            _calls(client, 30)
            _settle(run)
            c1 = time.clock_gettime_ns(clock)
            charged = run.capture_background_cpu_ns
    used = c1 - c0
    assert used > 0
    # the thread's CPU outside the window (a few µs of loop bookkeeping at either end) is the only difference
    assert abs(charged - used) <= 0.01 * used + 100_000, (charged, used)
