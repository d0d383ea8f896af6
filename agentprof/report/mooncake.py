"""Mooncake trace JSONL, the request format AIPerf and Dynamo replay: one line per model call with
``timestamp`` (ms from the first call), ``input_length``, ``output_length`` and ``hash_ids``.

``hash_ids`` name ``block``-token blocks (512 by default) such that equal leading ids mean an equal prompt
prefix, renumbered as small consecutive integers in first-seen order. They are derived from the trace's
finer block hashes: chained hashes (agentprof's scheme) are coarsened (every ``block / block_size``-th hash
already identifies its whole prefix); ids that are not chained (kv-cache-tester's, a mix of schemes) are
chained here, per trace file, so a coarse id stands for its whole prefix too. AIPerf builds each prompt from
``ceil(input_length / block)`` ids, the last one possibly partial; blocks the trace has no hash for (the
partial tail, tokens beyond the hashed ones, calls without hashes) get fresh ids that match nothing.
Timestamps keep the gaps between calls (tool runs, waits), so a replay keeps the agent's pacing.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from agentprof.analysis.calls import is_chained
from agentprof.errors import AgentprofError
from agentprof.trace import Trace
from agentprof.trace.hashing import coarsen

MOONCAKE_BLOCK = 512


@dataclass
class MooncakeStats:
    """What the export did, for the CLI to report."""

    requests: int = 0
    unique_blocks: int = 0
    calls_without_hashes: int = 0
    calls_without_output: int = 0
    calls_without_time: int = 0
    skipped_no_length: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def to_mooncake(trace: Trace, block: int = MOONCAKE_BLOCK) -> tuple[list[dict[str, Any]], MooncakeStats]:
    """Mooncake request records for every model call of ``trace``, in time order, and export statistics."""
    fine = trace.meta.block_size
    if block <= 0 or fine <= 0 or block % fine:
        raise AgentprofError(f"Mooncake block size {block} must be a positive multiple of the trace's hash block "
                             f"size ({fine} tokens)")
    factor = block // fine
    chained = is_chained(trace.meta.extra.get("hash_scheme"))
    calls = trace.spans.filter(pl.col("kind") == "model").with_row_index("_order")
    calls = calls.sort(["start_ns", "_order"], nulls_last=True)
    cols = {c: calls.get_column(c).to_list() for c in ("trace_id", "start_ns", "input_tokens", "prompt_tokens_hashed",
                                                         "output_tokens", "block_hashes")}
    stats = MooncakeStats()
    ids: dict[Any, int] = {}
    chain: dict[tuple[Any, tuple[int, ...]], int] = {}  # (previous link, block ids) -> link number
    next_id = 0
    records: list[dict[str, Any]] = []
    t_first: int | None = None
    last_ms = 0
    for i in range(calls.height):
        hashes = cols["block_hashes"][i] or []
        length = cols["input_tokens"][i]
        if length is None:
            length = cols["prompt_tokens_hashed"][i]
        if length is None and hashes:
            length = len(hashes) * fine
        if not length or length <= 0:
            stats.skipped_no_length += 1
            continue
        start = cols["start_ns"][i]
        if start is None:
            stats.calls_without_time += 1
            ms = last_ms
        else:
            if t_first is None:
                t_first = start
            ms = max(last_ms, round((start - t_first) / 1e6))
        last_ms = ms
        if not hashes:
            stats.calls_without_hashes += 1
        if chained:
            keys: list[Any] = coarsen(hashes, factor)
        else:
            keys = []
            prev: Any = ("trace", cols["trace_id"][i])  # kv-cache-tester ids may be local to one trace file
            for j in range(len(hashes) // factor):
                link = (prev, tuple(hashes[j * factor:(j + 1) * factor]))
                c = chain.get(link)
                if c is None:
                    c = chain[link] = len(chain)
                prev = c
                keys.append(("chain", c))
        n_total = -(-length // block)
        n_known = min(len(keys), length // block)
        out_ids = []
        for key in keys[:n_known]:
            v = ids.get(key)
            if v is None:
                v = ids[key] = next_id
                next_id += 1
            out_ids.append(v)
        for _ in range(n_total - n_known):
            out_ids.append(next_id)
            next_id += 1
        output = cols["output_tokens"][i]
        if output is None:
            stats.calls_without_output += 1
            output = 1
        records.append({"timestamp": ms, "input_length": int(length), "output_length": int(output),
                        "hash_ids": out_ids})
    stats.requests = len(records)
    stats.unique_blocks = next_id
    return records, stats


def write_mooncake(trace: Trace, path: str | os.PathLike[str], block: int = MOONCAKE_BLOCK) -> MooncakeStats:
    """Write the Mooncake JSONL for ``trace`` to ``path``; returns what was written."""
    records, stats = to_mooncake(trace, block)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return stats
