"""What ``agentprof collect`` has received, and the session files it writes from it.

Every request is read into records once, when it is first flushed (:func:`.otlp_json.decode_request`);
shortly after data arrives, the records are linked with the OTLP importer's mapping
(:func:`.otlp_json.map_decoded`): a span's session can depend on spans that arrive later (its parent names the
session; children are usually exported first), so each group of records that new data reached is linked again
whole (:mod:`.groups`), which keeps the files equal to what ``agentprof import`` makes of the same data. Each
session (with its sub-agent sessions) is one agentprof JSONL file, written only when its spans or diagnostics
changed and replaced atomically, so a reader never sees half a file and a killed collector leaves the last
complete version.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from agentprof.collect.groups import Groups
from agentprof.importers.context import ImportContext
from agentprof.importers.otlp_events import GENERIC
from agentprof.importers.otlp_json import Decoded, decode_request, map_decoded, metrics_note
from agentprof.trace.files import write_jsonl
from agentprof.trace.schema import Diagnostic, Trace, TraceMeta

SOURCE = "agentprof collect"
"""The ``path`` the mapping's diagnostics name (no file: the receiver)."""
DEBOUNCE_S = 0.2
"""How long the writer lets a burst of requests gather before mapping and writing."""


@dataclass
class SessionFile:
    """One written session file."""

    session_id: str
    path: Path
    spans: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    digest: str = ""
    written: tuple[pl.DataFrame, list[Diagnostic]] | None = None  # what the file holds, to skip rewriting it


@dataclass
class Store:
    """Received requests and the session files written from them (thread-safe)."""

    out: Path
    requests: list[tuple[int | None, dict[str, Any]]] = field(default_factory=list)
    received: Counter = field(default_factory=Counter)
    files: dict[str, SessionFile] = field(default_factory=dict)
    started: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._dirty = threading.Event()
        self._taken: set[Path] = set()
        self._decoded: list[Decoded] = []  # requests[:len(_decoded)], read into records
        self._groups = Groups(SOURCE)
        self._whole = False  # link everything on every flush (agentprof's own spans, or a bad logs request, came)

    def add(self, signal: str, doc: dict[str, Any], items: int) -> None:
        """Keep one decoded request; the writer thread maps and writes it soon."""
        with self._lock:
            self.requests.append((len(self.requests) + 1, doc))
            self.received[signal] += items
        self._dirty.set()

    def run_writer(self, stop: threading.Event) -> None:
        """Write the session files shortly after data arrives, until ``stop`` is set."""
        while not stop.is_set():
            if self._dirty.wait(0.5) and not stop.is_set():
                time.sleep(DEBOUNCE_S)
                self.flush()

    def flush(self) -> list[SessionFile]:
        """Read the requests that arrived since the last flush, link them with all the earlier ones and write the
        sessions whose file changed; returns every file."""
        with self._write_lock:
            self._dirty.clear()
            with self._lock:
                new = self.requests[len(self._decoded):]
            if not new:  # nothing arrived since the files were written from all of it
                return list(self.files.values())
            try:
                fresh = [decode_request(line, doc) for line, doc in new]
                self._decoded.extend(fresh)
                # own spans come back unchanged with their trace's meta, and a malformed logs request drops every
                # event: both decided over all the data, so linked whole
                self._whole = self._whole or any(d.own or d.logs_error is not None for d in fresh)
                linked = self._link_whole() if self._whole else self._link_groups(fresh)
            except Exception as e:  # the receiver keeps running; the files keep their last version
                self.errors.append(f"{type(e).__name__}: {e}")
                self._whole = True  # a group left half linked: from now on link everything, every time
                return list(self.files.values())
            sessions = sorted(((root, spans, diags) for spans, diags, parts in linked for root, spans in parts),
                              key=lambda x: x[0])
            seen: set[str] = set()
            for root, spans, diags in sessions:
                seen.add(root)
                self._write(root, spans, diags)
            for gone in set(self.files) - seen:  # its spans now belong to another session (a parent arrived)
                f = self.files.pop(gone)
                self._taken.discard(f.path)
                try:
                    f.path.unlink()
                except OSError:
                    pass
            return list(self.files.values())

    def _link_whole(self) -> list[tuple[pl.DataFrame, list[Diagnostic], list[tuple[str, pl.DataFrame]]]]:
        """Every record linked at once, as ``agentprof import`` does."""
        ctx = ImportContext(skip_bad_lines=True)
        trace = map_decoded(self._decoded, ctx, SOURCE)
        return [(trace.spans, trace.diagnostics + ctx.flush(), _by_root_session(trace.spans))]

    def _link_groups(self, fresh: list[Decoded]
                     ) -> list[tuple[pl.DataFrame, list[Diagnostic], list[tuple[str, pl.DataFrame]]]]:
        """Only the groups ``fresh`` reached linked again; every group's sessions with the diagnostics linking
        everything would give them (the bad requests and the metrics count, which concern every file, around
        the group's own)."""
        n = len(self._groups)
        self._groups.add(fresh)
        ctx = ImportContext(skip_bad_lines=True)
        points = 0
        for d in self._decoded:
            if d.bad is not None:
                ctx.bad(SOURCE, d.line, d.bad)
            points += d.metric_points
        head = ([metrics_note(points, SOURCE)] if points else []) + list(ctx.diagnostics)
        tail = ctx.flush()[len(ctx.diagnostics):]
        out = []
        for g in self._groups.link(n):
            if g.sessions is None:
                g.sessions = _by_root_session(g.spans)
            out.append((g.spans, head + g.diagnostics + tail, g.sessions))
        return out

    def _write(self, root: str, spans: pl.DataFrame, diags: list[Diagnostic]) -> None:
        f = self.files.get(root)
        if f is None:
            f = self.files[root] = SessionFile(root, self._new_path(root))
        ids = set(spans.get_column("span_id").to_list())
        mine = [d for d in diags if d.span_id in ids or (d.span_id is None and d.kind != "otlp_unmapped")]
        generic = spans.filter(pl.col("attributes").str.contains(GENERIC, literal=True)).height
        if generic:
            mine.append(Diagnostic("otlp_unmapped", f"{generic} record(s) with no agent, model or tool meaning "
                                   "kept as generic spans", SOURCE))
        if f.written is not None and f.written[1] == mine and f.written[0].equals(spans):
            return  # the same spans and diagnostics: the same bytes
        meta = TraceMeta(source_format="otlp-json", name=root, created=self.started,
                         extra={"collected_by": SOURCE})
        from agentprof import __version__

        meta.tool_version = __version__
        tmp = f.path.with_name(f".{f.path.name}.tmp")
        write_jsonl(Trace(meta, spans, mine), tmp)
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        f.written = (spans, mine)
        if digest == f.digest:
            tmp.unlink()
            return
        os.replace(tmp, f.path)
        f.digest, f.spans = digest, spans.height
        kinds = spans.get_column("kind").to_list()
        f.model_calls, f.tool_calls = kinds.count("model"), kinds.count("tool")

    def _new_path(self, session: str) -> Path:
        """``<out>/<session>.jsonl``; ``-2``, ``-3``… when another file (an earlier run's) has that name."""
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", session).strip("._")[:96] or "session"
        n = 1
        while True:
            p = self.out / (f"{stem}.jsonl" if n == 1 else f"{stem}-{n}.jsonl")
            if p not in self._taken and not p.exists():
                self._taken.add(p)
                return p
            n += 1


def _by_root_session(spans: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """The span table split by top-level session (a sub-agent's session goes with the session it belongs to)."""
    pairs = spans.select("session_id", "parent_session_id").unique().iter_rows()
    parent = {s: p for s, p in pairs if p is not None and p != s}

    def root(s: str) -> str:
        seen = {s}
        while s in parent and parent[s] not in seen:
            s = parent[s]
            seen.add(s)
        return s

    roots = {s: root(s) for s in spans.get_column("session_id").unique().to_list()}
    keyed = spans.with_columns(pl.col("session_id").replace_strict(roots, default=pl.col("session_id"))
                               .alias("_root"))
    return [(r, keyed.filter(pl.col("_root") == r).drop("_root")) for r in sorted(set(roots.values()))]
