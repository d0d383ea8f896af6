"""Importing a partition of units where it runs, and putting imported pieces back together in the order a
single-process import produces (so a trace assembled from partitions is the same trace)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import polars as pl

from agentprof.distributed.partition import Unit
from agentprof.importers import _KVCT_CHUNK, ImportContext, _importer, _merge
from agentprof.trace.schema import Diagnostic, Trace

Piece = tuple[int, str, Trace, dict[str, int]]


@dataclass
class Hashing:
    """What the import context learnt while hashing prompts (the corpus meta names the tokenizer from it)."""

    tokenizer: str | None = None
    hashed_prompts: int = 0
    exact_models: set[str] = field(default_factory=set)
    inexact_models: set[str] = field(default_factory=set)
    notes: list[tuple[int, Diagnostic]] = field(default_factory=list)  # (unit rank, note) in import order
    unknown: dict[tuple[str, str], tuple[int, int | None]] = field(default_factory=dict)
    skipped_lines: int = 0

    def add(self, other: Hashing) -> None:
        self.tokenizer = self.tokenizer or other.tokenizer
        self.hashed_prompts += other.hashed_prompts
        self.exact_models |= other.exact_models
        self.inexact_models |= other.inexact_models
        self.notes += other.notes
        for k, (n, line) in other.unknown.items():
            m, first = self.unknown.get(k, (0, line))
            self.unknown[k] = (m + n, first)
        self.skipped_lines += other.skipped_lines

    def context(self) -> ImportContext:
        """An import context that makes :func:`agentprof.importers._merge` name the same tokenizer."""
        ctx = ImportContext()
        if self.tokenizer:
            ctx.hasher = SimpleNamespace(tokenizer=SimpleNamespace(name=self.tokenizer))  # type: ignore[assignment]
        ctx.hashed_prompts = self.hashed_prompts
        ctx.exact_models = set(self.exact_models)
        ctx.inexact_models = set(self.inexact_models)
        # the import's own notes, as one import would have flushed them at the end: in file order
        ctx.diagnostics.extend(d for _, d in sorted(self.notes, key=lambda x: x[0]))
        for k, (n, line) in self.unknown.items():
            ctx._unknown[k] = n
            ctx._unknown_first_line[k] = line
        ctx.skipped_lines = self.skipped_lines
        return ctx


def import_units(part: list[Unit], skip_bad_lines: bool = False) -> tuple[list[Piece], Hashing]:
    """Import ``part`` as :func:`agentprof.importers.load_any` would, piece by piece: ``(rank, format, trace,
    session -> unit rank)`` per import call (kv-cache-tester files in chunks, as there)."""
    ctx = ImportContext(skip_bad_lines=skip_bad_lines)
    out: list[tuple[int, str, Trace, dict[str, int]]] = []
    kvct = [u for u in part if u.fmt == "kv-cache-tester"]
    rest = [u for u in part if u.fmt != "kv-cache-tester"]
    pieces: list[tuple[str, list[Unit]]] = [("kv-cache-tester", kvct[i:i + _KVCT_CHUNK])
                                            for i in range(0, len(kvct), _KVCT_CHUNK)]
    pieces += [(u.fmt, [u]) for u in rest]
    notes: list[tuple[int, Diagnostic]] = []
    for fmt, us in pieces:
        files = [Path(f) for u in us for f in u.files]
        seen = len(ctx.diagnostics)
        t = _importer(fmt)(files, ctx)
        by_file = {f: u.rank for u in us for f in u.files}
        notes += [(by_file.get(str(d.path), us[0].rank), d) for d in ctx.diagnostics[seen:]]
        fmt_name = t.meta.source_format if fmt in ("agentprof", "otlp-json") else fmt
        sessions = t.spans.get_column("session_id").unique(maintain_order=True).to_list()
        if len(us) == 1 or len(sessions) != len(us):
            ranks = dict.fromkeys(sessions, us[0].rank)  # one unit, or no one-to-one file order to follow
        else:
            ranks = {s: u.rank for s, u in zip(sessions, us, strict=True)}
        out.append((us[0].rank, fmt_name, t, ranks))
    hashing = Hashing(ctx.hasher.tokenizer.name if ctx.hasher is not None and ctx.hashed_prompts else None,
                      ctx.hashed_prompts, set(ctx.exact_models), set(ctx.inexact_models), notes,
                      {k: (n, ctx._unknown_first_line.get(k)) for k, n in ctx._unknown.items()}, ctx.skipped_lines)
    return out, hashing


def assemble(pieces: list[Piece], given: list[str], hashing: Hashing) -> tuple[Trace, dict[str, int]]:
    """One trace from imported pieces of any partitions, in single-process import order (spans ordered by
    their session's unit, as a one-process import lists them), and each session's unit rank."""
    pieces = sorted(pieces, key=lambda p: p[0])
    trace = _merge([p[2] for p in pieces], [p[1] for p in pieces], hashing.context(), given)
    ranks: dict[str, int] = {}
    for _, _, _, m in pieces:
        ranks.update(m)
    for s in trace.spans.get_column("session_id").unique().to_list():
        if s not in ranks:  # renamed by the merge (an id clash): keeps its piece's rank
            ranks[s] = ranks.get(s.split("~")[0], 0)
    spans = (trace.spans.with_columns(pl.col("session_id").replace_strict(ranks, default=0, return_dtype=pl.Int64)
                                      .alias("_unit_rank"))
             .sort("_unit_rank", maintain_order=True).drop("_unit_rank"))
    return Trace(trace.meta, spans, trace.diagnostics, trace.samples), ranks


def partition_trace(part: list[Unit], given: list[str], skip_bad_lines: bool = False
                    ) -> tuple[Trace, dict[str, int], Hashing]:
    """A partition imported as one trace, and the import rank of each of its sessions."""
    pieces, hashing = import_units(part, skip_bad_lines)
    trace, ranks = assemble(pieces, given, hashing)
    return trace, ranks, hashing

