"""Agentic serving deployments (``agentic.toml``): what a validated agentic recipe runs on an accelerator for a
model family (KV-cache CPU tier, KV dtype, HBM share), and the estimate every other system and model takes.

Read by :mod:`agentprof.replay.serving.deployment`; every number is ``{value, source}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.hardware import Bounded, _numbers, _text

AGENTIC_FILE = CATALOG_DIR / "agentic.toml"
KV_DTYPES = ("bf16", "fp8")


@dataclass(frozen=True)
class Recipe:
    """One accelerator's validated agentic deployment of the listed model families."""

    accelerator: str
    models: tuple[str, ...]
    framework: str
    source: str
    accelerators_per_worker: Bounded
    cpu_tier_gib_per_worker: Bounded
    kv_dtype: str
    kv_dtype_source: str
    mem_util: Bounded
    speculative: str


@dataclass(frozen=True)
class AgenticCatalog:
    default_cpu_gib_per_instance: Bounded
    recipes: dict[str, Recipe]

    def recipe(self, accelerator: str, model: str) -> Recipe | None:
        """The recipe for ``model`` on ``accelerator`` (None: the default estimate applies)."""
        r = self.recipes.get(accelerator)
        return r if r is not None and model in r.models else None


@lru_cache(maxsize=2)
def load_agentic() -> AgenticCatalog:
    """Parse ``agentic.toml``; a malformed entry is one :class:`CatalogError` line naming the key."""
    data = read_toml(AGENTIC_FILE)
    where = str(AGENTIC_FILE)
    d = _numbers(data.get("default", {}), f"{where}: default", ("cpu_tier_gib_per_instance",), ())
    recipes = {}
    for acc, t in (data.get("recipes") or {}).items():
        w = f"{where}: recipes.{acc}"
        if not isinstance(t, dict):
            raise CatalogError(f"{w}: expected a table")
        text = ("models", "framework", "source", "kv_dtype", "kv_dtype_source", "speculative")
        n = _numbers(t, w, ("accelerators_per_worker", "cpu_tier_gib_per_worker", "mem_util"), (), text)
        models = t.get("models")
        if not isinstance(models, list) or not models or not all(isinstance(m, str) for m in models):
            raise CatalogError(f"{w}: models must be a non-empty list of catalog model keys")
        kv = _text(t, "kv_dtype", w)
        if kv not in KV_DTYPES:
            raise CatalogError(f"{w}: kv_dtype must be one of {', '.join(KV_DTYPES)}, got {kv!r}")
        if not 0 < n["mem_util"].value <= 1:
            raise CatalogError(f"{w}: mem_util must be in (0, 1], got {n['mem_util'].value}")
        recipes[acc] = Recipe(acc, tuple(models), _text(t, "framework", w), _text(t, "source", w),
                              n["accelerators_per_worker"], n["cpu_tier_gib_per_worker"], kv,
                              _text(t, "kv_dtype_source", w), n["mem_util"], _text(t, "speculative", w))
    return AgenticCatalog(d["cpu_tier_gib_per_instance"], recipes)
