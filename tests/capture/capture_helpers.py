"""Helpers shared by the capture tests (trace reading)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentprof.trace.files import read

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def load(path):
    """The trace at ``path`` as (Trace, list of span dicts in start order)."""
    t = read(path)
    rows = sorted(t.spans.to_dicts(), key=lambda r: (r["start_ns"], r["end_ns"]))
    return t, rows


def raw_records(path):
    """The file's whole records; a last line with no newline (a kill mid-write, which the reader reports as
    ``truncated_last_line``) is left out."""
    *whole, _tail = Path(path).read_bytes().split(b"\n")
    return [json.loads(line) for line in whole if line.strip()]


def only_trace(folder):
    files = sorted(Path(folder).glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def attrs(row):
    return json.loads(row["attributes"]) if row["attributes"] else {}


def of_kind(rows, kind):
    return [r for r in rows if r["kind"] == kind]
