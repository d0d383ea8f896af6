"""SIGKILL at random points of a run making real model calls (the openai SDK against a loopback server): the
trace always loads and no model call that had returned to the agent is missing from it."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

from agentprof.trace.files import read

from .capture_helpers import attrs, raw_records

CHILD = textwrap.dedent("""
    import os, sys, threading
    import openai
    import agentprof
    from agentprof.capture import fingerprint

    client = openai.OpenAI(base_url=sys.argv[2], api_key="x", max_retries=0)
    messages = [{"role": "system", "content": "You fix bugs. " * 200}]

    def say(line):  # one write per line, under PIPE_BUF: a kill never leaves half a line (print writes its
        os.write(1, (line + "\\n").encode())  # pieces one by one when PYTHONUNBUFFERED is set)

    with agentprof.profile("killed", out=sys.argv[1]):
        say("ready")
        i = 0
        while True:
            messages.append({"role": "user", "content": f"step {i}: " + "context " * 50})
            gate = None
            if i % 3 == 0:  # the fingerprint thread is busy (a tokenizer loading, a huge prompt) until the call
                gate = threading.Event()  # has returned: this call's fingerprint comes after its span, always
                fingerprint.submit(lambda g=gate: g.wait(10), lambda result, error: None)
            if i % 2:
                stream = client.chat.completions.create(model="m", messages=messages, stream=True,
                                                        stream_options={"include_usage": True})
                rid = None
                for chunk in stream:
                    rid = chunk.id
            else:
                rid = client.chat.completions.create(model="m", messages=messages).id
            if gate is not None:
                gate.set()
            say(f"done {rid}")  # the call has returned to the agent
            i += 1
""")

TRIALS = 20


def _trial(tmp_path, base_url, after_calls, delay_s):
    """Kill the run ``delay_s`` after its ``after_calls``-th call returned (0: after it started)."""
    out = tmp_path / f"t{after_calls}-{delay_s:.5f}"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out), base_url], stdout=subprocess.PIPE, text=True)
    done: list[str] = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(after_calls):
            done.append(proc.stdout.readline().split()[1])
        os.set_blocking(proc.stdout.fileno(), False)
        deadline = time.monotonic() + delay_s
        while time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        os.set_blocking(proc.stdout.fileno(), True)
        for line in proc.stdout.read().split("\n")[:-1]:  # complete lines only
            if line.startswith("done "):
                done.append(line.split()[1])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    (path,) = out.glob("killed-*.jsonl")
    return done, path


def test_no_returned_model_call_is_lost_on_sigkill(tmp_path, server):
    rnd = random.Random(18)
    base_url = server.openai_base_url
    lost, calls, late = 0, 0, 0
    for k in range(TRIALS):
        done, path = _trial(tmp_path, base_url, k % 4, rnd.uniform(0.0, 0.5))
        trace = read(path)  # loads, whatever the moment of the kill
        rows = trace.spans.to_dicts()
        models = [r for r in rows if r["kind"] == "model"]
        ids = {attrs(r).get("gen_ai.response.id") for r in models}
        lost += sum(1 for rid in done if rid not in ids)
        calls += len(done)
        updates = {r["span_id"] for r in raw_records(path) if r["record"] == "span_update"}
        late += len(updates)
        by_id = {r["span_id"]: r for r in models}
        for sid in updates:  # a fingerprint written after its span is merged into it
            assert by_id[sid]["prompt_tokens_hashed"] > 0 and len(by_id[sid]["block_hashes"]) > 0
        assert not [d for d in trace.diagnostics if d.kind == "orphan_update"]
    assert lost == 0
    assert calls >= TRIALS  # the kills fell across runs that had made calls
    assert late >= 1  # calls whose fingerprint came late were written first, the fingerprint after
