"""LMCache-compatible chunk keys: the golden vectors recorded from lmcache 0.5.6 (research note lmcache.md
§1.3, CPython 3.11, vLLM absent) and the prefix-reusing keyer against the plain functions."""

from __future__ import annotations

import random

import pytest

from agentprof.analysis.lmcache_keys import (
    ChunkKeyer,
    blake3_chunk_hashes,
    blake3_none_hash,
    builtin_chunk_hashes,
    engine_key_string,
)


def test_builtin_golden_vectors():
    assert builtin_chunk_hashes(list(range(1, 11)), 4, save_unfull_chunk=True) == [
        4965923915475442220, -6292915440479534054, -4729132277562516714]
    assert builtin_chunk_hashes(list(range(1, 11)), 4) == [4965923915475442220, -6292915440479534054]
    assert builtin_chunk_hashes(range(600), 256, save_unfull_chunk=True) == [
        3131758554629441992, 8783757053568497755, 4356085038892181893]


def test_engine_key_strings():
    h = builtin_chunk_hashes(list(range(1, 11)), 4)
    assert [engine_key_string("Qwen/Qwen3-8B", x) for x in h] == [
        "Qwen/Qwen3-8B@1@0@44ea817d9387da2c@bfloat16", "Qwen/Qwen3-8B@1@0@-5754ed40775a7be6@bfloat16"]
    assert engine_key_string("m", 255, 8, 3, "float8_e4m3fn", {"lmcache.tag.user": "u1"}) == \
        "m@8@3@ff@float8_e4m3fn@lmcache.tag.user%u1"


def test_blake3_golden_vectors():
    assert blake3_none_hash().hex() == "7e3eff9ef7613a50340eb12677ee03b83ac759fcba9bb32705f07248d56d473b"
    assert [h.hex() for h in blake3_chunk_hashes(range(600))] == [
        "084547b6c40ed5b05ba8cd0305db5bf74d5617673948d9ed193ab7d6cbc484d4",
        "e5ffee45c2b9db326814c9692dc594369887ba3b0df5761817820b60f864c8e0"]


@pytest.mark.parametrize("scheme,unfull", [("builtin", False), ("builtin", True), ("blake3", False)])
def test_keyer_reuses_the_previous_prompt_without_changing_keys(scheme, unfull):
    rng = random.Random(7)
    keyer = ChunkKeyer(scheme, 64, unfull)
    tokens: list[int] = []
    total = 0
    for _ in range(60):
        r = rng.random()
        if r < 0.7:  # append (the common agent turn)
            tokens = tokens + [rng.randrange(100_000) for _ in range(rng.randrange(300))]
        elif r < 0.85:  # truncate (compaction)
            tokens = tokens[:rng.randrange(len(tokens) + 1)]
        elif tokens:  # edit one token
            tokens = list(tokens)
            tokens[rng.randrange(len(tokens))] = rng.randrange(100_000)
        ref = builtin_chunk_hashes(tokens, 64, unfull) if scheme == "builtin" else blake3_chunk_hashes(tokens, 64)
        assert keyer.keys(tokens) == ref
        total += len(ref)
    assert keyer.hashed_chunks < total / 2  # most chunks came from the previous prompt
