"""The collector's records in groups that cannot share a session, so that a flush links again only the groups new
data reached.

Linking (:func:`agentprof.importers.otlp_json.map_decoded`) joins a span to its trace's other spans (parent,
session, sub-agents, usage summed below it) and a session's records to each other (its agent span, its events in
time order); it joins nothing else. Records are therefore grouped by what they share: a trace id, a session id a
span names, or a log record's session. Linking one group alone gives its sessions exactly the spans and
diagnostics that linking everything gives them; two groups that new data joins become one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from agentprof.importers.context import ImportContext
from agentprof.importers.otlp_json import SPAN_SESSION_KEYS, Decoded, map_decoded
from agentprof.trace.schema import Diagnostic

Key = tuple[str, str]


def _span_keys(rec: dict[str, Any]) -> list[Key]:
    """What a span may share a session through: its trace, and any session id it names."""
    tid = str(rec["trace_id"])
    a = rec["attributes"]
    return [("t", tid), ("s", tid)] + [("s", str(a[k])) for k in SPAN_SESSION_KEYS if a.get(k)]


@dataclass
class Linked:
    """One group linked: its span table and the diagnostics linking it gave."""

    spans: pl.DataFrame
    diagnostics: list[Diagnostic]
    sessions: list[tuple[str, pl.DataFrame]] | None = None  # split by top-level session, once


@dataclass
class Groups:
    """Every foreign span and log record received, with the groups they fall in (a union-find over keys)."""

    path: str
    _parent: dict[Key, Key] = field(default_factory=dict)
    _items: list[tuple[Key, str, Any]] = field(default_factory=list)  # (first key, "span" | "log", record)
    _linked: dict[Key, Linked] = field(default_factory=dict)

    def _find(self, k: Key) -> Key:
        root = k
        while self._parent.setdefault(root, root) != root:
            root = self._parent[root]
        while self._parent[k] != root:  # path compression
            self._parent[k], k = root, self._parent[k]
        return root

    def _union(self, keys: list[Key]) -> Key:
        roots = [self._find(k) for k in keys]
        for r in roots[1:]:
            self._parent[r] = roots[0]
        return roots[0]

    def add(self, decoded: Iterable[Decoded]) -> None:
        """Take the spans and log records of newly decoded requests (not agentprof's own spans, which
        :class:`~agentprof.collect.store.Store` links with everything)."""
        for d in decoded:
            for item in d.foreign:
                keys = _span_keys(item[0])
                self._union(keys)
                self._items.append((keys[0], "span", item))
            for log in d.logs:
                key = ("s", str(log.session))
                self._find(key)
                self._items.append((key, "log", log))

    def link(self, new_from: int) -> list[Linked]:
        """Link again every group holding a record from ``_items[new_from:]``; returns every group, linked."""
        dirty = {self._find(k) for k, _, _ in self._items[new_from:]}
        members: dict[Key, tuple[list[Any], list[Any]]] = {}
        for k, kind, item in self._items:
            root = self._find(k)
            if root in dirty:
                spans, logs = members.setdefault(root, ([], []))
                (spans if kind == "span" else logs).append(item)
        linked = {r: g for r, g in self._linked.items() if self._find(r) == r and r not in dirty}
        for root, (spans, logs) in members.items():
            ctx = ImportContext(skip_bad_lines=True)
            trace = map_decoded([Decoded(None, foreign=spans, logs=logs)], ctx, self.path)
            linked[root] = Linked(trace.spans, trace.diagnostics + ctx.flush())
        self._linked = linked
        return list(linked.values())

    def __len__(self) -> int:
        return len(self._items)
