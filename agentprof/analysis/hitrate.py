"""kv-cache-tester's per-conversation cache hit rate, computed exactly as that tool does, and a stricter share.

kv-cache-tester (``trace_replay_tester.py``, ``normalize_trace``) walks the *parent* requests of a conversation
(sub-agents excluded) in order. The first request counts all its blocks as misses. Every later request walks
its block ids in order, counting each id found in the previous request's id *set* as a hit and stopping at
the first id that is not: that id counts as one miss and the blocks after it are not counted at all. A request
with no ids adds nothing. Rate = hits / counted blocks (0 when nothing was counted). Because blocks after the
first miss drop out of the denominator, this is not a token hit rate; ``strict_share`` keeps every prompt
block of every parent request in the denominator.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from agentprof.analysis.calls import CallBlocks
from agentprof.analysis.redundancy import common_prefix, occurrences, previous_rows


def walk_counts(cb: CallBlocks) -> tuple[np.ndarray, np.ndarray]:
    """Per call: (hits, counted blocks) of kv-cache-tester's walk against the previous call of its line.

    The walk's set-membership test equals the positional prefix comparison until the first position where
    the two prompts differ; only when the id found there still occurs somewhere in the previous prompt (never
    for chained or prefix-numbered ids) is that call walked exactly in Python.
    """
    n = cb.calls.height
    lengths = cb.lengths
    prev = previous_rows(cb)
    rows = np.arange(n, dtype=np.int64)
    keys = cb.prefix_keys()
    lead = common_prefix(keys, cb.offsets, rows, prev)
    hits = np.where(prev >= 0, lead, 0)
    counted = np.where(prev >= 0, np.minimum(lead + 1, lengths), lengths)
    # calls that stopped early against a non-empty previous prompt: is the stopping id in the previous set?
    probe = np.flatnonzero((prev >= 0) & (lead < lengths) & (lengths[np.maximum(prev, 0)] > 0))
    if probe.size and not cb.chained:
        stop_ids = cb.ids[cb.offsets[probe] + lead[probe]]
        occ_val, occ_row = occurrences(cb.ids, cb.offsets, stop_ids)
        found = (pl.DataFrame({"id": stop_ids, "row": prev[probe], "c": probe})
                 .join(pl.DataFrame({"id": occ_val, "row": occ_row}).unique(), on=["id", "row"], how="semi"))
        for i in found.get_column("c").to_list():
            p = int(prev[i])
            prev_set = set(cb.ids[cb.offsets[p]:cb.offsets[p + 1]].tolist())
            h = 0
            cur = cb.ids[cb.offsets[i]:cb.offsets[i + 1]].tolist()
            for x in cur:
                if x in prev_set:
                    h += 1
                else:
                    break
            hits[i] = h
            counted[i] = min(h + 1, len(cur))
    return hits.astype(np.int64), counted.astype(np.int64)


def conversation_hit_rates(cb: CallBlocks, hits: np.ndarray, counted: np.ndarray) -> pl.DataFrame:
    """One row per conversation (primary line: a top-level session with its compaction segments, sub-agents
    excluded): kv-cache-tester's ``session_hit_rate`` and ``strict_share``.

    Conversations without any block hashes get nulls (nothing to measure), not 0.
    """
    calls = cb.calls
    df = calls.select("line_id", "primary", "has_hashes").with_columns(
        pl.Series("_hits", hits), pl.Series("_counted", counted), pl.Series("_blocks", cb.lengths))
    out = (df.filter(pl.col("primary"))
           .group_by("line_id", maintain_order=True)
           .agg(pl.len().alias("parent_requests"), pl.col("has_hashes").any().alias("_any"),
                pl.col("_hits").sum().alias("hit_blocks"), pl.col("_counted").sum().alias("counted_blocks"),
                pl.col("_blocks").sum().alias("prompt_blocks")))
    return out.with_columns(
        pl.when(~pl.col("_any")).then(None)
        .when(pl.col("counted_blocks") > 0).then(pl.col("hit_blocks") / pl.col("counted_blocks"))
        .otherwise(0.0).alias("session_hit_rate"),
        pl.when(~pl.col("_any")).then(None)
        .when(pl.col("prompt_blocks") > 0).then(pl.col("hit_blocks") / pl.col("prompt_blocks"))
        .otherwise(0.0).alias("strict_share"),
    ).drop("_any")
