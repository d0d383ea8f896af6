"""agentprof's LMCache-compatible keys against lmcache's own code (lmcache 0.5.6 in .venv-lmcache, created by
scripts/setup_lmcache.sh; lmcache pins opentelemetry-api <= 1.40, so it cannot share agentprof's venv)."""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest

from agentprof.analysis.lmcache_keys import blake3_chunk_hashes, builtin_chunk_hashes, engine_key_string

from ..side_envs import WAIT_S, side_env, wait_for
from .analysis_helpers import ROOT

VENV_PY = ROOT / ".venv-lmcache" / "bin" / "python"
PROBE = ROOT / "scripts" / "lmcache_probe.py"

pytestmark = [pytest.mark.lmcache, side_env, pytest.mark.timeout(WAIT_S + 600)]


def _lmcache_ok() -> str | None:
    wait_for(VENV_PY.parents[1])
    if not VENV_PY.exists():
        return f"{VENV_PY} missing: run scripts/setup_lmcache.sh (needs ~2 GB and the package registry)"
    env = {**os.environ, "LMCACHE_TRACK_USAGE": "false", "DO_NOT_TRACK": "1"}
    r = subprocess.run([str(VENV_PY), "-c", "import lmcache.v1.token_database"], capture_output=True, env=env,
                       timeout=120)
    if r.returncode:
        return f"{VENV_PY} cannot import lmcache: {r.stderr.decode()[-300:]}"
    return None


def test_keys_match_lmcache(tmp_path):
    reason = _lmcache_ok()
    if reason:
        pytest.skip(reason)
    rng = random.Random(3)
    base = [rng.randrange(150_000) for _ in range(3000)]
    prompts = [list(range(1, 11)), list(range(600)), base[:1000], base[:1000] + [5, 6, 7], base,
               [rng.randrange(2**31) for _ in range(777)], []]
    src, dst = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps({"prompts": prompts, "chunk_size": 256, "model_name": "Qwen/Qwen3-8B",
                               "world_size": 1, "worker_id": 0}))
    env = {**os.environ, "LMCACHE_TRACK_USAGE": "false", "DO_NOT_TRACK": "1"}
    subprocess.run([str(VENV_PY), str(PROBE), str(src), str(dst)], check=True, env=env, timeout=300,
                   capture_output=True)
    ref = json.loads(dst.read_text())
    assert ref["lmcache_version"] == "0.5.6" and ref["save_unfull_chunk_engine_default"] is False
    for i, p in enumerate(prompts):
        assert builtin_chunk_hashes(p, 256) == ref["builtin"][i]
        assert builtin_chunk_hashes(p, 256, save_unfull_chunk=True) == ref["builtin_config_none"][i]
        assert [engine_key_string("Qwen/Qwen3-8B", h) for h in ref["builtin"][i]] == ref["keys"][i]
        assert [h.hex() for h in blake3_chunk_hashes(p, 256)] == ref["blake3"][i]
    assert sum(len(k) for k in ref["builtin"]) > 20
