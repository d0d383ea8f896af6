"""Importers: the logs real agents leave behind (Claude Code, Codex CLI, OpenHands, mini-swe-agent, SWE-agent,
Aider, kv-cache-tester, OTLP JSON, TraceLab round traces) and agentprof's own trace files, as one :class:`~agentprof.trace.Trace`.

``load_any`` is what every command that takes ``PATH…`` uses. Formats and their mapping: ``docs/IMPORTING.md``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import polars as pl

from agentprof import __version__
from agentprof.errors import AgentprofError, TraceFormatError
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
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from agentprof.safe_text import console as safe_console

        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}", markup=False), console=safe_console(file=sys.stderr), transient=True) as prog:
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
                t = _import_checked(imp, gfmt, chunk, ctx, explicit=fmt != "auto")
                if t is None and ctx.skip_bad_lines and len(chunk) > 1 and gfmt == "kv-cache-tester":
                    # one unreadable file of independent ones: keep the others (each tried alone)
                    ctx.diagnostics = [d for d in ctx.diagnostics if not (d.kind == "bad_file" and d.line is None
                                                                          and d.path and "," in d.path)]
                    for f in chunk:
                        one = _import_checked(imp, gfmt, [f], ctx, explicit=fmt != "auto")
                        if one is not None:
                            traces.append(one)
                            formats.append(gfmt)
                    advance(len(chunk), chunk[-1].name)
                    continue
                if t is None:
                    advance(len(chunk), chunk[-1].name)
                    continue
                traces.append(t)
                formats.append(t.meta.source_format if gfmt in ("agentprof", "otlp-json") else gfmt)
                advance(len(chunk), chunk[-1].name)
    return _merge(traces, formats, ctx, [str(p) for p in given])


_SHAPE_ERRORS = (TypeError, KeyError, AttributeError, IndexError, ValueError, RecursionError, UnicodeDecodeError,
                 OverflowError)
"""What an importer raises on records of an unexpected shape (valid JSON with other types than the format's)."""


def _import_checked(imp: Callable[[list[Path], ImportContext], Trace], fmt: str, files: list[Path],
                    ctx: ImportContext, explicit: bool) -> Trace | None:
    """Run one importer with the reading layer's promise kept for every format: input it cannot read is a
    located one-line error (or, with ``--skip-bad-lines``, a skipped file with a diagnostic), never a
    traceback; and a file that yields nothing and that detection cannot place is not a silent empty import."""
    ctx.where = None
    try:
        if fmt == "aider":
            from agentprof.importers.jsonl import check_text_log

            for f in files:
                check_text_log(f, ctx, "Aider chat log")
        t = imp(files, ctx)
    except AgentprofError as e:
        if not ctx.skip_bad_lines or not isinstance(e, TraceFormatError):
            raise
        ctx.note("bad_file", f"{e.reason} (file skipped)", e.path, e.line)
        return None
    except _SHAPE_ERRORS as e:
        path, line = ctx.where if ctx.where is not None else (str(files[0]) if len(files) == 1 else
                                                              ", ".join(str(f) for f in files[:3]), None)
        reason = _reason(e, fmt, line is not None)
        if line is None and len(files) == 1:
            line = _line_of(e, files[0])
        if ctx.skip_bad_lines:
            ctx.note("bad_file", f"{reason} (file skipped)", path, line)
            return None
        raise TraceFormatError(path, line, reason + ("; use --skip-bad-lines to import the other files"
                                                     if len(files) > 1 else "")) from None
    finally:
        ctx.where = None
    if explicit and fmt != "agentprof" and t.spans.filter(pl.col("kind") != "agent").height == 0:
        blank = [f for f in files if detect_format(f) == UNKNOWN]
        if blank:
            reason = f"no {fmt} records found (detection does not recognise it as {fmt} either)"
            if ctx.skip_bad_lines:
                for f in blank:
                    ctx.note("bad_file", f"{reason} (file skipped)", str(f), None)
                return None
            raise TraceFormatError(str(blank[0]), 1, reason)
    return t


def _reason(e: BaseException, fmt: str, one_record: bool) -> str:
    from agentprof.importers.jsonl import decode_error

    if isinstance(e, (json.JSONDecodeError, UnicodeDecodeError, RecursionError)):
        return f"{decode_error(e)}; expected a {fmt} file"
    what = f"missing key {e}" if isinstance(e, KeyError) else str(e)[:200]
    return (f"not a {fmt} record of the expected shape ({type(e).__name__}: {what})" if one_record else
            f"content of an unexpected shape for {fmt} ({type(e).__name__}: {what})")


def _line_of(e: BaseException, path: Path) -> int | None:
    """The line a whole-file parse failed at, where the error tells (JSON position, byte offset, nesting)."""
    from agentprof.importers.jsonl import MAX_DOCUMENT_BYTES, nesting_line

    if isinstance(e, json.JSONDecodeError):
        return e.lineno
    if not isinstance(e, (UnicodeDecodeError, RecursionError)):
        return None
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            return None
        raw = path.read_bytes()
    except OSError:
        return None
    if isinstance(e, RecursionError):
        return nesting_line(raw)
    if isinstance(e.object, (bytes, bytearray)) and len(e.object) == len(raw):
        return raw.count(b"\n", 0, e.start) + 1
    return None


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
    if ctx.skip_bad_lines:
        spans = _drop_invalid_rows(spans, diags)
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
        capture_overhead_ns=_summed(t.meta.capture_overhead_ns for t in traces),
        capture_background_cpu_ns=_summed(t.meta.capture_background_cpu_ns for t in traces), sources=sources,
        extra=extra,
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


def _drop_invalid_rows(spans: pl.DataFrame, diags: list[Diagnostic]) -> pl.DataFrame:
    """With ``--skip-bad-lines``: spans no trace may hold (ending before they start, negative token counts)
    are dropped and counted, instead of refusing the whole import."""
    bad = pl.col("end_ns") < pl.col("start_ns")
    neg = pl.any_horizontal([pl.col(c) < 0 for c in ("input_tokens", "cache_read_tokens", "cache_write_tokens",
                                                     "output_tokens")])
    for expr, what in ((bad, "end before they start"), (neg, "have negative token counts")):
        hit = spans.filter(expr.fill_null(False))
        if hit.height:
            diags.append(Diagnostic("bad_line", f"{hit.height} span(s) {what}: dropped (first: "
                                    f"{hit.get_column('span_id')[0]})"))
            spans = spans.filter(~expr.fill_null(False))
    return spans
