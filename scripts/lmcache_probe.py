"""Compute LMCache's own chunk keys (and time them) for token ids, inside the lmcache virtual environment.

Run with ``.venv-lmcache/bin/python scripts/lmcache_probe.py IN.json OUT.json`` (see scripts/setup_lmcache.sh).
IN: ``{"prompts": [[token ids], ...], "chunk_size": 256, "model_name": "...", "world_size": 1, "worker_id": 0,
"repeat": 0}``. OUT: per prompt the builtin ``ChunkedTokenDatabase`` hashes (engine config, partial chunk
dropped), the ``config=None`` hashes (partial chunk kept), the ``CacheEngineKey`` strings, the blake3
``TokenHasher`` digests, and with ``repeat`` > 0 the best wall time of keying every prompt, per scheme.
Deliberately imports nothing from agentprof: it is the independent reference.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

os.environ.setdefault("LMCACHE_TRACK_USAGE", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
logging.disable(logging.WARNING)


def main(src: str, dst: str) -> None:
    import torch
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.metadata import LMCacheMetadata
    from lmcache.v1.multiprocess.token_hasher import TokenHasher
    from lmcache.v1.token_database import ChunkedTokenDatabase

    with open(src) as f:
        spec = json.load(f)
    prompts = spec["prompts"]
    cs = int(spec.get("chunk_size", 256))
    cfg = LMCacheEngineConfig.from_defaults(chunk_size=cs)
    meta = LMCacheMetadata(model_name=spec.get("model_name", "Qwen/Qwen3-8B"), world_size=spec.get("world_size", 1),
                           local_world_size=spec.get("world_size", 1), worker_id=spec.get("worker_id", 0),
                           local_worker_id=spec.get("worker_id", 0), kv_dtype=torch.bfloat16,
                           kv_shape=(36, 2, cs, 8, 128))
    db = ChunkedTokenDatabase(cfg, meta)
    db_default = ChunkedTokenDatabase()
    hasher = TokenHasher(chunk_size=cs)
    out: dict = {"lmcache_version": __import__("lmcache").__version__, "chunk_size": cs,
                 "save_unfull_chunk_engine_default": bool(cfg.save_unfull_chunk),
                 "blake3_none_hash": hasher.none_hash.hex() if isinstance(hasher.none_hash, bytes) else None,
                 "builtin": [], "builtin_config_none": [], "keys": [], "blake3": []}
    for p in prompts:
        res = list(db.process_tokens(tokens=p))
        out["builtin"].append([int(k.chunk_hash) for _, _, k in res])
        out["keys"].append([k.to_string() for _, _, k in res])
        out["builtin_config_none"].append([int(h) for _, _, h in db_default.process_tokens(tokens=p, make_key=False)])
        out["blake3"].append([h.hex() for h in hasher.compute_chunk_hashes(p)])
    repeat = int(spec.get("repeat", 0))
    if repeat:
        timing = {}
        for name, fn in (("builtin_engine_keys", lambda p: list(db.process_tokens(tokens=p))),
                         ("builtin_hashes_only", lambda p: list(db.process_tokens(tokens=p, make_key=False))),
                         ("blake3_token_hasher", lambda p: hasher.compute_chunk_hashes(p))):
            best = float("inf")
            for _ in range(repeat):
                t0 = time.perf_counter()
                for p in prompts:
                    fn(p)
                best = min(best, time.perf_counter() - t0)
            timing[name] = best
        out["timing_s"] = timing
    with open(dst, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
