"""Decode slots of a disaggregated deployment as its recipe set them (``decode_slots.toml``): decode workers ×
attention ranks × the engine's max batch size. Clients beyond the slots wait for one to free before their first
token, as clients beyond the KV capacity do (docs/DEVICE_MODEL.md §2.2); a deployment not listed is bounded by
its KV capacity only.
"""

from __future__ import annotations

from functools import lru_cache

from agentprof.catalog import CATALOG_DIR
from agentprof.catalog.recipetable import Entry, lookup, read_entries

SLOTS_PATH = CATALOG_DIR / "decode_slots.toml"


@lru_cache(maxsize=1)
def _entries() -> tuple[Entry, ...]:
    return read_entries(SLOTS_PATH, "decode_slots", "slots", lambda v: None if v >= 1 else "at least 1")


def decode_slots(framework: str, model: str, hardware: str, spec: str, layout: str, isl: float,
                 osl: float, precision: str = "", conc: float | None = None) -> tuple[float | None, str]:
    """(sequences all decode workers of the deployment run at once, source), or ``(None, reason)`` when the
    recipe's limit is not listed. ``isl``/``osl`` are the nominal lengths the recipe was chosen for; ``precision``
    and ``conc`` (the benchmark's concurrency) pick the recipe where a layout ran several."""
    hit = lookup(_entries(), framework, model, hardware, spec, layout, isl, osl, precision, conc)
    return hit if hit else (None, "not listed: bounded by the KV capacity only")
