"""Draft depth of an MTP deployment as its recipe set it (``draft_depth.toml``): the tokens each sequence drafts
per decode step, which the step then verifies along with the sequence's own, so its FLOPs and collectives carry
1 + depth tokens per sequence (docs/DEVICE_MODEL.md §2.1). A deployment not listed counts one token per sequence.
"""

from __future__ import annotations

from functools import lru_cache

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.decodeslots import KEYS
from agentprof.catalog.kvcache import _sourced

DEPTH_PATH = CATALOG_DIR / "draft_depth.toml"


@lru_cache(maxsize=1)
def _entries() -> tuple[tuple[tuple[str, ...], float, str], ...]:
    out = []
    for i, e in enumerate(read_toml(DEPTH_PATH).get("draft_depth", [])):
        where = f"{DEPTH_PATH}: draft_depth[{i}]"
        missing = [k for k in KEYS if not isinstance(e.get(k), str)]
        if missing:
            raise CatalogError(f"{where}: missing or non-string key(s) {', '.join(missing)}")
        val, src = _sourced(e, where, "depth")
        if not (val >= 1 and val == int(val)):
            raise CatalogError(f"{where}.depth: expected a whole number of drafted tokens >= 1, got {val:g}")
        out.append((tuple(str(e[k]).lower() for k in KEYS), val, src))
    return tuple(out)


def draft_depth(framework: str, model: str, hardware: str, spec: str, layout: str, isl: float,
                osl: float) -> tuple[float, str]:
    """(tokens drafted per sequence and decode step, source); ``(0, reason)`` when the recipe's depth is not
    listed (the step is counted at one token per sequence). ``isl``/``osl`` are the nominal lengths."""
    key = (framework.lower(), model.lower(), hardware.lower(), (spec or "none").lower(), layout.lower(),
           f"{int(isl)}/{int(osl)}")
    for k, val, src in _entries():
        if k == key:
            return val, src
    return 0.0, "not listed: one token per sequence and step"
