"""Decode slots of a disaggregated deployment as its recipe set them (``decode_slots.toml``): decode workers ×
attention ranks × the engine's max batch size. Clients beyond the slots wait for one to free before their first
token, as clients beyond the KV capacity do (docs/DEVICE_MODEL.md §2.2); a deployment not listed is bounded by
its KV capacity only.
"""

from __future__ import annotations

from functools import lru_cache

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.kvcache import _sourced

SLOTS_PATH = CATALOG_DIR / "decode_slots.toml"
KEYS = ("framework", "model", "hardware", "spec", "layout", "isl_osl")


@lru_cache(maxsize=1)
def _entries() -> tuple[tuple[tuple[str, ...], float, str], ...]:
    out = []
    for i, e in enumerate(read_toml(SLOTS_PATH).get("decode_slots", [])):
        where = f"{SLOTS_PATH}: decode_slots[{i}]"
        missing = [k for k in KEYS if not isinstance(e.get(k), str)]
        if missing:
            raise CatalogError(f"{where}: missing or non-string key(s) {', '.join(missing)}")
        val, src = _sourced(e, where, "slots")
        if not val >= 1:
            raise CatalogError(f"{where}.slots: expected at least 1, got {val:g}")
        out.append((tuple(str(e[k]).lower() for k in KEYS), val, src))
    return tuple(out)


def decode_slots(framework: str, model: str, hardware: str, spec: str, layout: str, isl: float,
                 osl: float) -> tuple[float | None, str]:
    """(sequences all decode workers of the deployment run at once, source), or ``(None, reason)`` when the
    recipe's limit is not listed. ``isl``/``osl`` are the nominal lengths the recipe was chosen for."""
    key = (framework.lower(), model.lower(), hardware.lower(), (spec or "none").lower(), layout.lower(),
           f"{int(isl)}/{int(osl)}")
    for k, val, src in _entries():
        if k == key:
            return val, src
    return None, "not listed: bounded by the KV capacity only"
