"""The crash-safe JSONL writer: whole lines from many threads and from a forked child, nothing after close."""

from __future__ import annotations

import json
import os
import threading

import pytest

from agentprof.trace.writer import JsonlTraceWriter


def _line(i: int) -> bytes:
    return (json.dumps({"record": "x", "i": i, "pad": "p" * (i % 97)}, separators=(",", ":")) + "\n").encode()


def test_threads_never_lose_or_tear_a_line(tmp_path):
    path = tmp_path / "threads.jsonl"
    w = JsonlTraceWriter(path)

    def work(t: int) -> None:
        for i in range(1500):
            w.write_line(_line(t * 100000 + i))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    w.close()
    got = [json.loads(x)["i"] for x in path.read_bytes().splitlines()]
    assert sorted(got) == sorted(t * 100000 + i for t in range(8) for i in range(1500))
    with pytest.raises(ValueError, match="closed"):
        w.write_line(b"{}\n")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_parent_and_forked_child_both_keep_their_lines(tmp_path):
    path = tmp_path / "fork.jsonl"
    w = JsonlTraceWriter(path)
    w.write_line(_line(1))
    pid = os.fork()
    if pid == 0:  # the child appends and exits without closing
        try:
            for i in range(100, 150):
                w.write_line(_line(i))
        finally:
            os._exit(0)
    for i in range(2, 50):
        w.write_line(_line(i))
    os.waitpid(pid, 0)
    w.write_line(_line(50))
    w.close()
    got = [json.loads(x)["i"] for x in path.read_bytes().splitlines()]
    assert sorted(got) == [1, *range(2, 51), *range(100, 150)]
