"""Span records (the JSON objects in a trace file) to and from the canonical span table.

A span record is ``{"record": "span", trace_id, span_id, parent_id, name, kind, start_ns, end_ns, status,
error_type, attributes}`` where ``attributes`` holds OTel GenAI and ``agentprof.*`` attributes. Known
attributes become columns; the rest stay in the ``attributes`` JSON column, so nothing is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import polars as pl

from agentprof import semconv as sc
from agentprof.trace.schema import SCHEMA, conform

# column -> attribute names it is read from, first present wins
ATTRIBUTE_COLUMNS: dict[str, tuple[str, ...]] = {
    "session_id": (sc.SESSION_ID, sc.CONVERSATION_ID),
    "parent_session_id": (sc.PARENT_SESSION_ID,),
    "timing": (sc.TIMING,),
    "provider": (sc.PROVIDER_NAME, "gen_ai.system"),
    "model": (sc.RESPONSE_MODEL, sc.REQUEST_MODEL),
    "input_tokens": (sc.USAGE_INPUT_TOKENS,),
    "cache_read_tokens": (sc.USAGE_CACHE_READ_INPUT_TOKENS,),
    "cache_write_tokens": (sc.USAGE_CACHE_CREATION_INPUT_TOKENS,),
    "output_tokens": (sc.USAGE_OUTPUT_TOKENS,),
    "reasoning_tokens": (sc.USAGE_REASONING_OUTPUT_TOKENS,),
    "ttft_s": (sc.RESPONSE_TIME_TO_FIRST_CHUNK,),
    "stream": (sc.REQUEST_STREAM,),
    "error_type": (sc.ERROR_TYPE,),
    "cpu_ns": (sc.CPU_NS,),
    "block_hashes": (sc.PROMPT_BLOCK_HASHES,),
    "prompt_tokens_hashed": (sc.PROMPT_TOKENS,),
    "segments": (sc.PROMPT_SEGMENTS,),
}
# attributes that only feed columns and are not repeated in the ``attributes`` column
_CONSUMED = frozenset(a for names in ATTRIBUTE_COLUMNS.values() for a in names) | {sc.KIND, sc.REQUEST_MODEL}

TOP_LEVEL = ("trace_id", "span_id", "parent_id", "name", "kind", "start_ns", "end_ns", "status")


def _segments(value: Any) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return [
        {"kind": s.get("kind"), "role": s.get("role"), "tokens": s.get("tokens"), "hash": s.get("hash")}
        for s in value
    ]


def spans_from_records(records: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """Build the canonical span table from span records (attributes mapped onto columns)."""
    cols: dict[str, list[Any]] = {name: [] for name in SCHEMA}
    for r in records:
        attrs: dict[str, Any] = r.get("attributes") or {}
        for name in TOP_LEVEL:
            cols[name].append(r.get(name))
        if cols["kind"][-1] is None:
            cols["kind"][-1] = attrs.get(sc.KIND)
        if cols["status"][-1] is None:
            cols["status"][-1] = "error" if r.get("error_type") or attrs.get(sc.ERROR_TYPE) else "ok"
        for col, names in ATTRIBUTE_COLUMNS.items():
            v = r.get(col)
            if v is None:
                for a in names:
                    if a in attrs:
                        v = attrs[a]
                        break
            cols[col].append(v)
        if cols["session_id"][-1] is None:
            cols["session_id"][-1] = r.get("trace_id")
        if cols["timing"][-1] is None:
            cols["timing"][-1] = "measured" if r.get("start_ns") is not None and r.get("end_ns") is not None \
                else "unknown"
        cols["segments"][-1] = _segments(cols["segments"][-1])
        rest = {k: v for k, v in attrs.items() if k not in _CONSUMED}
        cols["attributes"].append(json.dumps(rest, sort_keys=True, default=str) if rest else None)
    return conform(pl.DataFrame(cols, schema=SCHEMA, strict=False))


def records_from_spans(df: pl.DataFrame) -> Iterator[dict[str, Any]]:
    """Inverse of :func:`spans_from_records`: span records with columns folded back into attributes."""
    col_attr = {col: names[0] for col, names in ATTRIBUTE_COLUMNS.items()}
    for row in df.iter_rows(named=True):
        attrs: dict[str, Any] = json.loads(row["attributes"]) if row["attributes"] else {}
        attrs[sc.KIND] = row["kind"]
        for col, attr in col_attr.items():
            v = row[col]
            if v is None:
                continue
            if col == "segments":
                v = json.dumps(v, separators=(",", ":"))
            attrs[attr] = v
        yield {"record": "span", **{k: row[k] for k in TOP_LEVEL}, "error_type": row["error_type"],
               "attributes": attrs}
