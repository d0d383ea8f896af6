"""Draft depth of an MTP deployment as its recipe set it (``draft_depth.toml``): the tokens each sequence drafts
per decode step, which the step then verifies along with the sequence's own, so its FLOPs and collectives carry
1 + depth tokens per sequence (docs/DEVICE_MODEL.md §2.1). A deployment not listed counts one token per sequence.
"""

from __future__ import annotations

from functools import lru_cache

from agentprof.catalog import CATALOG_DIR
from agentprof.catalog.recipetable import Entry, lookup, read_entries

DEPTH_PATH = CATALOG_DIR / "draft_depth.toml"


@lru_cache(maxsize=1)
def _entries() -> tuple[Entry, ...]:
    return read_entries(DEPTH_PATH, "draft_depth", "depth",
                        lambda v: None if v >= 1 and v == int(v) else "a whole number of drafted tokens >= 1")


def draft_depth(framework: str, model: str, hardware: str, spec: str, layout: str, isl: float,
                osl: float, precision: str = "", conc: float | None = None) -> tuple[float, str]:
    """(tokens drafted per sequence and decode step, source); ``(0, reason)`` when the recipe's depth is not
    listed (the step is counted at one token per sequence). ``isl``/``osl`` are the nominal lengths; ``precision``
    and ``conc`` (the benchmark's concurrency) pick the recipe where a layout ran several."""
    hit = lookup(_entries(), framework, model, hardware, spec, layout, isl, osl, precision, conc)
    return hit if hit else (0.0, "not listed: one token per sequence and step")
