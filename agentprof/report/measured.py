"""The "Measured on your backend" panel: load-test results (``agentprof loadtest --out FILE``) read back, checked,
and turned into rows of text once, which the loadtest command, the report's terminal view and its page all show.

The file is the interface between the two commands (the report floor does not import the load-test engine): a
JSON object starting with ``MARK``, the figures of :mod:`agentprof.loadtest.results`, and with ``--predict`` the
prediction and the error per figure. Anything else is a one-line error naming the file and what was expected.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from agentprof.errors import AgentprofError
from agentprof.report.formats import fmt_duration, fmt_pct

MARK = "agentprof_loadtest"
VERSION = 1
PCTS = ("p50", "p90", "p99")
LATENCIES = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))

_NUM, _INT, _STR = "a number or null", "a whole number", "a string"
_FIELDS: tuple[tuple[str, str], ...] = (
    ("endpoint", _STR), ("model", _STR), ("api", _STR), ("sessions", _INT), ("concurrency", _INT),
    ("calls.sent", _INT), ("calls.ok", _INT), ("calls.failed", _INT), ("retries", _INT),
    *((f"{k}.{q}", _NUM) for k, _ in LATENCIES for q in PCTS),
    ("cache_read_share", _NUM), ("trace_reuse_share", _NUM), ("tasks.completed", _INT),
    *((f"tasks.task_s.{q}", _NUM) for q in PCTS), ("cost_per_task", _NUM), ("wall_s", _NUM),
    ("prompt_tokens.drift", _NUM), ("output_tokens.asked", _INT), ("output_tokens.served", _INT),
)
_PREDICTED: tuple[tuple[str, str], ...] = (
    ("system", _STR), ("model", _STR), *((f"{k}.{q}", _NUM) for k, _ in LATENCIES for q in PCTS),
    ("cache_read_share", _NUM), ("tasks.completed", _INT), *((f"tasks.task_s.{q}", _NUM) for q in PCTS),
)


def _at(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            raise KeyError(dotted)
        d = d[part]
    return d


def _fits(v: Any, kind: str) -> bool:
    if kind == _STR:
        return isinstance(v, str)
    if isinstance(v, bool):
        return False
    if kind == _INT:
        return isinstance(v, int)
    return v is None or (isinstance(v, (int, float)) and math.isfinite(v))


def _checked(doc: Any, fields: tuple[tuple[str, str], ...], where: str, prefix: str = "") -> None:
    for key, kind in fields:
        try:
            v = _at(doc, key)
        except KeyError:
            raise AgentprofError(f"{where}: no {prefix + key!r}: expected {kind}") from None
        if not _fits(v, kind):
            raise AgentprofError(f"{where}: {prefix + key!r} is {json.dumps(v)[:40]}: expected {kind}")


def check(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` when it is a load-test result (``where`` names it in the error when it is not)."""
    expected = "the JSON that `agentprof loadtest --out FILE` (or --json) writes"
    if not isinstance(doc, dict):
        raise AgentprofError(f"{where}: not a load-test result: expected {expected}, found a JSON "
                             f"{type(doc).__name__}")
    if MARK not in doc:
        raise AgentprofError(f"{where}: not a load-test result (no {MARK!r} key): expected {expected}")
    if doc[MARK] != VERSION:
        raise AgentprofError(f"{where}: load-test result version {doc[MARK]!r}: this agentprof reads version {VERSION}")
    _checked(doc, _FIELDS, where)
    pred, err = doc.get("predicted"), doc.get("error")
    if pred is not None:
        if not isinstance(pred, dict):
            raise AgentprofError(f"{where}: 'predicted' is not an object: expected the prediction or null")
        _checked(pred, _PREDICTED, where, "predicted.")
    if err is not None and not (isinstance(err, dict) and all(_fits(v, _NUM) for v in err.values())):
        raise AgentprofError(f"{where}: 'error' is not an object of numbers: expected the error per figure or null")
    price = doc.get("price")
    if price is not None and not (isinstance(price, dict) and all(
            price.get(k) is not None and _fits(price.get(k), _NUM) for k in ("input", "cached", "output"))):
        raise AgentprofError(f"{where}: 'price' is not an object of input, cached and output prices: expected the "
                             "price per million tokens or null")
    errors = doc.get("errors") or {}
    if not isinstance(errors, dict) or not all(_fits(v, _INT) for v in errors.values()):
        raise AgentprofError(f"{where}: 'errors' is not an object of counts: expected {{error: calls}}")
    for key in ("notes", "sources"):
        v = doc.get(key) or []
        if not isinstance(v, list) or not all(isinstance(n, str) for n in v):
            raise AgentprofError(f"{where}: {key!r} is not a list of strings")
    return doc


def read(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A load-test result file, checked (:func:`check`); a one-line error when it cannot be read or is not one."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AgentprofError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise AgentprofError(f"{p}:{e.lineno}: not JSON ({e.msg}): expected a load-test result from "
                             "`agentprof loadtest --out FILE`") from None
    return check(doc, str(p))


def fmt_error(x: float | None, points: bool = False) -> str:
    """A prediction's error: relative (``+12 %``) or, for a share, in percentage points (``-1.3 pts``)."""
    if x is None:
        return "—"
    v = round(x * 100, 1 if points else 0) + 0.0  # + 0.0: no "-0"
    return f"{v:+.1f} pts" if points else f"{v:+.0f} %"


def fmt_usd(x: float | None) -> str:
    """Dollars: cents from $1 (``$1.23``), whole dollars from $1,000, three significant figures below $1
    (``$0.0123``)."""
    if x is None:
        return "—"
    if x >= 1000:
        return f"${x:,.0f}"
    if x >= 1 or x <= 0:
        return f"${x:.2f}"
    return f"${x:.{2 - math.floor(math.log10(x))}f}"


def _us(v: Any) -> str:
    """Seconds per token in microseconds, two decimals ("" where unknown)."""
    return f"{v * 1e6:.2f} µs" if isinstance(v, (int, float)) else ""


def run_view(d: dict[str, Any], label: str | None = None) -> dict[str, Any]:
    """One load test as text: what ran, the call and task counts, and per figure its measured value, the
    prediction and the error (columns ``figure, measured[, predicted, error]``), with the notes."""
    pred = d.get("predicted")
    err = d.get("error") or {}
    c, t = d["calls"], d["tasks"]
    errs = ", ".join(f"{k} ×{v}" for k, v in (d.get("errors") or {}).items())
    head = (f"{d['sessions']} session(s), {d['concurrency']} at once · model {d['model']} at {d['endpoint']} "
            f"({d['api']})")
    counts = (f"calls {c['sent']} sent, {c['ok']} ok, {c['failed']} failed{f' ({errs})' if errs else ''}; "
              f"{d['retries']} retries; tasks {t['completed']} of {d['sessions']} completed in "
              f"{fmt_duration(d['wall_s'])}")
    rows: list[dict[str, Any]] = []

    def add(name: str, m: Any, p: Any, e: Any, text: tuple[str, str, str]) -> None:
        rows.append({"figure": name, "values": [m, p, e], "cells": [name, *(text if pred else text[:1])]})

    for key, name in LATENCIES:
        for q in PCTS:
            m, p, e = d[key][q], (pred or {}).get(key, {}).get(q), err.get(f"{key}.{q}")
            add(f"{name} {q}", m, p, e, (fmt_duration(m), fmt_duration(p), fmt_error(e)))
    pt = ((pred or {}).get("tasks") or {})
    for q in PCTS:
        m, p, e = t["task_s"][q], (pt.get("task_s") or {}).get(q), err.get(f"tasks.task_s.{q}")
        add(f"task {q}", m, p, e, (fmt_duration(m), fmt_duration(p), fmt_error(e)))
    add("tasks done", t["completed"], pt.get("completed"), None,
        (f"{t['completed']} of {d['sessions']}", f"{pt.get('completed')} of {d['sessions']}", ""))
    m, p, e = d["cache_read_share"], (pred or {}).get("cache_read_share"), err.get("cache_read_share")
    add("cache read", m, p, e, (fmt_pct(m), fmt_pct(p), fmt_error(e, points=True)))
    add("trace reuse", d["trace_reuse_share"], None, None, (fmt_pct(d["trace_reuse_share"]), "", ""))
    # the server's frontend per prompt token, timed on its /tokenize, beside the catalog's figure for the system
    m, p = (d.get("prompts") or {}).get("server_frontend_s_per_token"), (pred or {}).get("frontend_s_per_token")
    e = err.get("frontend_s_per_token")
    if m is not None or p is not None:
        add("frontend/token", m, p, e, (_us(m), _us(p), fmt_error(e)))
    add("cost/task", d["cost_per_task"], None, None, (fmt_usd(d["cost_per_task"]), "", ""))
    notes: list[str] = []
    if pred:
        notes.append(f"predicted: the device model's simulation of the same sessions on {pred['system']} serving "
                     f"{pred['model']}; error = (predicted − measured) / measured, cache read in points")
    if (d.get("prompts") or {}).get("server_frontend_s_per_token") is not None:
        notes.append("frontend/token measured: the server's /tokenize (chat template and tokenizer) timed at "
                     "two prompt sizes; a chat call also parses its request")
    drift = (d.get("prompt_tokens") or {}).get("drift")
    out = d.get("output_tokens") or {}
    if isinstance(drift, (int, float)):
        notes.append(f"prompt tokens as served vs recorded: {drift * 100:+.2f} %; output tokens "
                     f"{out.get('served', 0):,} of {out.get('asked', 0):,} asked")
    price = d.get("price")
    if isinstance(price, dict) and d["cost_per_task"] is not None:
        notes.append(f"cost at ${price.get('input'):g} in, ${price.get('cached'):g} cached, "
                     f"${price.get('output'):g} out per million tokens ({price.get('source')})")
    notes += [str(n) for n in d.get("notes") or []] + [str(n) for n in (pred or {}).get("notes") or []]
    columns = ["figure", "measured"] + ([f"predicted {pred['system']}", "error"] if pred else [])
    sources = [str(s) for s in d.get("sources") or []]
    return {"label": label, "head": head, "counts": counts,
            "sources": (", ".join(sources[:8]) + (f" and {len(sources) - 8} more" if len(sources) > 8 else "")
                        if sources else None),
            "columns": columns, "rows": rows, "notes": list(dict.fromkeys(notes))}


def panel(runs: list[tuple[str, dict[str, Any]]], report_sources: list[str] | None = None) -> dict[str, Any]:
    """The report's panel for checked load-test results (``[(file name, result), ...]``); a note where a load
    test replayed none of the report's own trace files."""
    if not runs:
        return {"status": "missing", "reason": "no load test in this report (agentprof report … --loadtest FILE, "
                                                "FILE from agentprof loadtest --out FILE)"}
    views = []
    own = {Path(s).name for s in report_sources or []}
    for label, d in runs:
        v = run_view(d, label)
        theirs = {Path(s).name for s in d.get("sources") or []}
        if own and theirs and not own & theirs:
            v["notes"].insert(0, "this load test replayed other trace files than this report's")
        views.append(v)
    return {"status": "ok", "runs": views}
