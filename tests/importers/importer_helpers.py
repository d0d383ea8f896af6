"""Independent helpers for the importer tests: sample paths, cached imports, recounting from raw files."""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path

import polars as pl

from agentprof.trace.hashing import common_prefix_blocks

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


@cache
def imported(*paths: str):
    """``load_any`` of sample paths (relative to traces/samples), cached: importing is deterministic."""
    from agentprof.importers import load_any

    return load_any([SAMPLES / p for p in paths])


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def late_prefix_shares(block_lists: list[list[int]], min_index: int = 10) -> list[float]:
    """Per late call (index > min_index): share of its blocks equal to the previous call's prefix."""
    return [common_prefix_blocks(block_lists[i - 1], block_lists[i]) / len(block_lists[i])
            for i in range(1, len(block_lists)) if i > min_index and block_lists[i]]


def median_late_share(model_spans: pl.DataFrame) -> float:
    bh = model_spans.sort("start_ns", nulls_last=True).get_column("block_hashes").to_list()
    return statistics.median(late_prefix_shares(bh))


def kinds(df: pl.DataFrame, session: str | None = None) -> dict[str, int]:
    if session is not None:
        df = df.filter(pl.col("session_id") == session)
    return dict(df.group_by("kind").len().iter_rows())
