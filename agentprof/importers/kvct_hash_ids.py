"""kv-cache-tester ``hash_ids`` lists read as deltas: each request's list mostly repeats the previous request's
(the prompt grows by a turn), so only the ids after the shared leading ones are parsed.

A request's ``hash_ids`` text usually starts with the previous request's text byte for byte (96 % of the ids of
the shipped samples). The repeated ids are copied from the previous list instead of parsed, and the document
handed to the JSON reader carries each list's ordinal in its place (``"hash_ids":7``), so it is small and the
reader still decides which request each list belongs to (a list is only ever taken from the text after a
``"hash_ids"`` key; ``null`` stays). Anything unusual (another value that is not a list, a nested list, a token that is not an
integer, an id outside int64) returns ``None``, and the caller parses the documents whole as before: the ids
are then read, and errors located, exactly as without this step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import polars as pl

_KEY = b'"hash_ids"'
_SPACE = b" \t\r\n"
_ID_BYTES = b"0123456789-, \t\r\n"


@dataclass
class SplitIds:
    """Documents with every ``hash_ids`` list replaced by its ordinal, and the lists themselves."""

    docs: list[bytes]
    flat: np.ndarray  # int64: every list's ids, list after list in document order
    offsets: np.ndarray  # int64, one more than lists: list i is flat[offsets[i]:offsets[i + 1]]

    def lists(self, ordinals: pl.Series) -> pl.Series:
        """A ``List(Int64)`` column: the list each ordinal names (null stays null)."""
        off = self.offsets.tolist()
        flat = self.flat
        empty = flat[:0]
        out = pl.Series(ordinals.name, [empty if o is None else flat[off[o]:off[o + 1]] for o in ordinals.to_list()],
                        dtype=pl.List(pl.Int64))
        if ordinals.null_count():
            out = pl.select(pl.when(ordinals.is_null()).then(None).otherwise(out).alias(out.name)).to_series()
        return out


def _skip_space(raw: bytes, i: int) -> int:
    n = len(raw)
    while i < n and raw[i] in _SPACE:
        i += 1
    return i


def _shared_tokens(raw: bytes, a: int, b: int, pa: int, pb: int) -> tuple[int, int]:
    """Leading tokens of the list text ``raw[a:b]`` that are byte-equal to those of ``raw[pa:pb]`` (the previous
    list), and where the rest of ``raw[a:b]`` starts (after the separating comma)."""
    m = min(b - a, pb - pa)
    if m == 0:
        return 0, a
    cur = np.frombuffer(raw, dtype=np.uint8, count=m, offset=a)
    prev = np.frombuffer(raw, dtype=np.uint8, count=m, offset=pa)
    diff = np.flatnonzero(cur != prev)
    p = int(diff[0]) if diff.size else m
    if p == m and b - a == pb - pa:
        return -1, b  # the whole list repeats
    # tokens that end at a comma inside the common bytes are equal in both lists
    k = raw.count(b",", a, a + p)
    if k == 0:
        return 0, a
    return k, raw.rindex(b",", a, a + p) + 1


def split_hash_ids(raws: list[bytes]) -> SplitIds | None:
    """Take the ``hash_ids`` lists out of single-line documents; ``None`` if any document needs the full
    parser (see the module docstring)."""
    docs: list[bytes] = []
    shared: list[int] = []  # per list: leading ids copied from the previous list of its document (-1: all)
    counts: list[int] = []  # per list: ids parsed from its own text
    texts: list[bytes] = []  # the parsed parts, in list order
    ordinal = 0
    for raw in raws:
        out: list[bytes] = []
        pos = 0
        prev: tuple[int, int, int, bytes] | None = None  # the previous list: text span, ids, text
        while True:
            k = raw.find(_KEY, pos)
            if k < 0:
                break
            if k > 0 and raw[k - 1] == 0x5C:  # a backslash: the key is part of a longer escaped one
                return None
            c = _skip_space(raw, k + len(_KEY))
            if c >= len(raw) or raw[c] != 0x3A:  # not a key (a string value): leave it
                out.append(raw[pos:c])
                pos = c
                continue
            lb = _skip_space(raw, c + 1)
            if raw.startswith(b"null", lb):  # no list (read as an empty one later): leave it
                out.append(raw[pos:lb + 4])
                pos = lb + 4
                continue
            if lb >= len(raw) or raw[lb] != 0x5B:  # a value that is not a list: the full parser decides
                return None
            rb = raw.find(b"]", lb + 1)
            if rb < 0:
                return None
            a, b = lb + 1, rb
            if prev is None:
                n_shared, rest = 0, a
            elif prev[2] and raw.startswith(prev[3], a) and raw[a + len(prev[3])] == 0x2C:
                n_shared, rest = prev[2], a + len(prev[3]) + 1  # the previous list, then more: the usual case
            else:
                n_shared, rest = _shared_tokens(raw, a, b, prev[0], prev[1])
            if n_shared < 0:
                shared.append(-1)
                counts.append(0)
                n_ids = prev[2]
            else:
                text = raw[rest:b]
                if n_shared == 0 and not text.strip():
                    counts.append(0)  # an empty list
                else:
                    texts.append(text)
                    counts.append(text.count(b",") + 1)
                shared.append(n_shared)
                n_ids = n_shared + counts[-1]
            out.append(raw[pos:k])
            out.append(b'"hash_ids":%d' % ordinal)
            ordinal += 1
            pos = rb + 1
            prev = (a, b, n_ids, raw[a:b])
        out.append(raw[pos:])
        shared.append(-2)  # a document boundary: the next list has no previous one
        counts.append(0)
        docs.append(b"".join(out))
    ids = _parse_ids(texts, sum(counts))
    if ids is None:
        return None
    return _assemble(shared, counts, ids, docs)


def _parse_ids(texts: list[bytes], expected: int) -> np.ndarray | None:
    """The comma-separated integers of ``texts`` as one int64 array; ``None`` unless every token is an
    integer that fits int64."""
    if not texts:
        return np.zeros(0, dtype=np.int64)
    joined = b",".join(texts)
    if joined.translate(None, _ID_BYTES):  # anything but digits, minus signs, commas and spaces
        return None
    try:
        values = json.loads(b"[" + joined + b"]")
        if len(values) != expected:
            return None
        return np.array(values, dtype=np.int64)
    except (ValueError, OverflowError):
        return None


def _assemble(shared: list[int], counts: list[int], ids: np.ndarray, docs: list[bytes]) -> SplitIds:
    """Every list's ids in one flat array: the shared leading ids copied from the previous list, then its own."""
    lengths: list[int] = []
    last = 0
    for s, c in zip(shared, counts, strict=True):
        if s == -2:
            last = 0
            continue
        n = (last if s < 0 else s + c)
        lengths.append(n)
        last = n
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths, dtype=np.int64), out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=np.int64)
    off = offsets.tolist()
    i = 0  # list number
    j = 0  # position in ids
    for s, c in zip(shared, counts, strict=True):
        if s == -2:
            continue
        a, b = off[i], off[i + 1]
        if s < 0:
            flat[a:b] = flat[off[i - 1]:off[i - 1] + (b - a)]
        else:
            if s:  # only a list with a previous one in its document shares ids
                flat[a:a + s] = flat[off[i - 1]:off[i - 1] + s]
            flat[a + s:b] = ids[j:j + c]
            j += c
        i += 1
    return SplitIds(docs, flat, offsets)
