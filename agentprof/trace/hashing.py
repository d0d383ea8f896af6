"""Chained prompt block hashes: equal hashes at position i mean equal token prefixes up to block i.

``h_i = xxh3_64(h_{i-1} as 8 little-endian bytes ‖ tokens of block i as uint32 little-endian)`` with
``h_{-1} = 0``. Only full blocks are hashed (the partial tail has no hash, as in LMCache and kv-cache-tester).
Hashes are stored as signed int64 (two's complement of the unsigned digest) so they fit OTel, JSON-safe
integer columns and polars ``Int64``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import xxhash

DEFAULT_BLOCK_SIZE = 64
_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def to_signed(h: int) -> int:
    """Reinterpret an unsigned 64-bit digest as signed int64."""
    return h - _U64 if h > _I64_MAX else h


def to_unsigned(h: int) -> int:
    return h + _U64 if h < 0 else h


def _tokens_bytes(tokens: Sequence[int]) -> bytes:
    """Token ids as uint32 little-endian bytes (array, numpy array or any sequence of ints)."""
    if isinstance(tokens, array) and tokens.typecode == "I":
        return tokens.tobytes()
    astype = getattr(tokens, "astype", None)
    if astype is not None:  # numpy array, without importing numpy here
        return astype("<u4", copy=False).tobytes()
    return array("I", tokens).tobytes()


def _chain_bytes(buf: bytes | memoryview, step: int, seed: int) -> list[int]:
    """Chained hashes of the full ``step``-byte blocks of ``buf``, continuing from chain value ``seed``."""
    n_full = len(buf) // step
    prev = to_unsigned(seed).to_bytes(8, "little")
    mv = memoryview(buf)
    digest = xxhash.xxh3_64_intdigest
    out: list[int] = []
    append = out.append
    for i in range(n_full):
        h = digest(prev + mv[i * step : (i + 1) * step])
        prev = h.to_bytes(8, "little")
        append(h - _U64 if h > _I64_MAX else h)
    return out


def chain_hashes(tokens: Sequence[int], block_size: int = DEFAULT_BLOCK_SIZE, seed: int = 0) -> list[int]:
    """Chained xxh3_64 hashes of every full ``block_size``-token block of ``tokens`` (signed int64).

    ``seed`` is the previous chain value (unsigned or signed), so a chain can be continued block-wise.
    """
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    if len(tokens) < block_size:
        return []
    return _chain_bytes(_tokens_bytes(tokens), block_size * 4, seed)


class ChainHasher:
    """Chained block hashes for a stream of prompts that mostly extend each other (an agent loop).

    ``hashes(tokens)`` equals ``chain_hashes(tokens, block_size)``, but the blocks of the longest prefix shared
    with the previous prompt are taken from its hashes instead of being hashed again.
    """

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.block_size = block_size
        self._prev = b""
        self._hashes: list[int] = []
        self.hashed_blocks = 0  # blocks actually hashed (the rest were reused)

    def hashes(self, tokens: Sequence[int]) -> list[int]:
        buf = _tokens_bytes(tokens)
        step = self.block_size * 4
        prev = memoryview(self._prev)
        cand = min(len(buf), len(prev)) // step
        # bytes.startswith against a memoryview slice: a memcmp with no copy of either side
        if cand and buf.startswith(prev[: cand * step]):
            reuse = cand
        else:  # bisect the number of leading equal blocks
            lo, hi = 0, cand
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if buf.startswith(prev[lo * step : mid * step], lo * step):
                    lo = mid
                else:
                    hi = mid - 1
            reuse = lo
        head = self._hashes[:reuse]
        new = _chain_bytes(memoryview(buf)[reuse * step :], step, head[-1] if head else 0)
        self.hashed_blocks += len(new)
        self._prev, self._hashes = buf, head + new
        return list(self._hashes)


def coarsen(hashes: Sequence[int], factor: int) -> list[int]:
    """Hashes for blocks ``factor`` times larger: every ``factor``-th chained hash identifies that prefix."""
    if factor <= 0:
        raise ValueError("factor must be positive")
    return list(hashes[factor - 1 :: factor])


def common_prefix_blocks(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading blocks two block-hash lists share, compared position by position.

    A linear scan (with chunked C-speed slice comparisons) rather than a bisection, so it is also right for
    block ids that are not chained (e.g. imported ``hash_ids``).
    """
    n = min(len(a), len(b))
    if n == 0:
        return 0
    if list(a[:n]) == list(b[:n]):
        return n
    i = 0
    chunk = 256
    while i < n:
        j = min(n, i + chunk)
        if list(a[i:j]) != list(b[i:j]):
            while a[i] == b[i]:
                i += 1
            return i
        i = j
    return n
