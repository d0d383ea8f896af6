"""Importers: the logs real agents leave behind (Claude Code, Codex CLI, OpenHands, mini-swe-agent, SWE-agent,
Aider, kv-cache-tester, OTLP JSON, TraceLab round traces) and agentprof's own trace files, as one :class:`~agentprof.trace.Trace`.

``load_any`` is what every command that takes ``PATH…`` uses. Formats and their mapping: ``docs/IMPORTING.md``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import polars as pl

from agentprof import __version__
from agentprof.errors import TraceFormatError
from agentprof.importers.context import ImportContext
from agentprof.importers.detect import FORMATS, UNKNOWN, detect_format
from agentprof.importers.walk import expand, group
from agentprof.trace.schema import Diagnostic, Trace, TraceMeta, conform, empty_spans, validate

PathLike = str | os.PathLike[str]
_KVCT_CHUNK = 64


def _importer(fmt: str) -> Callable[[list[Path], ImportContext], Trace]:
    if fmt == "agentprof":
        from agentprof.trace.files import read

        def read_agentprof(paths: list[Path], ctx: ImportContext) -> Trace:
            t = read(paths[0], skip_bad_lines=ctx.skip_bad_lines)
            return Trace(t.meta, conform(t.spans), t.diagnostics, t.samples)

        return read_agentprof
    module = {
        "claude-code": "claude_code", "codex": "codex", "openhands": "openhands",
        "mini-swe-agent": "mini_swe_agent", "swe-agent": "swe_agent", "aider": "aider",
        "kv-cache-tester": "kv_cache_tester", "otlp-json": "otlp_json", "tracelab": "tracelab",
    }[fmt]
    from importlib import import_module

    return import_module(f"agentprof.importers.{module}").import_files


def import_path(path: PathLike, fmt: str = "auto", skip_bad_lines: bool = False) -> Trace:
    """Import one file (or one folder) of one format."""
    return load_any(path, fmt=fmt, skip_bad_lines=skip_bad_lines)


def _as_list(paths: PathLike | Sequence[PathLike]) -> list[PathLike]:
    if isinstance(paths, (str, os.PathLike)):
        return [paths]
    return list(paths)


def _progress(total: int, enabled: bool):  # -> contextmanager yielding an advance(n, label) callable
    from contextlib import contextmanager

    @contextmanager
    def bar():
        if not enabled or total < 2:
            yield lambda n, label: None
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), console=Console(file=sys.stderr), transient=True) as prog:
            task = prog.add_task("", total=total)
            yield lambda n, label: prog.update(task, advance=n, description=label)

    return bar()


def load_any(paths: PathLike | Sequence[PathLike], fmt: str = "auto", skip_bad_lines: bool = False,
             progress: bool = False) -> Trace:
    """Read agentprof traces and every foreign format, files or folders (recursively), as one trace.

    ``fmt`` is ``auto`` (detect per file) or one of :data:`FORMATS`. Bad input raises
    :class:`~agentprof.errors.TraceFormatError` naming file, line and reason; with ``skip_bad_lines`` bad
    records are skipped and counted in the diagnostics. The result is deterministic: the same input gives
    the same span table (ids, order) every time.
    """
    ctx = ImportContext(skip_bad_lines=skip_bad_lines)
    given = _as_list(paths)
    found = expand(given, fmt, ctx)
    groups = group(found)
    traces: list[Trace] = []
    formats: list[str] = []
    with _progress(len(found), progress) as advance:
        for gfmt, files in groups:
            imp = _importer(gfmt)
            chunks = [files[i:i + _KVCT_CHUNK] for i in range(0, len(files), _KVCT_CHUNK)] \
                if gfmt == "kv-cache-tester" else [files]
            for chunk in chunks:
                t = imp(chunk, ctx)
                traces.append(t)
                formats.append(t.meta.source_format if gfmt in ("agentprof", "otlp-json") else gfmt)
                advance(len(chunk), chunk[-1].name)
    return _merge(traces, formats, ctx, [str(p) for p in given])


def _merge(traces: list[Trace], formats: list[str], ctx: ImportContext, given: list[str]) -> Trace:
    """One trace from many: duplicate inputs dropped, colliding session ids made unique, meta combined."""
    diags: list[Diagnostic] = []
    frames: list[pl.DataFrame] = []
    seen_traces: set[str] = set()
    seen_sessions: set[str] = set()
    for t in traces:
        diags.extend(t.diagnostics)
        df = t.spans
        if df.height == 0:
            continue
        tids = set(df.get_column("trace_id").unique().to_list())
        dup = tids & seen_traces
        if dup:
            df = df.filter(~pl.col("trace_id").is_in(sorted(dup)))
            diags.append(Diagnostic("duplicate_input", f"{len(dup)} trace(s) imported twice (same content); "
                                    "the copy was dropped", ", ".join(t.meta.sources[:3]) or None))
            if df.height == 0:
                continue
        seen_traces |= tids
        sess = set(df.get_column("session_id").unique().to_list())
        clash = sess & seen_sessions
        if clash:
            suffix = "~" + df.get_column("trace_id")[0][:8]
            mapping = {s: s + suffix for s in clash}
            df = df.with_columns(pl.col("session_id").replace(mapping),
                                 pl.col("parent_session_id").replace(mapping))
            diags.append(Diagnostic("session_id_clash", f"session id(s) {sorted(clash)[:3]} appear in two inputs; "
                                    f"renamed with suffix {suffix}"))
            sess = {mapping.get(s, s) for s in sess}
        seen_sessions |= sess
        frames.append(df)
    spans = pl.concat(frames, how="vertical") if frames else empty_spans()
    problems = validate(spans)
    if problems:
        raise TraceFormatError(", ".join(given), None, "imported trace is invalid: " + "; ".join(problems))
    uniq = sorted(set(formats))
    first = traces[0].meta if traces else TraceMeta()
    hasher = ctx.hasher
    if hasher is not None and ctx.hashed_prompts:
        tokenizer, exact = hasher.tokenizer.name, not ctx.inexact_models
    else:
        tokenizer, exact = first.tokenizer, first.tokenizer_exact
    extra: dict = {}
    for t in traces:
        for k, v in t.meta.extra.items():
            extra.setdefault(k, v)
    schemes = {t.meta.extra.get("hash_scheme", "agentprof") for t in traces if t.spans.height}
    if len(schemes) > 1:
        extra["hash_scheme"] = "mixed"
        extra["hash_schemes"] = sorted(schemes)
    if ctx.exact_models or ctx.inexact_models:
        extra["tokenizer_exact_for"] = sorted(m for m in ctx.exact_models if m)
    extra["formats"] = uniq
    if ctx.file_formats:
        extra["file_formats"] = dict(ctx.file_formats)
    sources: list[str] = []
    for t in traces:
        sources.extend(s for s in t.meta.sources if s not in sources)
    meta = TraceMeta(
        source_format=uniq[0] if len(uniq) == 1 else "mixed", tokenizer=tokenizer, tokenizer_exact=exact,
        block_size=first.block_size, tool_version=first.tool_version or f"agentprof {__version__}",
        created=first.created, name=first.name or (Path(given[0]).name if len(given) == 1 else "import"),
        capture_overhead_ns=_summed(t.meta.capture_overhead_ns for t in traces), sources=sources, extra=extra,
    )
    if len({t.meta.block_size for t in traces}) > 1:
        diags.append(Diagnostic("mixed_block_size", "inputs use different block sizes: "
                                f"{sorted({t.meta.block_size for t in traces})}; meta.block_size is the first"))
    from agentprof.trace.samples import concat as concat_samples

    return Trace(meta, spans, diags + ctx.flush(), concat_samples([t.samples for t in traces]))


__all__ = ["FORMATS", "UNKNOWN", "ImportContext", "detect_format", "import_path", "load_any"]


def _summed(values: Iterable[int | None]) -> int | None:
    """The sum of the known values (agentprof's own capture time over several captured traces), None if none."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None
