"""Catalog tables set per benchmark recipe (``decode_slots.toml``, ``draft_depth.toml``): each entry is keyed by
the deployment the recipe was chosen for — framework, model, hardware, speculation, layout and nominal ISL/OSL —
and carries one ``{ value, source }`` figure. One reader and one key for all of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentprof.catalog import CatalogError, read_toml
from agentprof.catalog.kvcache import _sourced

KEYS = ("framework", "model", "hardware", "spec", "layout", "isl_osl")

Entry = tuple[tuple[str, ...], float, str]


def read_entries(path: Path, table: str, field: str, expect: Callable[[float], str | None]) -> tuple[Entry, ...]:
    """The ``[[table]]`` entries of ``path`` as (key, value of ``field``, source); ``expect(value)`` names what
    was expected when the value is out of range (a clear error naming the entry), else ``None``."""
    out = []
    for i, e in enumerate(read_toml(path).get(table, [])):
        where = f"{path}: {table}[{i}]"
        missing = [k for k in KEYS if not isinstance(e.get(k), str)]
        if missing:
            raise CatalogError(f"{where}: missing or non-string key(s) {', '.join(missing)}")
        val, src = _sourced(e, where, field)
        wanted = expect(val)
        if wanted:
            raise CatalogError(f"{where}.{field}: expected {wanted}, got {val:g}")
        out.append((tuple(str(e[k]).lower() for k in KEYS), val, src))
    return tuple(out)


def lookup(entries: tuple[Entry, ...], framework: str, model: str, hardware: str, spec: str, layout: str,
           isl: float, osl: float) -> tuple[float, str] | None:
    """(value, source) of the entry for exactly this deployment and nominal lengths, or ``None``."""
    key = (framework.lower(), model.lower(), hardware.lower(), (spec or "none").lower(), layout.lower(),
           f"{int(isl)}/{int(osl)}")
    for k, val, src in entries:
        if k == key:
            return val, src
    return None
