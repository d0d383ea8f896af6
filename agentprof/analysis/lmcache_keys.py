"""LMCache-compatible chunk keys for token ids (LMCache 0.5.x), without importing lmcache.

Two schemes, both with 256-token chunks by default and chained so a key identifies the whole prefix:

- ``builtin`` (in-process engine, ``ChunkedTokenDatabase`` with ``pre_caching_hash_algorithm: builtin`` and
  vLLM absent): ``h_i = hash((h_{i-1}, tuple(chunk_i), ()))`` with ``NONE_HASH = 0`` (Python's tuple hash
  of ints does not depend on ``PYTHONHASHSEED``; 64-bit CPython). A partial last chunk is keyed only with
  ``save_unfull_chunk`` (the engine default is ``False``). Keys print as ``CacheEngineKey`` strings
  ``model@world_size@worker_id@<hex hash>@<dtype>``.
- ``blake3`` (multiprocess server, ``TokenHasher``): ``d_i = blake3(d_{i-1} ‖ tokens as big-endian
  uint32)``, ``d_{-1} = blake3(12 zero bytes)``; complete chunks only.

Agent prompts mostly repeat the previous prompt, so :class:`ChunkKeyer` finds the common token prefix with
the previous prompt (one vectorized comparison) and only hashes the chunks after it: the same keys, far
fewer hash calls. Pinned against LMCache 0.5.6 (golden vectors in ``tests/analysis/test_lmcache_keys.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

NONE_HASH = 0
DEFAULT_CHUNK = 256
_BLAKE3_NONE_INPUT = bytes(12)  # (0 as 8 big-endian bytes) ‖ (token 0 as 4 big-endian bytes)


def _as_list(tokens: Sequence[int] | np.ndarray) -> list[int]:
    return tokens.tolist() if isinstance(tokens, np.ndarray) else list(tokens)


def builtin_chunk_hashes(tokens: Sequence[int] | np.ndarray, chunk_size: int = DEFAULT_CHUNK,
                         save_unfull_chunk: bool = False, prefix_hash: int = NONE_HASH) -> list[int]:
    """``ChunkedTokenDatabase`` builtin-hash chunk hashes (signed Python ints)."""
    toks = _as_list(tokens)
    n = len(toks)
    end = n if save_unfull_chunk else n - n % chunk_size
    h = prefix_hash
    out: list[int] = []
    for i in range(0, end, chunk_size):
        h = hash((h, tuple(toks[i:i + chunk_size]), ()))
        out.append(h)
    return out


def _blake3():
    try:
        from blake3 import blake3
    except ImportError as e:  # pragma: no cover - blake3 is a dependency
        raise RuntimeError("the blake3 scheme needs the 'blake3' package (pip install blake3)") from e
    return blake3


def blake3_none_hash() -> bytes:
    """``TokenHasher``'s chain seed: blake3 of 12 zero bytes."""
    return _blake3()(_BLAKE3_NONE_INPUT).digest()


def blake3_chunk_hashes(tokens: Sequence[int] | np.ndarray, chunk_size: int = DEFAULT_CHUNK,
                        prefix: bytes | None = None) -> list[bytes]:
    """``TokenHasher`` (blake3) digests of every complete chunk (32 bytes each)."""
    b3 = _blake3()
    arr = np.asarray(tokens, dtype=">u4") if not isinstance(tokens, np.ndarray) else tokens.astype(">u4", copy=False)
    buf = arr.tobytes()
    step = chunk_size * 4
    prev = prefix if prefix is not None else b3(_BLAKE3_NONE_INPUT).digest()
    out: list[bytes] = []
    for i in range(0, (len(arr) // chunk_size) * step, step):
        prev = b3(prev + buf[i:i + step]).digest()
        out.append(prev)
    return out


def engine_key_string(model_name: str, chunk_hash: int, world_size: int = 1, worker_id: int = 0,
                      dtype: str = "bfloat16", tags: dict[str, Any] | None = None) -> str:
    """``CacheEngineKey.to_string()``: ``model@world_size@worker_id@<hex>@<dtype>[@tag%value…]`` (negative
    hashes print as ``-hex``)."""
    s = f"{model_name}@{world_size}@{worker_id}@{chunk_hash:x}@{dtype}"
    for k, v in (tags or {}).items():
        s += f"@{k}%{v}"
    return s


class ChunkKeyer:
    """LMCache chunk keys for a stream of prompts, reusing the keys of the previous prompt's common prefix.

    ``scheme`` is ``builtin`` or ``blake3``. ``keys(tokens)`` returns exactly what the scheme's function
    returns for ``tokens``; only chunks after the longest prefix shared with the previous prompt are hashed.
    """

    def __init__(self, scheme: str = "builtin", chunk_size: int = DEFAULT_CHUNK, save_unfull_chunk: bool = False):
        if scheme not in ("builtin", "blake3"):
            raise ValueError(f"unknown scheme {scheme!r}: expected builtin or blake3")
        self.scheme = scheme
        self.chunk_size = chunk_size
        self.save_unfull_chunk = save_unfull_chunk and scheme == "builtin"
        self._prev = np.empty(0, dtype=np.uint32)
        self._keys: list[Any] = []
        self.hashed_chunks = 0  # chunks actually hashed (the rest came from the previous prompt)

    def keys(self, tokens: Sequence[int] | np.ndarray) -> list[Any]:
        cur = tokens if isinstance(tokens, np.ndarray) and tokens.dtype == np.uint32 else \
            np.asarray(tokens, dtype=np.uint32)
        cs = self.chunk_size
        prev = self._prev
        # full chunks the previous prompt keyed that lie inside this prompt: the candidates for reuse
        cand = min(prev.size // cs, cur.size // cs)
        reuse = 0
        if cand:
            n = cand * cs
            a, b = cur[:n], prev[:n]
            if n % 2 == 0 and a.flags.c_contiguous and b.flags.c_contiguous:
                a, b = a.view(np.uint64), b.view(np.uint64)  # half the comparisons
                diff = np.flatnonzero(a != b)
                reuse = cand if diff.size == 0 else int(diff[0]) * 2 // cs
            else:
                diff = np.flatnonzero(a != b)
                reuse = cand if diff.size == 0 else int(diff[0]) // cs
        head = self._keys[:reuse]
        tail_tokens = cur[reuse * cs:]
        if self.scheme == "builtin":
            seed = head[-1] if head else NONE_HASH
            new = builtin_chunk_hashes(tail_tokens, cs, self.save_unfull_chunk, prefix_hash=seed)
        else:
            seed_b = head[-1] if head else None
            new = blake3_chunk_hashes(tail_tokens, cs, prefix=seed_b)
        self.hashed_chunks += len(new)
        head.extend(new)
        self._prev = cur
        self._keys = head
        return list(head)
