"""Catalog tables set per benchmark recipe (``decode_slots.toml``, ``draft_depth.toml``): each entry is keyed by
the deployment the recipe was chosen for — framework, model, hardware, speculation, layout and nominal ISL/OSL —
and carries one ``{ value, source }`` figure. An entry may narrow itself to one ``precision`` and to the benchmark
concurrencies its recipe ran (``conc``, the recipe's conc-list): one layout can run recipes of several batch sizes,
one per concurrency. One reader and one key for all of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentprof.catalog import CatalogError, read_toml
from agentprof.catalog.kvcache import _sourced

KEYS = ("framework", "model", "hardware", "spec", "layout", "isl_osl")


@dataclass(frozen=True)
class Entry:
    """One recipe's figure: its deployment key (:data:`KEYS`), value and source, and where it narrows itself, the
    precision and the benchmark concurrencies it holds for (``None``: any)."""

    key: tuple[str, ...]
    value: float
    source: str
    precision: str | None = None
    conc: frozenset[int] | None = None


def read_entries(path: Path, table: str, field: str, expect: Callable[[float], str | None]) -> tuple[Entry, ...]:
    """The ``[[table]]`` entries of ``path``; ``expect(value)`` names what was expected when the value is out of
    range (a clear error naming the entry), else ``None``."""
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
        prec = e.get("precision")
        if prec is not None and not isinstance(prec, str):
            raise CatalogError(f"{where}.precision: expected a string such as \"fp8\", got {prec!r}")
        conc = e.get("conc")
        concs = None
        if conc is not None:  # a key like isl_osl: the recipe's conc-list as text, "10, 15, 30, 60"
            parts = [c.strip() for c in conc.split(",")] if isinstance(conc, str) else []
            if not parts or not all(c.isdigit() and int(c) >= 1 for c in parts):
                raise CatalogError(f"{where}.conc: expected the benchmark concurrencies as text such as "
                                   f"\"10, 15, 30\" (whole numbers >= 1), got {conc!r}")
            concs = frozenset(int(c) for c in parts)
        out.append(Entry(tuple(str(e[k]).lower() for k in KEYS), val, src,
                         prec.lower() if prec is not None else None, concs))
    return tuple(out)


def lookup(entries: tuple[Entry, ...], framework: str, model: str, hardware: str, spec: str, layout: str,
           isl: float, osl: float, precision: str = "", conc: float | None = None) -> tuple[float, str] | None:
    """(value, source) of the entry for exactly this deployment and nominal lengths, or ``None``. Where an entry
    narrows itself to a precision or concurrencies, a given ``precision``/``conc`` must be among them (left empty,
    any); an entry narrowed to the point's concurrency and precision is preferred to one that is not."""
    key = (framework.lower(), model.lower(), hardware.lower(), (spec or "none").lower(), layout.lower(),
           f"{int(isl)}/{int(osl)}")
    best, rank = None, -1
    for e in entries:
        if e.key != key or (precision and e.precision is not None and e.precision != precision.lower()):
            continue
        if conc is not None and e.conc is not None and int(conc) not in e.conc:
            continue
        r = (conc is not None and e.conc is not None) * 2 + (bool(precision) and e.precision is not None)
        if r > rank:
            best, rank = e, r
    return (best.value, best.source) if best is not None else None
