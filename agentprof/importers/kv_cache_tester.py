"""kv-cache-tester traces (``callanjfox/kv-cache-tester`` ``traces/*.json``): anonymised Claude Code sessions
as per-request 64-token block hash ids plus timing, no text.

Mapping (see ``docs/IMPORTING.md``):

- one trace document -> one session (``id``; a document whose ``id`` an earlier document of the same import
  already took, e.g. the same file name from two trace sets, becomes ``id~<content hash>`` with a
  ``duplicate_id`` diagnostic, so the two are never walked as one conversation); a file holds one document,
  or one per line (JSON Lines, the ``cc-traces-*.jsonl`` packaging); ``_start_ts`` (the wall-clock start some
  builder versions write) is kept as an attribute of the agent span, the timeline still starts at 0; each ``type: "subagent"`` entry -> a child session (role ``subagent``)
  whose requests are timed from the sub-agent's own start ``t`` (as kv-cache-tester's replayer reads them; a
  ``subagent_clock`` diagnostic notes a ``duration_ms`` that fits the conversation's clock better). A
  sub-agent that ran inside the parent's next ``think_time`` gap (the Task tool's execution) is nested under
  that wait span;
- each request -> a ``model`` span: start = ``t`` (seconds from the conversation start; the files carry no
  absolute time, so the epoch is the conversation start), end = start + ``api_time`` (measured; without it,
  derived from the next request's start minus its ``think_time``, or unknown), ``ttft``,
  ``type`` ``"s"`` = streamed; ``in``/``out`` -> input/output tokens (cache counts are not in the format);
  a request without ``model`` (the builder's documented sub-agent layout) gets its session's model when
  ``models`` names exactly one; a sub-agent marker without ``requests`` is a sub-agent with no calls;
- ``hash_ids`` -> ``block_hashes`` as they are (``prompt_tokens_hashed`` = ``in``). With
  ``hash_id_scope: "local"`` the ids are numbered per trace, so the trace's namespace (31 bits of
  ``xxh3_64(id)``) goes into the high 32 bits: ``id == h & 0xFFFFFFFF`` and ids of different traces never
  collide; any scope other than ``"global"`` (kv-cache-tester's default reads ``"per_context"``) is treated
  the same way. ``"global"`` ids are kept unchanged;
- ``think_time`` (the time between the previous response and this request, which holds tool execution,
  permission prompts and user think time) -> a span ending at the request, classified by the evidence the
  format keeps (:func:`_classify_gaps`): a ``user_turn`` wait before a new user message, a ``tool`` span
  (``execute_tool unrecorded``) for the tools' execution after a ``tool_use`` response, an ``idle`` wait for
  such a gap of at least ``IDLE_GAP_S``.

The common case (files without sub-agents) is parsed by polars' JSON reader, with each ``hash_ids`` list read as
a delta of the previous request's (:mod:`.kvct_hash_ids`: only the new ids are parsed); files with sub-agents,
and files polars rejects (to locate the error), go through ``json``.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import xxhash

from agentprof import semconv as sc
from agentprof.errors import TraceFormatError
from agentprof.importers import plausibility
from agentprof.importers.context import ImportContext
from agentprof.importers.jsonl import MAX_RECORD_BYTES, mb, read_bytes
from agentprof.importers.kvct_hash_ids import split_hash_ids
from agentprof.importers.providers import provider_for_model
from agentprof.trace import waits
from agentprof.trace.schema import SCHEMA, Trace, TraceMeta
from agentprof.trace.usage import shown_number

FORMAT = "kv-cache-tester"
HASH_SCHEME = "kv-cache-tester"
_NS = 1_000_000_000
_SUBAGENT = re.compile(rb'"type"\s*:\s*"subagent"')

_REQUEST = pl.Struct({
    "t": pl.Float64, "type": pl.Utf8, "model": pl.Utf8, "in": pl.Int64, "out": pl.Int64,
    "hash_ids": pl.List(pl.Int64), "input_types": pl.List(pl.Utf8), "output_types": pl.List(pl.Utf8),
    "stop": pl.Utf8, "api_time": pl.Float64, "think_time": pl.Float64, "ttft": pl.Float64,
})
_FILE = {
    "id": pl.Utf8, "models": pl.List(pl.Utf8), "block_size": pl.Int64, "hash_id_scope": pl.Utf8,
    "tool_tokens": pl.Int64, "system_tokens": pl.Int64, "requests": pl.List(_REQUEST),
    "_start_ts": pl.Utf8,  # the conversation's wall-clock start (ISO 8601), in some builder versions' files
}
_FILE_ORDINALS = {**_FILE, "requests": pl.List(pl.Struct({**_REQUEST.to_schema(), "hash_ids": pl.Int64}))}
"""As :data:`_FILE`, with each ``hash_ids`` list replaced by its ordinal (:mod:`.kvct_hash_ids`)."""
# flat request table: one row per request of every session
_FLAT = {
    "sess": pl.Int64, "idx": pl.Int64, "t": pl.Float64, "type": pl.Utf8, "model": pl.Utf8, "in": pl.Int64,
    "out": pl.Int64, "hash_ids": pl.List(pl.Int64), "input_types": pl.List(pl.Utf8),
    "output_types": pl.List(pl.Utf8), "stop": pl.Utf8, "api_time": pl.Float64, "think_time": pl.Float64,
    "ttft": pl.Float64,
}


def _namespace(trace_name: str) -> int:
    return (xxhash.xxh3_64_intdigest(trace_name.encode()) & 0x7FFF_FFFF) or 1


class _Sessions:
    """Per-session facts (one row per session), gathered before the vectorized span build."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.notes: list[tuple[Any, ...]] = []  # (diagnostic kind, path, message[, line])
        self.names: set[str] = set()  # conversation ids taken by earlier documents of this import
        self.unknown: set[tuple[int, int, str]] = set()  # (session, request, field) read as unknown: out of range

    def unique_name(self, name: str, trace_id: str, path: str) -> str:
        """The document's conversation id, made unique within the import: two documents with the same ``id``
        (the same file name from two trace sets, a file given twice) stay two conversations instead of
        being walked as one; the first keeps its id, later ones get ``~`` and their content hash."""
        out = name
        if out in self.names:
            out = f"{name}~{trace_id[:8]}"
            n = 2
            while out in self.names:
                out = f"{name}~{trace_id[:8]}-{n}"
                n += 1
            self.notes.append(("duplicate_id", path, f"conversation id {name!r} already imported from another "
                               f"document: this one is {out!r}"))
        self.names.add(out)
        return out

    def add(self, **kw: Any) -> int:
        self.rows.append(kw)
        return len(self.rows) - 1


def _check_type(value: Any, kinds: tuple[type, ...], where: str, path: str, what: str) -> None:
    if value is None or isinstance(value, bool) or not isinstance(value, kinds):
        got = "missing" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}"
        raise TraceFormatError(path, None, f"{where}: expected {what}, got {got}")


def _documents(raw: bytes) -> list[tuple[int | None, bytes]]:
    """The trace documents of one file: the whole file, or one per line of a JSON Lines file (the
    ``cc-traces-*.jsonl`` packaging: one conversation object per line), with their line numbers."""
    body = raw.strip()
    nl = body.find(b"\n")
    if nl < 0:
        return [(None, raw)]
    try:
        first = json.loads(body[:nl])
    except ValueError:
        return [(None, raw)]  # a pretty-printed document (its first line is not a whole object)
    if not isinstance(first, dict) or "requests" not in first:
        return [(None, raw)]
    return [(i + 1, line) for i, line in enumerate(raw.split(b"\n")) if line.strip()]


def _python_file(path: str, raw: bytes, file_no: int, sessions: _Sessions, flat: list[dict[str, Any]],
                 trace_id: str, line: int | None = None) -> None:
    """Parse one document with ``json``, checking every field, and append its sessions and requests
    (``line``: the document's line in a JSON Lines file, for error messages)."""
    try:
        _python_doc(path, raw, file_no, sessions, flat, trace_id, line)
    except TraceFormatError as e:
        if line is None and e.line is None and b"\n" not in raw.strip():
            raise TraceFormatError(path, 1, e.reason) from None  # a document on one line: that line
        if line is None:
            raise
        raise TraceFormatError(path, line, e.reason) from None


def _python_doc(path: str, raw: bytes, file_no: int, sessions: _Sessions, flat: list[dict[str, Any]],
                trace_id: str, line: int | None) -> None:
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise TraceFormatError(path, e.lineno, f"not valid JSON ({e.msg} at column {e.colno}); "
                               "expected a kv-cache-tester trace") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("requests"), list):
        raise TraceFormatError(path, 1, "not a kv-cache-tester trace: expected an object with a 'requests' list")
    name = sessions.unique_name(doc.get("id") if isinstance(doc.get("id"), str) else _fallback_name(path, line),
                                trace_id, path)
    scope = doc.get("hash_id_scope") or "local"
    ns = 0 if scope == "global" else _namespace(name)  # only "global" ids are shared across traces

    def walk(entry: dict[str, Any], where: str, session_id: str, parent: int | None, base: float, depth: int,
             agent_id: str | None, launched_before: int | None = None) -> None:
        dur = entry.get("duration_ms") if parent is not None else None
        s = sessions.add(trace_id=trace_id, file_no=file_no, path=path, line=line, session_id=session_id,
                         parent=parent,
                         base=base, ns=ns, name=name, scope=scope, block_size=doc.get("block_size"),
                         tool_tokens=entry.get("tool_tokens"), system_tokens=entry.get("system_tokens"),
                         models=entry.get("models"), agent_id=agent_id, subagent_type=entry.get("subagent_type"),
                         depth=depth, launched_before=launched_before, offset=float(entry.get("t") or 0.0),
                         duration_ms=dur if isinstance(dur, (int, float)) and not isinstance(dur, bool) else None,
                         status=entry.get("status") if isinstance(entry.get("status"), str) else None,
                         start_ts=doc.get("_start_ts") if parent is None and isinstance(doc.get("_start_ts"), str)
                         else None)
        n_sub = 0
        n_req = 0
        for i, r in enumerate(entry.get("requests") or []):
            w = f"{where}requests[{i}]"
            if not isinstance(r, dict):
                raise TraceFormatError(path, None, f"{w}: expected an object, got {type(r).__name__}")
            if r.get("type") == "subagent":
                n_sub += 1
                _check_type(r.get("t", 0.0), (int, float), f"{w}.t", path, "seconds (a number)")
                if not isinstance(r.get("requests", []), list):  # a marker without requests has none
                    raise TraceFormatError(path, None, f"{w}.requests: expected a list of requests")
                aid = str(r.get("agent_id") or n_sub)
                if not 0 <= float(r.get("t") or 0.0) <= MAX_SECONDS:
                    sessions.notes.append(("out_of_range", path, f"{w}.t = {r.get('t')}: not a time from the "
                                           f"conversation start (0 to {MAX_SECONDS:.0e} s); read as 0", doc_line))
                    r = {**r, "t": 0.0}
                walk(r, f"{w}.", f"{session_id}/sa{n_sub}-{aid}", s, base + float(r.get("t") or 0.0), depth + 1,
                     aid, n_req)
                continue
            _check_type(r.get("t"), (int, float), f"{w}.t", path, "seconds (a number)")
            _check_type(r.get("in"), (int, float), f"{w}.in", path, "an input token count (integer)")
            if r.get("hash_ids") is None:  # the tool reads a request without block ids as one with none
                r = {**r, "hash_ids": []}
            if not isinstance(r.get("hash_ids"), list):
                raise TraceFormatError(path, None, f"{w}.hash_ids: expected a list of integer block ids")
            where_of.append(w)  # the ids themselves are checked all at once below
            for key, kinds, what in (("out", (int, float), "an integer"), ("api_time", (int, float), "a number"),
                                     ("think_time", (int, float), "a number"), ("ttft", (int, float), "a number")):
                if r.get(key) is not None:
                    _check_type(r.get(key), kinds, f"{w}.{key}", path, what)
            row = {"sess": s, "idx": n_req, **{k: r.get(k) for k in _FLAT if k not in ("sess", "idx")}}
            for key in ("in", "out"):
                v = row[key]
                if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < (1 << 63):
                    row[key] = v = int(v)
                if v is not None and (isinstance(v, float) or not -(1 << 63) <= v < (1 << 63)):
                    sessions.notes.append(("out_of_range", path, f"{w}.{key} = {shown_number(v) if isinstance(v, int) else v}: "
                                           "not a token count within 64 bits; read as unknown", doc_line))
                    sessions.unknown.add((s, n_req, key))
                    row[key] = None
            rows.append(row)
            n_req += 1

    where_of: list[str] = []
    rows: list[dict[str, Any]] = []
    doc_line = line if line is not None else (1 if b"\n" not in raw.strip() else None)
    walk(doc, "", name, None, 0.0, 0, None)
    ids = _check_ids(path, raw, [row["hash_ids"] for row in rows], where_of)
    # column by column (a list of row dicts with long id lists is several times slower to convert)
    cols: dict[str, Any] = {k: [row[k] for row in rows] for k in _FLAT if k != "hash_ids"}
    cols["hash_ids"] = ids
    flat.append(pl.DataFrame(cols, schema=_FLAT, strict=False).select(list(_FLAT)))


_BOOL_ID = re.compile(rb'"hash_ids"\s*:\s*\[[^\]]*\b(?:true|false)\b')


def _check_ids(path: str, raw: bytes, lists: list[list[Any]], where_of: list[str]) -> pl.Series:
    """The requests' ``hash_ids`` as one ``List(Int64)`` column, every id checked to be an integer that fits
    int64 in that one strict conversion (plus a byte scan for JSON booleans, which it would accept); element
    by element only to locate a failure."""
    s = None
    try:
        s = pl.Series(values=lists, dtype=pl.List(pl.Int64), strict=True)
        ok = s.explode().drop_nulls().len() == int(s.list.len().sum() or 0) and not (
            (b"true" in raw or b"false" in raw) and _BOOL_ID.search(raw))
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        ok = False
    if ok and s is not None:
        return s
    for w, ids in zip(where_of, lists, strict=True):
        if not all(isinstance(h, int) and not isinstance(h, bool) and -(1 << 63) <= h < (1 << 63) for h in ids):
            raise TraceFormatError(path, None, f"{w}.hash_ids: expected a list of integer block ids")
    if s is None:  # pragma: no cover - the loop above finds what the conversion rejected
        raise TraceFormatError(path, None, "hash_ids: expected lists of integer block ids")
    return s


def _fallback_name(path: str, line: int | None) -> str:
    return Path(path).stem if line is None else f"{Path(path).stem}-{line}"


_Item = tuple[str, bytes, int, str, "int | None"]  # path, document, file number, trace id, line (JSON Lines)


def _polars_files(items: list[_Item], sessions: _Sessions) -> pl.DataFrame | None:
    """Parse sub-agent-free documents in one polars call; ``None`` if polars rejects the batch."""
    raws = [raw if b"\n" not in raw.strip() else json.dumps(json.loads(raw)).encode() for _, raw, _, _, _ in items]
    split = split_hash_ids(raws)
    buf = b"\n".join(raws if split is None else split.docs)
    del raws
    try:
        df = pl.read_ndjson(io.BytesIO(buf), schema=_FILE if split is None else _FILE_ORDINALS)
    except Exception:  # polars raises several error types for malformed JSON or mistyped fields
        return None
    if df.height != len(items):
        return None
    meta = df.select("id", "hash_id_scope", "block_size", "tool_tokens", "system_tokens", "models",
                     "_start_ts").to_dicts()
    first_sess = len(sessions.rows)
    for (path, _raw, file_no, trace_id, line), m in zip(items, meta, strict=False):
        name = sessions.unique_name(m["id"] or _fallback_name(path, line), trace_id, path)
        scope = m["hash_id_scope"] or "local"
        sessions.add(trace_id=trace_id, file_no=file_no, path=path, line=line, session_id=name, parent=None,
                     base=0.0,
                     ns=0 if scope == "global" else _namespace(name), name=name, scope=scope,
                     block_size=m["block_size"], tool_tokens=m["tool_tokens"], system_tokens=m["system_tokens"],
                     models=m["models"], agent_id=None, subagent_type=None, depth=0, launched_before=None,
                     offset=0.0, duration_ms=None, status=None, start_ts=m["_start_ts"])
    flat = (df.select(pl.int_range(first_sess, first_sess + df.height, dtype=pl.Int64).alias("sess"), "requests")
            .explode("requests").filter(pl.col("requests").is_not_null()).unnest("requests")
            .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("sess").alias("idx")))
    if split is not None:
        flat = flat.with_columns(split.lists(flat.get_column("hash_ids")))
    return flat.select(list(_FLAT))


MAX_SECONDS = 1e8
"""Longest time (s) a request's ``t``, ``api_time``, ``think_time`` or ``ttft`` is read as (over three years)."""


def _in_range(flat: pl.DataFrame, sessions: _Sessions) -> pl.DataFrame:
    """Times that are not finite, negative or beyond :data:`MAX_SECONDS`, and negative token counts, read as
    unknown, each with an ``out_of_range`` diagnostic naming file, line and field (the request is kept)."""
    checks = {c: pl.col(c).is_nan() | (pl.col(c) < 0) | (pl.col(c) > MAX_SECONDS)
              for c in ("t", "api_time", "think_time", "ttft")}
    checks.update({c: pl.col(c) < 0 for c in ("in", "out")})
    bad = flat.select(pl.col("sess"), pl.col("idx"), *[e.fill_null(False).alias(c) for c, e in checks.items()]) \
        .filter(pl.any_horizontal(list(checks)))
    if bad.height == 0:
        return flat
    values = flat.select("sess", "idx", *checks).join(bad.select("sess", "idx"), on=["sess", "idx"])
    for row, val in zip(bad.iter_rows(named=True), values.iter_rows(named=True), strict=True):
        s = sessions.rows[row["sess"]]
        for c in checks:
            if row[c]:
                sessions.notes.append(("out_of_range", s["path"], f"requests[{row['idx']}].{c} = {val[c]}: out of "
                                       f"range ({'a token count' if c in ('in', 'out') else f'0 to {MAX_SECONDS:.0e} s'}"
                                       "); read as unknown", s.get("line") or 1))
    return flat.with_columns(pl.when(e.fill_null(False)).then(None).otherwise(pl.col(c)).alias(c)
                             for c, e in checks.items())


def _validate_flat(flat: pl.DataFrame, sessions: _Sessions) -> None:
    """Required request fields present (polars turns missing fields into nulls; fields read as unknown because
    they were out of range were noted already)."""
    for col, what in (("t", "seconds (a number)"), ("in", "an input token count")):
        bad = flat.filter(pl.col(col).is_null())
        if sessions.unknown and bad.height:
            keep = [(sess, idx, col) not in sessions.unknown for sess, idx in bad.select("sess", "idx").iter_rows()]
            bad = bad.filter(pl.Series(keep, dtype=pl.Boolean))
        if bad.height:
            row = bad.row(0, named=True)
            s = sessions.rows[row["sess"]]
            raise TraceFormatError(s["path"], s.get("line"),
                                   f"requests[{row['idx']}].{col}: expected {what}, got missing")


def import_files(paths: Sequence[str | Path], ctx: ImportContext) -> Trace:
    """Import kv-cache-tester trace files into one trace (each document its own ``trace_id``)."""
    sessions = _Sessions()
    py_flat: list[pl.DataFrame] = []
    batch: list[_Item] = []
    frames: list[pl.DataFrame] = []
    for file_no, p in enumerate(paths):
        for line, raw in _documents(read_bytes(p)):
            if len(raw) > MAX_RECORD_BYTES:
                try:
                    _refuse_oversized(str(p), raw, line)
                except TraceFormatError as e:
                    _skip_or_raise(ctx, e)
                    continue
            trace_id = xxhash.xxh3_128_hexdigest(raw)
            if b"subagent" in raw and _SUBAGENT.search(raw):
                try:
                    _python_file(str(p), raw, file_no, sessions, py_flat, trace_id, line)
                except TraceFormatError as e:
                    _skip_or_raise(ctx, e)
            else:
                batch.append((str(p), raw, file_no, trace_id, line))
    if batch:
        flat = _polars_files(batch, sessions)
        if flat is None:  # locate the problem document one by one
            ok: list[_Item] = []
            for item in batch:
                probe = _Sessions()
                try:
                    _python_file(item[0], item[1], item[2], probe, [], item[3], item[4])
                    ok.append(item)
                except TraceFormatError as e:
                    _skip_or_raise(ctx, e)
            flat = _polars_files(ok, sessions) if ok else None
            if flat is None and ok:  # numbers polars cannot hold (beyond 64 bits, NaN, Infinity): read with json
                for item in ok:
                    _python_file(item[0], item[1], item[2], sessions, py_flat, item[3], item[4])
        if flat is not None:
            frames.append(flat)
    if py_flat:  # json-path sessions were numbered first
        frames.insert(0, pl.concat(py_flat))
    flat = pl.concat(frames) if frames else pl.DataFrame(schema=_FLAT)
    _validate_flat(flat, sessions)
    flat = _in_range(flat, sessions)
    # the tool reads a request without block ids as one with none (its hit-rate walk skips it)
    flat = flat.with_columns(pl.col("hash_ids").fill_null(pl.lit([], dtype=pl.List(pl.Int64))))
    spans = _build_spans(flat, sessions)
    for kind, path, msg, *line in sessions.notes:
        ctx.note(kind, msg, path, line[0] if line else None)
    block_sizes = {s["block_size"] for s in sessions.rows if s["block_size"]}
    if len(block_sizes) > 1:
        ctx.note("mixed_block_size", f"kv-cache-tester files use block sizes {sorted(block_sizes)}; "
                 "meta.block_size is the first")
    meta = TraceMeta(source_format=FORMAT, tokenizer="provider (kv-cache-tester hash_ids)", tokenizer_exact=True,
                     block_size=min(block_sizes) if block_sizes else 64, sources=[str(p) for p in paths],
                     extra={"hash_scheme": HASH_SCHEME, "time_origin": "conversation start (epoch 0)",
                            "hash_id_namespacing": "local scope: id | (xxh3_64(trace id) & 0x7fffffff) << 32"})
    return Trace(meta, spans, [])


def _refuse_oversized(path: str, raw: bytes, line: int | None) -> None:
    """Refuse a document over the record limit before anything is parsed (real traces are about 1 MB; one of
    200 MB would take gigabytes to import), as every line-based importer refuses an over-long line."""
    at = line if line is not None else 1
    raise TraceFormatError(path, at, f"document is {mb(len(raw))}, over the {mb(MAX_RECORD_BYTES)} limit for one "
                           "kv-cache-tester trace record (AGENTPROF_MAX_RECORD_MB raises it)")


def _skip_or_raise(ctx: ImportContext, e: TraceFormatError) -> None:
    if not ctx.skip_bad_lines:
        raise TraceFormatError(e.path, e.line, f"{e.reason}; use --skip-bad-lines to import the rest")
    ctx.skipped_lines += 1
    ctx.note("bad_file", f"{e.reason} (file skipped)", e.path, e.line)


_NEST_TOLERANCE_NS = _NS  # t and think_time are rounded (to 0.1-1 s) in the files


def _launching_waits(srows: list[dict[str, Any]], w: pl.DataFrame, ext_map: dict[int, tuple[int, int]]
                     ) -> dict[int, str]:
    """Sub-agent session -> the parent's ``think`` wait it ran inside (span id).

    A sub-agent entry sits between two parent requests; the next request's ``think_time`` is the gap in which
    the parent's tool calls ran, the sub-agent (the Task tool) among them. When the sub-agent's whole extent
    lies within that gap it is nested under the wait, so the time split and replay see the sub-agent's model
    calls inside the gap instead of an opaque wait; a sub-agent that outlives the gap (launched in the
    background) stays directly under the parent's agent span.
    """
    want = {(s["parent"], s["launched_before"]) for s in srows
            if s["parent"] is not None and s.get("launched_before") is not None}
    if not want or w.height == 0:
        return {}
    gaps: dict[tuple[int, int], tuple[str, int, int]] = {}
    for sess, idx, local, start, think in w.select("sess", "idx", "local", "start_ns", "think_time").iter_rows():
        if (sess, idx) in want:
            gaps[(sess, idx)] = (f"03{local:06x}{idx:08x}", start - int(round(think * _NS)), start)
    out: dict[int, str] = {}
    for i, s in enumerate(srows):
        gap = gaps.get((s["parent"], s.get("launched_before")))
        if gap is None or i not in ext_map:
            continue
        lo, hi = ext_map[i]
        if lo >= gap[1] - _NEST_TOLERANCE_NS and hi <= gap[2] + _NEST_TOLERANCE_NS:
            out[i] = gap[0]
    return out


def _check_subagent_clock(s: dict[str, Any], span_s: float, sessions: _Sessions) -> None:
    """Note a sub-agent whose ``duration_ms`` fits its request times read on the conversation's clock better
    than on its own (the format, as kv-cache-tester reads it, times sub-agent requests from the sub-agent's
    start; the timing here follows the format and the note says it may not hold for this file)."""
    dur, offset = s.get("duration_ms"), s.get("offset") or 0.0
    if dur is None or offset <= 0:
        return
    d = dur / 1000.0
    own, conv = abs(span_s - d), abs(span_s - offset - d)
    if conv < own and own > max(2.0, 0.1 * d):
        sessions.notes.append(("subagent_clock", s["path"], (
            f"sub-agent {s['agent_id']}: its requests end {span_s:.1f} s after its start t={offset:g}, but "
            f"duration_ms says {d:.1f} s; its request times may count from the conversation start (read here "
            "from the sub-agent's start, as kv-cache-tester does)")))


def _classify_gaps(w: pl.DataFrame) -> pl.DataFrame:
    """What each ``think_time`` gap was, from the evidence the format keeps (``gap_kind``, ``gap_name``,
    ``gap_attrs``): a new user message (input of text without tool results, or after an ``end_turn``
    response) is a ``user_turn`` wait; a gap after tool calls is the tools' execution (a ``tool`` span) unless
    it reaches :data:`~agentprof.trace.waits.IDLE_GAP_S`, then ``idle`` (a permission prompt or the user away;
    the format cannot tell)."""
    types = pl.col("input_types").fill_null(pl.lit([], dtype=pl.List(pl.Utf8)))
    has_result = types.list.contains("tool_result")
    has_text = types.list.contains("text")
    user = (has_text & ~has_result) | (pl.col("prev_stop") == "end_turn")
    idle = pl.col("think_time") >= waits.IDLE_GAP_S
    cls = pl.when(user).then(pl.lit(waits.USER_TURN)).when(idle).then(pl.lit(waits.IDLE)).otherwise(pl.lit("tool"))
    w = w.with_columns(cls.alias("gap_cls"))
    attrs: list[str] = []
    memo: dict[tuple[Any, ...], str] = {}  # few distinct (class, stop, input types): encode each once
    for c, prev, it in w.select("gap_cls", "prev_stop", "input_types").iter_rows():
        key = (c, prev, tuple(it) if it else None)
        if key in memo:
            attrs.append(memo[key])
            continue
        a: dict[str, Any] = {"agentprof.gap.source": "kv-cache-tester think_time",
                             "agentprof.gap.previous_stop": prev or None, "agentprof.gap.input_types": it or None}
        if c == "tool":
            a["agentprof.tool.inferred"] = "the gap between a tool_use response and the request carrying the " \
                                           "results: tool execution (and any permission prompt under " \
                                           f"{waits.IDLE_GAP_S:g} s)"
        else:
            a[sc.WAIT_REASON] = c
            if c == waits.IDLE:
                a["agentprof.wait.threshold_s"] = waits.IDLE_GAP_S
        memo[key] = json.dumps({k: v for k, v in a.items() if v is not None}, sort_keys=True, separators=(",", ":"))
        attrs.append(memo[key])
    return w.with_columns(
        pl.when(pl.col("gap_cls") == "tool").then(pl.lit("tool")).otherwise(pl.lit("wait")).alias("gap_kind"),
        pl.when(pl.col("gap_cls") == "tool").then(pl.lit(sc.tool_span_name("unrecorded")))
        .otherwise(pl.lit("wait ") + pl.col("gap_cls")).alias("gap_name"),
        pl.Series("gap_attrs", attrs, dtype=pl.Utf8))


def _hex_ids(prefix: int, sess: Sequence[int], idx: Sequence[int]) -> list[str]:
    return [f"{prefix:02x}{s:06x}{i:08x}" for s, i in zip(sess, idx, strict=False)]


def _build_spans(flat: pl.DataFrame, sessions: _Sessions) -> pl.DataFrame:
    """Vectorized span table: one agent span per session, a model span per request, a wait per think gap."""
    srows = sessions.rows
    n_s = len(srows)
    if n_s == 0:
        return pl.DataFrame(schema=SCHEMA)
    # session-local ordinal (unique within a trace file) keeps span ids short and deterministic
    local: list[int] = []
    counters: dict[str, int] = {}
    for s in srows:
        local.append(counters.get(s["trace_id"], 0))
        counters[s["trace_id"]] = local[-1] + 1
    sess_df = pl.DataFrame({
        "sess": list(range(n_s)),
        "trace_id": [s["trace_id"] for s in srows],
        "session_id": [s["session_id"] for s in srows],
        "parent_session_id": [srows[s["parent"]]["session_id"] if s["parent"] is not None else None for s in srows],
        "base_ns": [int(round(s["base"] * _NS)) for s in srows],
        "ns": [s["ns"] << 32 for s in srows],
        "agent_span": [f"01{local[i]:06x}{0:08x}" for i in range(n_s)],
        "parent_agent_span": [f"01{local[s['parent']]:06x}{0:08x}" if s["parent"] is not None else None
                              for s in srows],
        "local": local,
        # a request without ``model`` ran on its session's model when ``models`` names exactly one
        "sole_model": [s["models"][0] if isinstance(s["models"], list) and len(s["models"]) == 1
                       and isinstance(s["models"][0], str) else None for s in srows],
    }, schema={"sess": pl.Int64, "trace_id": pl.Utf8, "session_id": pl.Utf8, "parent_session_id": pl.Utf8,
               "base_ns": pl.Int64, "ns": pl.Int64, "agent_span": pl.Utf8, "parent_agent_span": pl.Utf8,
               "local": pl.Int64, "sole_model": pl.Utf8})
    # ids that do not fit 32 bits cannot be namespaced: keep them as they are
    wide = (flat.group_by("sess").agg(pl.col("hash_ids").list.max().max().alias("mx"),
                                      pl.col("hash_ids").list.min().min().alias("mn"))
            .filter((pl.col("mx") >= 1 << 32) | (pl.col("mn") < 0)).get_column("sess").to_list())
    if wide:
        sess_df = sess_df.with_columns(pl.when(pl.col("sess").is_in(wide)).then(0).otherwise(pl.col("ns"))
                                       .alias("ns"))
        for i in wide:
            sessions.notes.append(("hash_id_range", srows[i]["path"], "hash_ids outside 0..2^32-1: local ids kept "
                                   "without the trace namespace (they may collide with other traces' ids)"))
    # sessions are numbered 0..n-1 and ``flat`` is ordered by (sess, idx): gather, no join or sort needed
    sess_idx = flat.get_column("sess")
    f = flat.with_columns(sess_df.get_column(c).gather(sess_idx).alias(c) for c in sess_df.columns if c != "sess")
    start = pl.col("base_ns") + (pl.col("t") * _NS).round().cast(pl.Int64)
    f = f.with_columns(start.alias("start_ns"), pl.coalesce("model", "sole_model").alias("model"))
    # Without ``api_time`` the response end is derived from the next request: its start minus its
    # ``think_time`` (the gap after the response). When that lands before this request's start (the format's
    # integer-second ``t`` and ``think_time`` disagree) the duration is unknown (zero-length span); with no
    # ``think_time`` the next request's start is an upper bound that may include tool and user time.
    next_start = pl.col("start_ns").shift(-1).over("sess")
    next_think = pl.col("think_time").shift(-1).over("sess")
    after_think = next_start - (next_think * _NS).round().cast(pl.Int64)
    has_api = pl.col("api_time").is_not_null()
    # the next request may be listed with an earlier ``t`` (parallel requests): then nothing bounds the end
    bound = pl.when(next_think.is_null()).then(next_start).otherwise(after_think)
    f = f.with_columns(
        pl.when(has_api).then(pl.col("start_ns") + (pl.col("api_time") * _NS).round().cast(pl.Int64))
        .when(next_start.is_null()).then(pl.col("start_ns"))
        .otherwise(pl.max_horizontal(pl.col("start_ns"), bound)).alias("end_ns"),
        pl.when(pl.col("start_ns").is_null()).then(pl.lit("unknown"))
        .when(has_api).then(pl.lit("measured"))
        .when(next_start.is_null()).then(pl.lit("unknown"))
        .when(bound > pl.col("start_ns")).then(pl.lit("derived"))
        .otherwise(pl.lit("unknown")).alias("timing"),
    )
    # a derived end later than the output tokens allow (plausibility.py) is unknown, as an unreadable one is
    limit_ns = ((plausibility.MAX_TTFT_S + pl.col("out").fill_null(-1).cast(pl.Float64)
                 / plausibility.MIN_DECODE_TOKENS_PER_S) * _NS).cast(pl.Int64)
    limit_ns = pl.when(pl.col("out").is_null()).then(int(plausibility.MAX_UNKNOWN_OUTPUT_S * _NS)).otherwise(limit_ns)
    implausible = (pl.col("timing") == "derived") & (pl.col("end_ns") - pl.col("start_ns") > limit_ns)
    n_bad = f.select(implausible.sum()).item()
    if n_bad:
        sessions.notes.append(("implausible_duration", None, f"{n_bad} request(s) without api_time whose end, "
                               "derived from the next request, comes later than their output tokens allow: "
                               "duration unknown"))
        f = f.with_columns(pl.when(implausible).then(pl.col("start_ns")).otherwise(pl.col("end_ns")).alias("end_ns"),
                           pl.when(implausible).then(pl.lit("unknown")).otherwise(pl.col("timing")).alias("timing"))
    models = f.get_column("model").unique().drop_nulls().to_list()
    prov = {m: provider_for_model(m) for m in models}
    sess_list = f.get_column("local").to_list()
    idx_list = f.get_column("idx").to_list()
    attrs: list[str | None] = []
    for it, ot, stop in zip(f.get_column("input_types").to_list(), f.get_column("output_types").to_list(),
                            f.get_column("stop").to_list(), strict=False):
        a: dict[str, Any] = {}
        if it:
            a["agentprof.kvct.input_types"] = it
        if ot:
            a["agentprof.kvct.output_types"] = ot
        if stop:
            a[sc.RESPONSE_FINISH_REASONS] = [stop]
        attrs.append(json.dumps(a, sort_keys=True, separators=(",", ":")) if a else None)
    model_spans = pl.DataFrame({
        "trace_id": f.get_column("trace_id"),
        "span_id": _hex_ids(2, sess_list, idx_list),
        "parent_id": f.get_column("agent_span"),
        "session_id": f.get_column("session_id"),
        "parent_session_id": f.get_column("parent_session_id"),
        "kind": pl.repeat("model", f.height, eager=True, dtype=pl.Utf8),
        "name": f.select(pl.when(pl.col("model").is_not_null()).then(pl.lit("chat ") + pl.col("model"))
                         .otherwise(pl.lit("chat"))).to_series(),
        "start_ns": f.get_column("start_ns"),
        "end_ns": f.get_column("end_ns"),
        "timing": f.get_column("timing"),
        "provider": f.get_column("model").replace_strict(prov, default=None, return_dtype=pl.Utf8),
        "model": f.get_column("model"),
        "input_tokens": f.get_column("in"),
        "output_tokens": f.get_column("out"),
        "ttft_s": f.get_column("ttft"),
        "stream": f.select(pl.col("type").replace_strict({"s": True, "n": False}, default=None,
                                                          return_dtype=pl.Boolean)).to_series(),
        "status": pl.repeat("ok", f.height, eager=True, dtype=pl.Utf8),
        "block_hashes": f.select(pl.when(pl.col("ns") != 0).then(pl.col("hash_ids") + pl.col("ns"))
                                 .otherwise(pl.col("hash_ids"))).to_series(),
        "prompt_tokens_hashed": f.get_column("in"),
        "attributes": pl.Series(attrs, dtype=pl.Utf8),
        "_sess": f.get_column("sess"), "_order": (f.get_column("idx") * 2 + 1),
    })
    w = _classify_gaps(f.drop("hash_ids").with_columns(pl.col("stop").shift(1).over("sess").alias("prev_stop"))
                       .filter(pl.col("think_time").is_not_null() & (pl.col("think_time") > 0)
                               & pl.col("start_ns").is_not_null()))
    wait_spans = pl.DataFrame({
        "trace_id": w.get_column("trace_id"),
        "span_id": _hex_ids(3, w.get_column("local").to_list(), w.get_column("idx").to_list()),
        "parent_id": w.get_column("agent_span"),
        "session_id": w.get_column("session_id"),
        "parent_session_id": w.get_column("parent_session_id"),
        "kind": w.get_column("gap_kind"),
        "name": w.get_column("gap_name"),
        "start_ns": w.get_column("start_ns") - (w.get_column("think_time") * _NS).round().cast(pl.Int64),
        "end_ns": w.get_column("start_ns"),
        "timing": pl.repeat("measured", w.height, eager=True, dtype=pl.Utf8),
        "status": pl.repeat("ok", w.height, eager=True, dtype=pl.Utf8),
        "attributes": w.get_column("gap_attrs"),
        "_sess": w.get_column("sess"), "_order": w.get_column("idx") * 2,
    })
    ext = (pl.concat([model_spans.select("_sess", "start_ns", "end_ns"), wait_spans.select("_sess", "start_ns",
                                                                                          "end_ns")])
           .group_by("_sess").agg(pl.col("start_ns").min().alias("lo"),
                                  pl.max_horizontal(pl.col("end_ns").max(), pl.col("start_ns").max()).alias("hi")))
    ext_map = {r[0]: (r[1], r[2]) for r in ext.iter_rows()}
    # a parent session's extent includes its sub-agents
    for i in sorted(range(n_s), key=lambda i: -srows[i]["depth"]):
        p = srows[i]["parent"]
        if p is not None and i in ext_map:
            lo, hi = ext_map[i]
            plo, phi = ext_map.get(p, (lo, hi))
            ext_map[p] = (min(plo, lo), max(phi, hi))
    launcher = _launching_waits(srows, w, ext_map)
    agent_rows = []
    for i, s in enumerate(srows):
        lo, hi = ext_map.get(i, (None, None))
        base_ns = int(round(s["base"] * _NS))
        a = {sc.SESSION_ROLE: "subagent" if s["parent"] is not None else "main",
             "agentprof.prompt.tool_tokens": s["tool_tokens"], "agentprof.prompt.system_tokens": s["system_tokens"],
             "agentprof.kvct.models": s["models"], "agentprof.kvct.hash_id_scope": s["scope"],
             sc.AGENT_ID: s["agent_id"], "agentprof.subagent.type": s["subagent_type"],
             "agentprof.kvct.subagent_status": s.get("status"), "agentprof.kvct.duration_ms": s.get("duration_ms"),
             "agentprof.kvct.start_ts": s.get("start_ts"),
             "agentprof.source.path": s["path"]}
        if s["parent"] is not None and hi is not None:
            _check_subagent_clock(s, (hi - base_ns) / _NS, sessions)
        agent_rows.append({
            "trace_id": s["trace_id"], "span_id": f"01{local[i]:06x}{0:08x}",
            "parent_id": launcher.get(i) or (f"01{local[s['parent']]:06x}{0:08x}" if s["parent"] is not None
                                             else None),
            "session_id": s["session_id"],
            "parent_session_id": srows[s["parent"]]["session_id"] if s["parent"] is not None else None,
            "kind": "agent", "name": sc.agent_span_name("claude-code" if s["parent"] is None else
                                                        (s["subagent_type"] or "subagent")),
            "start_ns": min(base_ns, lo) if lo is not None else base_ns, "end_ns": hi if hi is not None else base_ns,
            "timing": "measured", "status": "ok",
            "attributes": json.dumps({k: v for k, v in a.items() if v is not None}, sort_keys=True,
                                     separators=(",", ":")),
            "_sess": i, "_order": -1,
        })
    agent_spans = pl.DataFrame(agent_rows, schema={**{k: SCHEMA[k] for k in agent_rows[0] if k in SCHEMA},
                                                   "_sess": pl.Int64, "_order": pl.Int64})
    # row order: every agent span, then the model and wait spans in request order (deterministic, no sort)
    out = pl.concat([agent_spans, model_spans, wait_spans], how="diagonal_relaxed")
    cols = [pl.col(c).cast(t) if c in out.columns else pl.lit(None, dtype=t).alias(c) for c, t in SCHEMA.items()]
    return out.select(cols)
