"""Real resource faults under a real agent (tools plus openai SDK calls to the loopback server): a full disk
(``/dev/full``), a file-size limit (``RLIMIT_FSIZE``) and a read-only traces folder (a read-only bind mount in a
user namespace, or a folder without write permission). The agent's results are those of an unfaulted run,
its exit status is 0, and agentprof says so once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from agentprof.capture.runner import BOOTSTRAP_DIR, ENV_CONFIG
from agentprof.demo.model_server import ModelServer

AGENT = textwrap.dedent("""
    import json, os, sys, warnings
    import openai
    import agentprof

    @agentprof.tool
    def double(x):
        return 2 * x

    def main():
        client = openai.OpenAI(base_url=sys.argv[1], api_key="x", max_retries=0)
        out = []
        for i in range(30):
            out.append(double(i))
            r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
            out.append(r.choices[0].message.content)
        return out

    mode, target = sys.argv[2], sys.argv[3]
    warnings.simplefilter("always")
    if mode == "fsize":
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    if mode == "run":  # under the agentprof run bootstrap: the whole process is profiled already
        print(json.dumps(main()))
    else:
        with agentprof.profile("agent", out=target):
            result = main()
        print(json.dumps(result))
""")


def _run(server, mode, target, env=None, prefix=()):
    cmd = [*prefix, sys.executable, "-c", AGENT, server.openai_base_url, mode, str(target)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def _warnings(stderr):
    return [line for line in stderr.splitlines() if "CaptureWarning" in line]


@pytest.fixture(scope="module")
def server():
    """One loopback server for the module's runs (its answers depend on the prompt alone)."""
    with ModelServer() as s:
        yield s


@pytest.fixture(scope="module")
def baseline(server, tmp_path_factory):
    """What the agent returns with a trace file that takes every write: the same whatever happens to its file."""
    result, err = _run(server, "plain", tmp_path_factory.mktemp("ok"))
    assert _warnings(err) == []
    return result


def test_full_disk(server, tmp_path, baseline):
    """The trace file is ``/dev/full``: every write fails with ENOSPC, the first one (the meta line) included."""
    env = dict(os.environ)
    env[ENV_CONFIG] = json.dumps({"path": "/dev/full", "name": "agent"})
    env["PYTHONPATH"] = str(BOOTSTRAP_DIR)
    result, err = _run(server, "run", "-", env=env)
    assert result == baseline
    (w,) = _warnings(err)
    assert "No space left on device" in w


def test_file_size_limit(server, tmp_path, baseline):
    result, err = _run(server, "fsize", tmp_path / "limited")
    assert result == baseline
    (w,) = _warnings(err)
    assert "cannot write trace file" in w
    (path,) = (tmp_path / "limited").glob("*.jsonl")
    assert os.path.getsize(path) <= 4096


def test_read_only_traces_folder(server, tmp_path, baseline):
    folder = tmp_path / "ro"
    folder.mkdir()
    unshare = shutil.which("unshare")
    if os.geteuid() != 0:
        folder.chmod(0o555)
        prefix: tuple[str, ...] = ()
    elif unshare and subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode == 0:
        # root ignores permissions: make the folder a read-only mount in a private mount namespace instead
        prefix = (unshare, "-rm", "sh", "-c", f'mount --bind "{folder}" "{folder}" && '
                  f'mount -o remount,bind,ro "{folder}" && exec "$0" "$@"')
    else:
        pytest.skip("running as root without user namespaces: no way to make a folder read-only here")
    try:
        result, err = _run(server, "plain", folder, prefix=prefix)
    finally:
        folder.chmod(0o755)
    assert result == baseline
    (w,) = _warnings(err)
    assert "cannot create a trace file" in w and ("Read-only" in w or "Permission denied" in w)
    assert list(folder.iterdir()) == []
