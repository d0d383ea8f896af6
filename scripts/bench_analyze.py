#!/usr/bin/env python3
"""Analysis speed, each figure against a baseline measured in the same run.

1. ``agentprof analyze`` over a folder of kv-cache-tester traces (default 700, ~0.5 GB; built in /tmp by
   ``scripts/bench_import.py``'s generator: the 19 shipped samples replicated with shifted hash ids), end to
   end as a command (``--json`` to /dev/null), against the time to merely ``json.load`` the same files. The
   import / analysis / JSON split is timed in-process as well.
2. Block hashing throughput on the token ids of a synthetic agent session (append-only turns growing from
   20k to ~120k tokens, with occasional edits): agentprof's own chained xxh3 blocks, and agentprof's
   LMCache-compatible keys (``builtin`` and ``blake3``, cold and with :class:`ChunkKeyer`'s prefix reuse),
   against LMCache 0.5.6's own key computation on the same token ids (``ChunkedTokenDatabase.process_tokens``
   and ``TokenHasher.compute_chunk_hashes``), timed inside ``.venv-lmcache`` by ``scripts/lmcache_probe.py``.

    .venv/bin/python scripts/bench_analyze.py              # full run (corpus built once, kept in /tmp)
    .venv/bin/python scripts/bench_analyze.py --traces 70  # smaller corpus
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def corpus(folder: Path, n: int) -> Path:
    stamp = folder / ".built"
    if stamp.exists() and stamp.read_text() == str(n):
        return folder
    spec = importlib.util.spec_from_file_location("bench_import", ROOT / "scripts" / "bench_import.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    for f in folder.glob("*.json"):
        f.unlink()
    mod.build_kvct(folder, n)
    stamp.write_text(str(n))
    return folder


def json_floor(files: list[Path]) -> float:
    t = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            json.load(fh)
    return time.perf_counter() - t


def bench_analyze(folder: Path) -> dict:
    files = sorted(folder.glob("*.json"))
    size = sum(f.stat().st_size for f in files)
    floor = min(json_floor(files) for _ in range(2))
    cmd = [str(ROOT / ".venv" / "bin" / "agentprof"), "analyze", str(folder), "--json", "--no-progress"]
    cli = best(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), repeat=2)
    from agentprof.analysis import analyze
    from agentprof.analysis.analyzer import dumps
    from agentprof.importers import load_any

    t = time.perf_counter()
    trace = load_any(folder)
    t_import = time.perf_counter() - t
    t = time.perf_counter()
    a = analyze(trace)
    t_analyze = time.perf_counter() - t
    t = time.perf_counter()
    dumps(a)
    t_json = time.perf_counter() - t
    blocks = int(trace.spans.get_column("block_hashes").list.len().sum())
    return {"load_average": os.getloadavg()[0], "files": len(files), "MB": round(size / 1e6, 1),
            "model_calls": a.n_model_calls, "blocks": blocks,
            "json_load_s": round(floor, 2), "cli_s": round(cli, 2), "cli_over_json": round(cli / floor, 2),
            "import_s": round(t_import, 2), "analyze_s": round(t_analyze, 2), "to_json_s": round(t_json, 2),
            "analyze_blocks_per_s": round(blocks / t_analyze)}


def session_prompts(turns: int = 40, seed: int = 1) -> list[list[int]]:
    """A coding-agent-like prompt sequence: each turn appends 1-4k tokens; 1 turn in 10 edits the tail."""
    rng = random.Random(seed)
    cur = [rng.randrange(150_000) for _ in range(20_000)]
    out = [list(cur)]
    for k in range(1, turns):
        if k % 10 == 0:
            del cur[-rng.randrange(200, 2000):]
        cur = cur + [rng.randrange(150_000) for _ in range(rng.randrange(1000, 4000))]
        out.append(list(cur))
    return out


def best(fn, repeat: int = 7) -> float:
    b = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t)
    return b


def bench_hashing(prompts: list[list[int]], tmp: Path) -> dict:
    import numpy as np

    from agentprof.analysis.lmcache_keys import ChunkKeyer, blake3_chunk_hashes, builtin_chunk_hashes
    from agentprof.trace.hashing import ChainHasher, chain_hashes

    tokens = sum(len(p) for p in prompts)
    arrays = [np.asarray(p, dtype=np.uint32) for p in prompts]

    def keyer(scheme: str):
        def run() -> None:
            k = ChunkKeyer(scheme, 256)
            for p in arrays:
                k.keys(p)
        return run

    def chain(block: int):
        def run() -> None:
            h = ChainHasher(block)
            for p in arrays:
                h.hashes(p)
        return run

    ours = {
        "agentprof_xxh3_64tok_cold": best(lambda: [chain_hashes(p, 64) for p in prompts]),
        "agentprof_xxh3_64tok_incremental": best(chain(64)),
        "agentprof_xxh3_256tok_incremental": best(chain(256)),
        "agentprof_builtin_cold": best(lambda: [builtin_chunk_hashes(p, 256) for p in prompts]),
        "agentprof_builtin_keyer": best(keyer("builtin")),
        "agentprof_blake3_cold": best(lambda: [blake3_chunk_hashes(p, 256) for p in arrays]),
        "agentprof_blake3_keyer": best(keyer("blake3")),
    }
    out = {"prompts": len(prompts), "tokens": tokens, **{k: round(v, 4) for k, v in ours.items()}}
    py = ROOT / ".venv-lmcache" / "bin" / "python"
    if not py.exists():
        out["lmcache"] = "skipped: .venv-lmcache missing (scripts/setup_lmcache.sh)"
        return out
    src, dst = tmp / "probe_in.json", tmp / "probe_out.json"
    src.write_text(json.dumps({"prompts": prompts, "chunk_size": 256, "repeat": 7}))
    env = {**os.environ, "LMCACHE_TRACK_USAGE": "false", "DO_NOT_TRACK": "1"}
    subprocess.run([str(py), str(ROOT / "scripts" / "lmcache_probe.py"), str(src), str(dst)], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ref = json.loads(dst.read_text())
    # same keys, or the comparison means nothing
    assert [builtin_chunk_hashes(p, 256) for p in prompts] == ref["builtin"]
    assert [[h.hex() for h in blake3_chunk_hashes(p, 256)] for p in arrays] == ref["blake3"]
    lm_b, lm_3 = ref["timing_s"]["builtin_engine_keys"], ref["timing_s"]["blake3_token_hasher"]
    lm_h = ref["timing_s"]["builtin_hashes_only"]
    out.update({
        "lmcache_builtin_engine_keys": round(lm_b, 4), "lmcache_builtin_hashes_only": round(lm_h, 4),
        "lmcache_blake3_token_hasher": round(lm_3, 4),
        "speedup_builtin_keyer_vs_hashes_only": round(lm_h / ours["agentprof_builtin_keyer"], 1),
        "speedup_builtin_cold": round(lm_b / ours["agentprof_builtin_cold"], 1),
        "speedup_builtin_keyer": round(lm_b / ours["agentprof_builtin_keyer"], 1),
        "speedup_blake3_cold": round(lm_3 / ours["agentprof_blake3_cold"], 1),
        "speedup_blake3_keyer": round(lm_3 / ours["agentprof_blake3_keyer"], 1),
        "speedup_xxh3_cold_vs_lmcache_builtin": round(lm_b / ours["agentprof_xxh3_64tok_cold"], 1),
        "speedup_xxh3_incremental_vs_lmcache_builtin": round(lm_b / ours["agentprof_xxh3_64tok_incremental"], 1),
        "speedup_xxh3_256_incremental_vs_lmcache_builtin": round(lm_b / ours["agentprof_xxh3_256tok_incremental"], 1),
        "Mtok_per_s": {k: round(tokens / v / 1e6, 1) for k, v in
                       {**ours, "lmcache_builtin": lm_b, "lmcache_blake3": lm_3}.items()},
    })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=700, help="kv-cache-tester files in the synthetic corpus")
    ap.add_argument("--dir", default="/tmp/agentprof-bench-analyze", help="where the corpus is built")
    ap.add_argument("--skip-corpus", action="store_true", help="only the hashing benchmark")
    args = ap.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    print(f"cores available: {len(os.sched_getaffinity(0))}", flush=True)
    print(json.dumps({"hashing": bench_hashing(session_prompts(), base)}, indent=1), flush=True)
    if not args.skip_corpus:
        folder = corpus(base / f"kvct-{args.traces}", args.traces)
        print(json.dumps({"analyze": bench_analyze(folder)}, indent=1), flush=True)


if __name__ == "__main__":
    main()
