"""Import units and their partitions: a stable hash of each unit's key, so the same inputs always land in the
same partitions (on any machine, in any run) and a session's sub-agents stay with it."""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from agentprof.importers.context import ImportContext
from agentprof.importers.walk import expand, group


@dataclass(frozen=True)
class Unit:
    """Files one importer reads together, in the order a single-process import reads them (``rank``)."""

    fmt: str
    files: tuple[str, ...]
    rank: int
    key: str
    size: int  # bytes


def units(paths: list[str], fmt: str = "auto", ctx: ImportContext | None = None) -> list[Unit]:
    """The inputs as import units, in single-process import order (:func:`agentprof.importers.load_any`).
    A kv-cache-tester folder is one import group but one unit per file (one session each)."""
    ctx = ctx or ImportContext()
    out: list[Unit] = []
    for gfmt, files in group(expand(paths, fmt, ctx)):
        parts = [[f] for f in files] if gfmt == "kv-cache-tester" else [files]
        for fs in parts:
            out.append(Unit(gfmt, tuple(str(f) for f in fs), len(out), _key(fs[0]),
                            sum(_size(f) for f in fs)))
    return out


def _key(first: Path) -> str:
    """A unit's identity: its first file without the extension (``<session>.jsonl`` and ``<session>/`` share
    it: a Claude Code session's main file comes first in its unit)."""
    name = first.name
    for suffix in (".jsonl", ".json", ".parquet"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return str(first.parent / name)


def _size(f: Path) -> int:
    try:
        return os.path.getsize(f)
    except OSError:
        return 0


def bucket(key: str, n: int) -> int:
    """Partition of a unit key among ``n``: blake2b of the key, so stable across processes and machines."""
    h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return h % n


def partitions(all_units: list[Unit], n: int) -> list[list[Unit]]:
    """``n`` partitions by :func:`bucket`, each in import order; empty ones dropped."""
    parts: list[list[Unit]] = [[] for _ in range(max(n, 1))]
    for u in all_units:
        parts[bucket(u.key, len(parts))].append(u)
    return [p for p in parts if p]


def count_for(all_units: list[Unit], workers: int, batch_bytes: int) -> int:
    """How many partitions: at least two per worker (a lost worker's share is spread), and enough that no
    partition's input is much above ``batch_bytes`` (the memory budget: see docs/PERFORMANCE.md)."""
    total = sum(u.size for u in all_units)
    return max(2 * max(workers, 1), math.ceil(total / max(batch_bytes, 1)), 1)
