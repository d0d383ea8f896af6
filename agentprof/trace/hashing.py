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


def chain_hashes(tokens: Sequence[int], block_size: int = DEFAULT_BLOCK_SIZE, seed: int = 0) -> list[int]:
    """Chained xxh3_64 hashes of every full ``block_size``-token block of ``tokens`` (signed int64).

    ``seed`` is the previous chain value (unsigned or signed), so a chain can be continued block-wise.
    """
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    n_full = len(tokens) // block_size
    if n_full == 0:
        return []
    buf = (tokens if isinstance(tokens, array) and tokens.typecode == "I" else array("I", tokens)).tobytes()
    step = block_size * 4
    prev = to_unsigned(seed).to_bytes(8, "little")
    digest = xxhash.xxh3_64_intdigest
    out: list[int] = []
    append = out.append
    for i in range(n_full):
        h = digest(prev + buf[i * step : (i + 1) * step])
        prev = h.to_bytes(8, "little")
        append(h - _U64 if h > _I64_MAX else h)
    return out


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
