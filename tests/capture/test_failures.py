"""agentprof's own failures never reach the agent: one clear warning, the agent's result unchanged."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import warnings

import openai
import pytest

import agentprof
from agentprof.capture import CaptureWarning
from agentprof.capture.sdk_patch import wrap_request
from agentprof.capture.session import current

from .capture_helpers import load, of_kind


@agentprof.tool
def double(x):
    return 2 * x


def agent(n):
    return [double(i) for i in range(n)]


def test_unwritable_output_folder(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.warns(CaptureWarning, match="cannot create a trace file") as record, \
            agentprof.profile("x", out=blocker / "traces") as run:
        result = agent(5)
        assert current() is not None  # still profiling (OTLP, nesting), only the file is missing
    assert result == [0, 2, 4, 6, 8]
    assert run.path is None and "NotADirectoryError" in run.error
    assert len([w for w in record if issubclass(w.category, CaptureWarning)]) == 1


def test_failing_exporter_warns_once_and_agent_continues(tmp_path, monkeypatch):
    def full_disk(self, line):
        raise OSError(errno.ENOSPC, "No space left on device")

    with agentprof.profile("full", out=tmp_path) as run:
        monkeypatch.setattr(type(run._session.exporter.writer), "write_line", full_disk)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = agent(20)
    assert result == [2 * i for i in range(20)]
    ours = [w for w in caught if issubclass(w.category, CaptureWarning)]
    assert len(ours) == 1 and "No space left on device" in str(ours[0].message)
    monkeypatch.undo()
    _, rows = load(run.path)  # the meta line was written before the disk "filled up": the file still loads
    assert rows == []


def test_warnings_as_errors_still_cannot_break_the_agent(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with agentprof.profile("x", out=blocker / "t"):
            assert agent(3) == [0, 2, 4]


def test_file_size_limit_in_a_real_process(tmp_path):
    """A real write failure (RLIMIT_FSIZE: the file may not grow past 2 KiB) in a child process."""
    script = textwrap.dedent(f"""
        import resource, signal, sys, warnings
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
        import agentprof

        @agentprof.tool
        def double(x):
            return 2 * x

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with agentprof.profile("limited", out={str(tmp_path)!r}):
                total = sum(double(i) for i in range(200))
        print(total, sum("cannot write trace file" in str(w.message) for w in caught))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(sum(2 * i for i in range(200))), "1"]
    (path,) = tmp_path.glob("limited-*.jsonl")
    assert os.path.getsize(path) <= 2048
    trace, rows = load(path)  # every span written before the limit loads; a cut last line is reported
    assert 0 < len(rows) < 200 and all(r["name"] == "execute_tool double" for r in rows)


def test_broken_sdk_response_object(tmp_path):
    """A response object whose attributes raise: the agent gets it unchanged, agentprof warns once."""
    class Exploding:
        def __getattr__(self, name):
            raise RuntimeError(f"no attribute {name} today")

    answer = Exploding()

    class FakeResource:
        def create(self, **kwargs):
            return answer

    FakeResource.create = wrap_request(FakeResource.create, "openai", "chat")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with agentprof.profile("broken", out=tmp_path) as run:
            got = FakeResource().create(model="m", messages=[{"role": "user", "content": "hi"}])
            got2 = FakeResource().create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert got is answer and got2 is answer
    ours = [w for w in caught if issubclass(w.category, CaptureWarning)]
    assert len(ours) == 1 and "reading a openai response" in str(ours[0].message)
    _, rows = load(run.path)
    assert len(of_kind(rows, "model")) == 2


def test_sdk_exception_passes_through_unchanged(tmp_path, server):
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="test", max_retries=0, timeout=2)
    with pytest.raises(openai.APIConnectionError), agentprof.profile("conn", out=tmp_path) as run:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    _, rows = load(run.path)
    (model,) = of_kind(rows, "model")
    assert model["status"] == "error" and model["error_type"] == "openai.APIConnectionError"
