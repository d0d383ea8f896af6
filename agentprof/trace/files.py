"""Reading and writing trace files: agentprof JSONL (crash-safe, one record per line) and Parquet.

JSONL layout: a ``{"record": "meta", ...}`` line first, then one ``{"record": "span", ...}`` line per span as
it ends. Later ``meta`` records update earlier ones (capture appends its measured overhead at the end).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from agentprof.errors import AgentprofError, TraceFormatError
from agentprof.trace.records import records_from_spans, spans_from_records
from agentprof.trace.schema import Diagnostic, Trace, TraceMeta, validate
from agentprof.trace.writer import FORMAT_NAME, FORMAT_VERSION
from agentprof.trace.writer import JsonlTraceWriter as JsonlTraceWriter  # re-export

MAX_RECORD_BYTES = int(float(os.environ.get("AGENTPROF_MAX_RECORD_MB", "64")) * (1 << 20))
"""Longest line (one record) read (as :data:`agentprof.importers.jsonl.MAX_RECORD_BYTES`)."""
_PARQUET_META_KEY = "agentprof.meta"
_PARQUET_DIAG_KEY = "agentprof.diagnostics"


def _check_span(rec: dict[str, Any]) -> str | None:
    for key in ("trace_id", "span_id"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            return f"span record needs a non-empty string {key!r}"
    for key in ("start_ns", "end_ns"):
        v = rec.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            return f"span field {key!r} must be an integer of nanoseconds, got {type(v).__name__}"
    if not isinstance(rec.get("name"), str):
        return "span record needs a string 'name'"
    attrs = rec.get("attributes", {})
    if attrs is not None and not isinstance(attrs, dict):
        return "span field 'attributes' must be an object"
    start, end = rec.get("start_ns"), rec.get("end_ns")
    if start is not None and end is not None and end < start:
        return "span ends before it starts (end_ns < start_ns)"
    return None


def read_jsonl(path: str | os.PathLike[str], skip_bad_lines: bool = False) -> Trace:
    """Read an agentprof JSONL trace.

    A bad line raises :class:`TraceFormatError` naming the file and line, unless ``skip_bad_lines`` is set,
    in which case it is skipped and counted in the diagnostics. A last line cut short with no newline (the
    process was killed while writing) is always skipped with a diagnostic: everything before it is intact.
    """
    p = str(path)
    meta: dict[str, Any] = {}
    spans: list[dict[str, Any]] = []
    sample_recs: list[dict[str, Any]] = []
    diags: list[Diagnostic] = []
    skipped = 0
    forks: list[int] = []
    updates: dict[str, dict[str, Any]] = {}
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise AgentprofError(f"{p}: cannot read: {e.strerror or e}") from None
    lines = raw.split(b"\n")
    ends_clean = raw.endswith(b"\n") or not raw
    if lines and lines[-1] == b"":
        lines.pop()
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last_unterminated = i == len(lines) and not ends_clean
        try:
            if len(line) > MAX_RECORD_BYTES:
                raise ValueError(f"line is {len(line) >> 20} MiB, over the {MAX_RECORD_BYTES >> 20} MiB limit "
                                 "for one record (AGENTPROF_MAX_RECORD_MB raises it)")
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError(f"expected a JSON object, got {type(rec).__name__}")
        except RecursionError:
            if skip_bad_lines:
                skipped += 1
                diags.append(Diagnostic("bad_line", "JSON nested too deeply to read", p, i))
                continue
            raise TraceFormatError(p, i, "JSON nested too deeply to read; use --skip-bad-lines to load the rest") \
                from None
        except (ValueError, UnicodeDecodeError) as e:
            if last_unterminated:
                diags.append(Diagnostic("truncated_last_line", "last line cut short (process killed while writing?)", p, i))
                continue
            if skip_bad_lines:
                skipped += 1
                diags.append(Diagnostic("bad_line", f"not valid JSON: {e}", p, i))
                continue
            raise TraceFormatError(p, i, f"not valid JSON ({e}); use --skip-bad-lines to load the rest") from None
        kind = rec.get("record")
        if kind == "meta":
            if i == 1 and rec.get("format") not in (None, FORMAT_NAME):
                raise TraceFormatError(p, i, f"not an agentprof trace (format {rec.get('format')!r})")
            meta.update({k: v for k, v in rec.items() if k not in ("record", "format", "version")})
        elif kind == "span":
            problem = _check_span(rec)
            if problem:
                if skip_bad_lines:
                    skipped += 1
                    diags.append(Diagnostic("bad_line", problem, p, i))
                    continue
                raise TraceFormatError(p, i, f"{problem}; use --skip-bad-lines to load the rest")
            spans.append(rec)
        elif kind == "samples":
            sample_recs.append(rec)
        elif kind == "span_update":  # attributes learned after the span's line (a model call's fingerprint)
            sid, attrs = rec.get("span_id"), rec.get("attributes")
            if isinstance(sid, str) and isinstance(attrs, dict):
                updates.setdefault(sid, {}).update(attrs)
            else:
                diags.append(Diagnostic("bad_line", "span_update record needs 'span_id' and 'attributes'", p, i))
        elif kind == "fork":  # a forked child that wrote spans into this file left the profile
            n = rec.get("spans")
            forks.append(n if isinstance(n, int) and not isinstance(n, bool) else 0)
        else:
            if i == 1:
                raise TraceFormatError(p, i, "not an agentprof trace: first record is not {\"record\": \"meta\"} "
                                       "(for other agents' logs use `agentprof import`)")
            diags.append(Diagnostic("unknown_record", f"unknown record kind {kind!r} skipped", p, i))
    if not meta and not spans:
        raise TraceFormatError(p, None, "empty trace file")
    if skipped:
        diags.append(Diagnostic("skipped_lines", f"{skipped} bad lines skipped", p))
    meta.pop("run_root", None)  # `agentprof run`'s copy of the agent span as it started (capture.run_trace)
    for d in meta.pop("diagnostics", []) or []:
        diags.append(Diagnostic(**d) if isinstance(d, dict) else Diagnostic("note", str(d)))
    if updates:
        _merge_updates(spans, updates, diags, p)
    df = spans_from_records(spans)
    problems = validate(df)
    if problems:
        raise TraceFormatError(p, None, "invalid trace: " + "; ".join(problems))
    tm = TraceMeta.from_dict(meta)
    if forks:
        tm.extra["fork_spans"] = sum(forks)
        tm.extra["forks_finished"] = len(forks)
    if p not in tm.sources:
        tm.sources.append(p)
    return Trace(tm, df, diags, _samples(sample_recs, p))


def _samples(records: list[dict[str, Any]], path: str) -> Any:
    """Decoded stack samples (None without any); a malformed samples record is a format error."""
    if not records:
        return None
    from agentprof.trace.samples import decode

    try:
        return decode(records)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise TraceFormatError(path, None, f"bad samples record ({type(e).__name__}: {e})") from None


def _merge_updates(spans: list[dict[str, Any]], updates: dict[str, dict[str, Any]], diags: list[Diagnostic],
                   path: str) -> None:
    """Fold ``span_update`` attributes into their spans (wherever in the file either line is)."""
    for rec in spans:
        extra = updates.pop(rec["span_id"], None)
        if extra is not None:
            attrs = rec.get("attributes")
            rec["attributes"] = {**(attrs if isinstance(attrs, dict) else {}), **extra}
    if updates:
        diags.append(Diagnostic("orphan_update", f"{len(updates)} span_update record(s) for spans not in the file "
                                "(their span line was lost)", path))


def write_jsonl(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write a whole trace as agentprof JSONL (meta first, diagnostics kept in the meta record)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        meta = {"record": "meta", "format": FORMAT_NAME, "version": FORMAT_VERSION, **trace.meta.to_dict(),
                "diagnostics": [d.to_dict() for d in trace.diagnostics]}
        f.write(json.dumps(meta, separators=(",", ":"), default=str) + "\n")
        for rec in records_from_spans(trace.spans):
            f.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
    return out


def write_parquet(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write the span table as Parquet with the metadata and diagnostics in the file's key-value metadata."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    trace.spans.write_parquet(out, metadata={
        _PARQUET_META_KEY: json.dumps(trace.meta.to_dict(), default=str),
        _PARQUET_DIAG_KEY: json.dumps([d.to_dict() for d in trace.diagnostics], default=str),
    })
    return out


def read_parquet(path: str | os.PathLike[str]) -> Trace:
    p = str(path)
    try:
        kv = pl.read_parquet_metadata(p)
        df = pl.read_parquet(p)
    except Exception as e:  # polars raises several error types for non-Parquet input
        raise TraceFormatError(p, None, f"not a readable Parquet file ({e})") from None
    if _PARQUET_META_KEY not in kv:
        raise TraceFormatError(p, None, "Parquet file was not written by agentprof (no agentprof.meta)")
    problems = validate(df)
    if problems:
        raise TraceFormatError(p, None, "invalid trace: " + "; ".join(problems))
    meta = TraceMeta.from_dict(json.loads(kv[_PARQUET_META_KEY]))
    diags = [Diagnostic(**d) for d in json.loads(kv.get(_PARQUET_DIAG_KEY, "[]"))]
    return Trace(meta, df, diags)


def is_agentprof_jsonl(path: str | os.PathLike[str]) -> bool:
    """True when the file's first line is an agentprof meta record."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
        rec = json.loads(first)
    except (OSError, ValueError):
        return False
    return isinstance(rec, dict) and rec.get("record") == "meta" and rec.get("format") == FORMAT_NAME


def read(path: str | os.PathLike[str], skip_bad_lines: bool = False) -> Trace:
    """Read an agentprof trace file (``.jsonl`` or ``.parquet``)."""
    if str(path).endswith(".parquet"):
        return read_parquet(path)
    return read_jsonl(path, skip_bad_lines=skip_bad_lines)


def write(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write by suffix: ``.parquet`` or JSONL."""
    return write_parquet(trace, path) if str(path).endswith(".parquet") else write_jsonl(trace, path)


def concat(traces: Iterable[Trace]) -> Trace:
    """Merge several traces into one corpus (span tables stacked; metadata from the first, sources merged)."""
    traces = list(traces)
    if not traces:
        from agentprof.trace.schema import empty_spans

        return Trace(TraceMeta(), empty_spans())
    meta = TraceMeta.from_dict(traces[0].meta.to_dict())
    meta.sources = [s for t in traces for s in t.meta.sources]
    if len({(t.meta.tokenizer, t.meta.block_size) for t in traces}) > 1:
        meta.extra["mixed"] = sorted({f"{t.meta.source_format}/{t.meta.tokenizer}/{t.meta.block_size}" for t in traces})
    from agentprof.trace.samples import concat as concat_samples

    return Trace(meta, pl.concat([t.spans for t in traces], how="vertical"),
                 [d for t in traces for d in t.diagnostics], concat_samples([t.samples for t in traces]))
