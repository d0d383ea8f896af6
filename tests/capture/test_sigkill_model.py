"""SIGKILL at random points of a run making real model calls (the openai SDK against a loopback server): the
trace always loads and no model call that had returned to the agent is missing from it. Each run is a process
forked from one that imported the SDK and agentprof once (a second per run saved; the profile starts in the
child)."""

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

ZYGOTE = textwrap.dedent("""
    import os, sys, threading
    import openai
    import agentprof
    from agentprof.capture import fingerprint

    def say(line):  # one write per line, under PIPE_BUF: a kill never leaves half a line (print writes its
        os.write(1, (line + "\\n").encode())  # pieces one by one when PYTHONUNBUFFERED is set)

    def run(out, base_url):
        client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
        messages = [{"role": "system", "content": "You fix bugs. " * 200}]
        with agentprof.profile("killed", out=out):
            say(f"ready {os.getpid()}")
            i = 0
            while True:
                messages.append({"role": "user", "content": f"step {i}: " + "context " * 50})
                gate = None
                if i % 3 == 0:  # the fingerprint thread is busy (a tokenizer loading, a huge prompt) until the
                    gate = threading.Event()  # call has returned: its fingerprint comes after its span, always
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
                    gate.set()  # the fingerprint goes on now; the line below comes once its update is written
                    fingerprint.submit(lambda r=rid: say(f"late {r}"), lambda result, error: None)
                say(f"done {rid}")  # the call has returned to the agent
                i += 1

    # the imports once; each run in a forked child (a fresh process as far as agentprof is concerned: nothing
    # of it ran here), which the test kills; the child's end is reported once it has been reaped
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            run(line.strip(), sys.argv[1])
            os._exit(0)
        os.waitpid(pid, 0)
        say("reaped")
""")

TRIALS = 20


class Runs:
    """The zygote process: one agent run per :meth:`trial`, each killed at a chosen moment."""

    def __init__(self, base_url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE, base_url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def trial(self, out, after_calls: int, delay_s: float, after_late: bool = False) -> list[str]:
        """Kill the run ``delay_s`` after its ``after_calls``-th call returned (0: after it started), and, with
        ``after_late``, after a fingerprint was written after its span; the response ids of the calls that had
        returned to it."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{out}\n")
        self.proc.stdin.flush()
        ready = self.proc.stdout.readline().split()
        assert ready[0] == "ready", ready
        done: list[str] = []
        late = not after_late
        while len(done) < after_calls or not late:
            word, rid = self.proc.stdout.readline().split()
            if word == "done":
                done.append(rid)
            late = late or word == "late"
        deadline = time.monotonic() + delay_s
        while time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(int(ready[1]), signal.SIGKILL)
        while (line := self.proc.stdout.readline()) != "reaped\n":  # every line before it is whole
            assert line, "the zygote ended"
            if line.startswith("done "):
                done.append(line.split()[1])
        return done

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:  # a failed trial left a run going
                self.proc.kill()
                self.proc.wait()


def _trial(runs: Runs, tmp_path, k: int, delay_s: float):
    after_calls, after_late = k % 4, k % 5 == 4
    out = tmp_path / f"t{k}"
    done = runs.trial(out, after_calls, delay_s, after_late)
    (path,) = out.glob("killed-*.jsonl")
    return done, path


def test_no_returned_model_call_is_lost_on_sigkill(tmp_path, server):
    rnd = random.Random(18)
    base_url = server.openai_base_url
    lost, calls, late = 0, 0, 0
    runs = Runs(base_url)
    try:
        # every fifth run is killed only after a fingerprint came after its span (however loaded the machine)
        kills = [_trial(runs, tmp_path, k, rnd.uniform(0.0, 0.5)) for k in range(TRIALS)]
    finally:
        runs.close()
    for done, path in kills:
        trace = read(path)  # loads, whatever the moment of the kill
        rows = trace.spans.to_dicts()
        models = [r for r in rows if r["kind"] == "model"]
        ids = {attrs(r).get("gen_ai.response.id") for r in models}
        lost += sum(1 for rid in done if rid not in ids)
        calls += len(done)
        if not path.read_bytes().endswith(b"\n"):  # killed mid-write: the reader says so, and keeps the rest
            assert [d for d in trace.diagnostics if d.kind == "truncated_last_line"]
        updates = {r["span_id"] for r in raw_records(path) if r["record"] == "span_update"}
        late += len(updates)
        by_id = {r["span_id"]: r for r in models}
        for sid in updates:  # a fingerprint written after its span is merged into it
            assert by_id[sid]["prompt_tokens_hashed"] > 0 and len(by_id[sid]["block_hashes"]) > 0
        assert not [d for d in trace.diagnostics if d.kind == "orphan_update"]
    assert lost == 0
    assert calls >= TRIALS  # the kills fell across runs that had made calls
    assert late >= 1  # calls whose fingerprint came late were written first, the fingerprint after
