"""What an import produced, as the numbers ``agentprof import`` prints (``--json``: one object)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl

from agentprof.trace.schema import Trace

SKIP_KINDS = ("bad_line", "bad_file")


def summarize(trace: Trace) -> dict[str, Any]:
    """Counts and token sums of an imported trace, and its diagnostics counted by kind."""
    df = trace.spans
    model = df.filter(pl.col("kind") == "model")
    sums = model.select(
        pl.col("input_tokens").sum(), pl.col("cache_read_tokens").sum(), pl.col("cache_write_tokens").sum(),
        pl.col("output_tokens").sum(), pl.col("reasoning_tokens").sum(),
    ).row(0, named=True) if model.height else {}
    diags = Counter(d.kind for d in trace.diagnostics)
    file_formats = trace.meta.extra.get("file_formats") or {}
    return {
        "format": trace.meta.source_format,
        "files": len(trace.meta.sources),
        "sessions": df.get_column("session_id").n_unique() if df.height else 0,
        "model_calls": model.height,
        "tool_calls": df.filter(pl.col("kind") == "tool").height,
        "waits": df.filter(pl.col("kind") == "wait").height,
        "input_tokens": int(sums.get("input_tokens") or 0),
        "cache_read_tokens": int(sums.get("cache_read_tokens") or 0),
        "cache_write_tokens": int(sums.get("cache_write_tokens") or 0),
        "output_tokens": int(sums.get("output_tokens") or 0),
        "reasoning_tokens": int(sums.get("reasoning_tokens") or 0),
        "prompts_hashed": model.filter(pl.col("block_hashes").is_not_null()).height,
        "tokenizer": trace.meta.tokenizer,
        "skipped": sum(diags[k] for k in SKIP_KINDS),
        "files_by_format": dict(sorted(Counter(file_formats.values()).items())),
        "file_formats": file_formats,
        "skipped_files": [{"path": d.path, "reason": d.message.removeprefix("skipped: ")}
                          for d in trace.diagnostics if d.kind == "skipped_files"],
        "diagnostics": dict(sorted(diags.items())),
    }
