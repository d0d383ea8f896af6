"""Partitioned runs against the single-process result: a real Dask scheduler and two worker processes on
127.0.0.1 (``--scheduler``), a local cluster (``--workers 2``), in-process streaming (``--batch-mb``), and a
worker killed mid-run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentprof.cli import cli as cli_main
from agentprof.distributed.partition import bucket, partitions, units

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "traces" / "samples"
DASK = Path(sys.executable).with_name("dask")


def same_analysis(a: str, b: str) -> bool:
    """Equal ``--json`` documents; diagnostics as a multiset (partitions may list import notes in another
    order, docs/PERFORMANCE.md "Scale")."""
    x, y = json.loads(a), json.loads(b)
    x.pop("diagnostics")
    y.pop("diagnostics")
    return x == y and _notes(a) == _notes(b)


def _notes(doc: str) -> tuple[list[str], int]:
    """Diagnostics as a multiset, with the kv-cache-tester importer's per-batch counts summed (it counts
    requests without api_time per import batch, and partitions batch differently)."""
    per_batch = re.compile(r"^(\d+) (request\(s\) without api_time .*)$")
    keys, batched = [], 0
    for d in json.loads(doc)["diagnostics"]:
        m = per_batch.match(d.get("message", ""))
        if m and not d.get("path"):
            batched += int(m.group(1))
        else:
            keys.append(json.dumps(d, sort_keys=True))
    return sorted(keys), batched


def _cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli_main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1, dashboards off."""
    from distributed import Client

    d = tmp_path_factory.mktemp("dask")
    sfile = d / "scheduler.json"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    procs = [subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                              "--dashboard-address", "127.0.0.1:0",
                               "--scheduler-file", str(sfile)], cwd=d, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    deadline = time.time() + 60
    while not sfile.exists() and time.time() < deadline:
        time.sleep(0.2)
    address = json.loads(sfile.read_text())["address"]
    workers = [subprocess.Popen([str(DASK), "worker", "--scheduler-file", str(sfile), "--nthreads", "1",
                                 "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"], cwd=d, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    procs += workers
    with Client(address, timeout="30s") as c:
        c.wait_for_workers(2, timeout=120)
    yield address, workers
    # killed, not asked to close: nothing here tests their shutdown, and a worker asked to close while the
    # scheduler closes too could wait out its 20 s here (CI: a 20 s teardown after the killed-worker test)
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(timeout=20)


@pytest.fixture(scope="module")
def single_json() -> str:
    code, out, _ = _cli("analyze", str(SAMPLES), "--json")
    assert code == 0
    return out


def test_units_keep_subagents_with_their_session_and_buckets_are_stable():
    found = units([str(SAMPLES / "claude-code")])
    session = [u for u in found if "258c7280" in u.key]
    assert len(session) == 1 and any("subagents" in f for f in session[0].files)
    assert [u.rank for u in found] == list(range(len(found)))
    assert bucket("a/b/c", 7) == bucket("a/b/c", 7) and {bucket(f"k{i}", 3) for i in range(50)} == {0, 1, 2}
    parts = partitions(found, 3)
    assert sorted(u.rank for p in parts for u in p) == list(range(len(found)))
    assert all([u.rank for u in p] == sorted(u.rank for u in p) for p in parts)


def test_streaming_in_small_batches_matches_one_process(single_json):
    code, out, _ = _cli("analyze", str(SAMPLES), "--json", "--batch-mb", "0.5")
    assert code == 0 and same_analysis(out, single_json)


@pytest.mark.timeout(300)
def test_scheduler_and_local_workers_match_one_process(cluster, single_json):
    address, _ = cluster
    code, out, _ = _cli("analyze", str(SAMPLES), "--json", "--scheduler", address)
    assert code == 0 and same_analysis(out, single_json)
    data = json.loads(out)
    assert data["model_calls"] > 1000 and data["sessions"] > 20  # the whole shipped corpus, not a part of it
    code, out, _ = _cli("analyze", str(SAMPLES), "--json", "--workers", "2")
    assert code == 0 and same_analysis(out, single_json)


@pytest.mark.timeout(300)
def test_cachesim_and_replay_on_the_cluster_match(cluster):
    address, _ = cluster
    kv = str(SAMPLES / "kv-cache-tester")
    for args in (["cachesim", kv, "--model", "kimi-k2.5", "--tier", "cpu=40GiB", "--json"],
                 ["replay", kv, "-s", "h200+x86", "--json"]):
        code, local, _ = _cli(*args)
        assert code == 0
        code, remote, _ = _cli(*args, "--scheduler", address)
        assert code == 0 and remote == local


@pytest.mark.timeout(600)
def test_a_worker_killed_mid_run_recovers_or_fails_with_one_line(cluster, tmp_path):
    from distributed import Client

    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_import import build_kvct

    address, workers = cluster
    corpus = tmp_path / "kv"
    build_kvct(corpus, 120)
    code, single, _ = _cli("analyze", str(corpus), "--json")
    assert code == 0
    run = subprocess.Popen([sys.executable, "-m", "agentprof.cli", "analyze", str(corpus), "--json",
                            "--scheduler", address, "--batch-mb", "8"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    victim = workers[1]
    killed = False
    with Client(address, timeout="30s") as c:
        deadline = time.time() + 120
        while time.time() < deadline and run.poll() is None:
            if any(c.processing().values()):  # partitions are running (each worker takes some)
                os.kill(victim.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.05)
    out, err = run.communicate(timeout=300)
    assert killed, "the run ended before a task reached the worker to kill"
    if run.returncode == 0:
        assert same_analysis(out, single)  # recovered: the other worker recomputed the lost partitions
    else:
        lines = [x for x in err.splitlines() if x.strip()]
        assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
