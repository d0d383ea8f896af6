"""Per-call prompt redundancy: how much of each prompt repeats the previous call's, or any earlier call's.

All figures are computed over the block hashes (``meta.block_size`` tokens each), vectorized over every call
of the corpus at once:

- ``prefix_blocks_prev``: leading blocks equal to the previous call's prompt (same conversation line: the
  session, continued across compactions);
- ``best_blocks``: leading blocks equal to *some* earlier call of the line (the longest reusable prefix,
  what a prefix cache holding every earlier prompt could serve);
- shares divide ``blocks × block_size`` by the call's ``prompt_tokens`` (the unhashed tail counts as new);
- ``provider_cache_read_share`` = ``cache_read_tokens / input_tokens`` (OTel meaning: input includes cached);
- ``reusable_tokens`` (best share × provider input tokens, so token counts from different tokenizers stay
  comparable), ``cached_tokens`` (provider cache reads) and ``gap_tokens`` = reusable − cached.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from agentprof.analysis.calls import CallBlocks


def previous_rows(cb: CallBlocks) -> np.ndarray:
    """Row number of the previous call of the same conversation line (-1 for a line's first call)."""
    n = cb.calls.height
    prev = np.arange(n, dtype=np.int64) - 1
    if n:
        idx = cb.calls.get_column("line_index").to_numpy()
        prev[idx == 0] = -1
    return prev


def common_prefix(keys: np.ndarray, offsets: np.ndarray, rows: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Leading blocks that call ``rows[i]`` shares with call ``other[i]`` (``-1`` in ``other`` gives 0).

    ``keys`` must be prefix keys (equal at position j ⇒ equal at every earlier position), so the shared
    length is found by a binary search run for all pairs at once: about log2(longest prompt) numpy steps.
    """
    rows = np.asarray(rows, dtype=np.int64)
    other = np.asarray(other, dtype=np.int64)
    lengths = np.diff(offsets)
    valid = other >= 0
    hi = np.where(valid, np.minimum(lengths[rows], lengths[np.maximum(other, 0)]), 0)
    lo = np.zeros_like(hi)
    a0 = offsets[rows]
    b0 = offsets[np.maximum(other, 0)]
    while True:
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi + 1) // 2
        idx = np.flatnonzero(active)
        m = mid[idx]
        eq = keys[a0[idx] + m - 1] == keys[b0[idx] + m - 1]
        lo[idx] = np.where(eq, m, lo[idx])
        hi[idx] = np.where(eq, hi[idx], m - 1)
    return lo


def occurrences(values: np.ndarray, offsets: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every place where one of ``wanted`` occurs in the flat array: (value, call row). One hash-set scan."""
    if values.size == 0 or wanted.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    mask = pl.Series(values).is_in(pl.Series(np.unique(wanted)).implode()).to_numpy()
    where = np.flatnonzero(mask)
    rows = np.searchsorted(offsets, where, side="right") - 1
    return values[where], rows


def best_blocks(cb: CallBlocks, keys: np.ndarray, prev: np.ndarray, prev_blocks: np.ndarray) -> np.ndarray:
    """Leading blocks each call shares with the best earlier call of its line.

    It is the previous call's share unless the call's key right after that share occurred in an earlier call
    of the line (a longer prefix was seen before); only those calls are compared with every earlier call.
    """
    n = cb.calls.height
    lengths = cb.lengths
    best = np.where(prev >= 0, prev_blocks, 0)
    line = cb.calls.get_column("line_id").rank("dense").cast(pl.Int64).to_numpy()
    # an earlier call can beat the previous one only if it was longer than the previous share
    longest_before = (pl.DataFrame({"line": line, "n": lengths}).select(
        pl.col("n").shift(1).cum_max().over("line").fill_null(0)).to_series().to_numpy())
    cand = np.flatnonzero((prev >= 0) & (prev_blocks < lengths) & (longest_before > prev_blocks))
    if cand.size == 0:
        return best
    probe = keys[cb.offsets[cand] + prev_blocks[cand]]
    occ_val, occ_row = occurrences(keys, cb.offsets, probe)
    first = (pl.DataFrame({"k": occ_val, "line": line[occ_row], "row": occ_row})
             .group_by("k", "line").agg(pl.col("row").min()))
    probes = pl.DataFrame({"k": probe, "line": line[cand], "c": cand})
    seen = probes.join(first, on=["k", "line"], how="inner").filter(pl.col("row") < pl.col("c"))
    flagged = np.sort(seen.get_column("c").to_numpy())
    if flagged.size == 0:
        return best
    # rows of a line are contiguous: compare each flagged call with every earlier call of its line
    line_start = np.zeros(n, dtype=np.int64)
    idx = cb.calls.get_column("line_index").to_numpy()
    line_start = np.arange(n) - idx
    counts = flagged - line_start[flagged]
    c_rows = np.repeat(flagged, counts)
    e_rows = np.concatenate([np.arange(line_start[c], c) for c in flagged.tolist()])
    shared = common_prefix(keys, cb.offsets, c_rows, e_rows)
    best[flagged] = np.maximum.reduceat(shared, np.concatenate([[0], np.cumsum(counts)[:-1]]))
    return best


def redundancy_columns(cb: CallBlocks) -> pl.DataFrame:
    """The per-call redundancy columns (same row order as ``cb.calls``)."""
    calls = cb.calls
    n = calls.height
    keys = cb.prefix_keys()
    prev = previous_rows(cb)
    rows = np.arange(n, dtype=np.int64)
    prev_blocks = common_prefix(keys, cb.offsets, rows, prev)
    best = best_blocks(cb, keys, prev, prev_blocks)
    first = prev < 0
    bs = cb.block_size
    df = calls.select("prompt_tokens", "has_hashes", "input_tokens", "cache_read_tokens").with_columns(
        pl.Series("prefix_blocks_prev", prev_blocks, dtype=pl.Int64),
        pl.Series("best_blocks", best, dtype=pl.Int64),
        pl.Series("_first", first),
    )
    usable = pl.col("has_hashes") & ~pl.col("_first") & (pl.col("prompt_tokens") > 0)

    def share(col: str) -> pl.Expr:
        return (pl.when(usable).then(pl.min_horizontal(pl.col(col) * bs / pl.col("prompt_tokens"), pl.lit(1.0)))
                .otherwise(None))

    df = df.with_columns(
        pl.when(pl.col("has_hashes") & ~pl.col("_first")).then(pl.col("prefix_blocks_prev")).otherwise(None)
        .alias("prefix_blocks_prev"),
        pl.when(pl.col("has_hashes") & ~pl.col("_first")).then(pl.col("best_blocks")).otherwise(None)
        .alias("best_blocks"),
        share("prefix_blocks_prev").alias("prefix_reuse_prev"),
        share("best_blocks").alias("best_reuse"),
        pl.when(pl.col("input_tokens") > 0).then(pl.col("cache_read_tokens") / pl.col("input_tokens"))
        .otherwise(None).alias("provider_cache_read_share"),
    )
    df = df.with_columns(
        pl.when(pl.col("best_reuse").is_null()).then(None)
        .when(pl.col("input_tokens") > 0).then((pl.col("best_reuse") * pl.col("input_tokens")).round().cast(pl.Int64))
        .otherwise(pl.min_horizontal(pl.col("best_blocks") * bs, pl.col("prompt_tokens")))
        .alias("reusable_tokens"),
        pl.col("cache_read_tokens").alias("cached_tokens"),
    ).with_columns((pl.col("reusable_tokens") - pl.col("cached_tokens")).alias("gap_tokens"))
    return df.select("prefix_blocks_prev", "prefix_reuse_prev", "best_blocks", "best_reuse",
                     "provider_cache_read_share", "reusable_tokens", "cached_tokens", "gap_tokens")
