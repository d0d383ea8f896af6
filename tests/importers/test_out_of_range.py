"""Numbers out of range in every importer's records (beyond 64 bits, ``Infinity``, ``NaN``, ``1e308``, negative,
times before 2000 or in the future): no traceback, no record lost; the field is read as unknown with a
diagnostic naming file, line and field, or the import stops with one error naming file and line."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentprof.errors import TraceFormatError
from agentprof.importers import load_any
from agentprof.importers.spans import EARLIEST_NS

from .test_malformed import BASES, _suffix

EXTREMES = [2**63, 2**64, -1, -(2**63) - 1, 1e308, -1e308, math.inf, -math.inf, math.nan, 1000, 4.1e9,
            4.1e12]
"""Beyond int64, negative, not finite, huge; 1000 and 4.1e9 / 4.1e12 are epoch times (s, ms) of 1970 and 2100."""
BAD_DATES = ["1970-01-01T00:00:00Z", "1999-12-31T23:59:59Z", "2999-01-01T00:00:00Z"]
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")
_KEEP_LINES = 60  # JSON Lines samples are cut to their first lines: small, fast examples


def _documents(fmt: str) -> tuple[list, bool]:
    """The sample's records (one per line for JSON Lines, else the one document; Aider's text, its header dates
    as the fields) and whether it is JSON Lines."""
    raw = BASES[fmt].read_text(encoding="utf-8")
    if fmt == "aider":
        return [{"text": raw, "dates": [m.group(2) for m in _HEADER.finditer(raw)]}], False
    if BASES[fmt].suffix == ".jsonl":
        return [json.loads(x) for x in raw.splitlines()[:_KEEP_LINES] if x.strip()], True
    return [json.loads(raw)], False


def _leaves(obj, path=()):
    """Paths of every number and ISO date string in ``obj`` (block-hash lists left out: ids, not numbers)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k not in ("hash_ids", "block_hashes"):
                yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:50]):
            yield from _leaves(v, (*path, i))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, "number"
    elif isinstance(obj, str) and _ISO.match(obj):
        yield path, "date"


def _set(obj, path, value):
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def _write(tmp_path, fmt, docs, jsonl) -> str:
    path = tmp_path / f"m{_suffix(fmt)}"
    if fmt == "aider":
        dates = iter(docs[0]["dates"])
        path.write_text(_HEADER.sub(lambda m: m.group(1) + next(dates), docs[0]["text"]), encoding="utf-8")
        return str(path)
    text = "\n".join(json.dumps(d) for d in docs) + "\n" if jsonl else json.dumps(docs[0])
    path.write_text(text, encoding="utf-8")
    return str(path)


def _import(path: str, fmt: str):
    """(trace, None) or (None, the TraceFormatError): anything else is a failure of the test."""
    try:
        return load_any(path, fmt), None
    except TraceFormatError as e:
        return None, e


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """Each format's unmutated sample: its model calls and diagnostics, for comparison."""
    out = {}
    for fmt in FORMATS:
        docs, jsonl = _documents(fmt)
        path = _write(tmp_path_factory.mktemp(fmt), fmt, docs, jsonl)
        trace, err = _import(path, fmt)
        assert err is None, err
        out[fmt] = (docs, jsonl, _model_calls(trace), len(trace.diagnostics))
    return out


FORMATS = sorted(BASES)
_HEADER = re.compile(r"^((?:TO LLM|LLM RESPONSE) )(\S+)", re.M)


def _model_calls(trace) -> int:
    return trace.spans.filter(pl.col("kind") == "model").height


def _check_ranges(trace) -> None:
    """What reached the span table is in range: times between 2000 and tomorrow, counts not negative."""
    latest = time.time_ns() + 86_400 * 10**9
    s = trace.spans
    for col in ("start_ns", "end_ns"):
        if trace.meta.source_format != "kv-cache-tester":  # its times count from the conversation start
            assert s.filter(pl.col(col).is_not_null() & ~pl.col(col).is_between(EARLIEST_NS, latest)).height == 0
    for col in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        assert s.filter(pl.col(col) < 0).height == 0, col


@settings(max_examples=18, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fmt=st.sampled_from(FORMATS), data=st.data())
def test_extreme_numbers_never_lose_a_record_silently(baselines, tmp_path_factory, fmt, data):
    docs, jsonl, calls, diags = baselines[fmt]
    docs = json.loads(json.dumps(docs))
    leaves = [(0, ("dates", j), "date") for j in range(len(docs[0]["dates"]))] if fmt == "aider" else \
        [(i, p, kind) for i, d in enumerate(docs) for p, kind in _leaves(d)]
    for _ in range(data.draw(st.integers(1, 3))):
        i, p, kind = data.draw(st.sampled_from(leaves))
        bad = data.draw(st.sampled_from(EXTREMES if kind == "number" else BAD_DATES))
        _set(docs[i], p, bad.rstrip("Z") if fmt == "aider" else bad)
    path = _write(tmp_path_factory.mktemp(fmt), fmt, docs, jsonl)
    trace, err = _import(path, fmt)
    if err is not None:  # a whole-record error names the file and the line
        assert err.path == path and err.line is not None, str(err)
        return
    _check_ranges(trace)
    assert _model_calls(trace) == calls or len(trace.diagnostics) > diags, "calls lost without a diagnostic"


def test_kv_cache_tester_request_with_three_fields_out_of_range(tmp_path):
    """The issue's case: ``in`` = 2^63, ``out`` = 2^64 and ``t`` = 1e308 in one request."""
    doc = json.loads(BASES["kv-cache-tester"].read_text())
    n = len(doc["requests"])
    doc["requests"][3].update({"in": 2**63, "out": 2**64, "t": 1e308})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    trace = load_any(str(path), "kv-cache-tester")
    assert _model_calls(trace) == n
    found = {(d.kind, d.path, d.line, d.message.split(" = ")[0]) for d in trace.diagnostics}
    assert {("out_of_range", str(path), 1, f"requests[3].{f}") for f in ("in", "out", "t")} <= found
    row = trace.spans.filter(pl.col("kind") == "model").row(3, named=True)
    assert row["input_tokens"] is None and row["output_tokens"] is None and row["start_ns"] is None


@pytest.mark.parametrize("date", BAD_DATES)
def test_aider_headers_out_of_range_are_unknown_times(tmp_path, date):
    """Aider's ``TO LLM``/``LLM RESPONSE`` headers dated 1970 or 2999: the calls are kept, their times unknown."""
    raw = BASES["aider"].read_text(encoding="utf-8")
    base = load_any(str(BASES["aider"]), "aider")
    stamp = date.rstrip("Z")
    bad = re.sub(r"^((?:TO LLM|LLM RESPONSE) )\S+", lambda m: m.group(1) + stamp, raw, count=2, flags=re.M)
    path = tmp_path / ".aider.llm.history"
    path.write_text(bad, encoding="utf-8")
    trace = load_any(str(path), "aider")
    assert _model_calls(trace) == _model_calls(base)
    _check_ranges(trace)
    noted = [d for d in trace.diagnostics if d.kind == "out_of_range"]
    assert noted and all(d.path == str(path) and d.line for d in noted)
    agent = trace.spans.filter(pl.col("kind") == "agent")
    wall = (agent["end_ns"] - agent["start_ns"]).max() / 1e9
    assert wall < (dt.datetime(2000, 1, 1) - dt.datetime(1970, 1, 1)).total_seconds()
