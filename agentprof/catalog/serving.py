"""Serving economics and scheduler settings (``serving.toml``): system power, system prices, provider list
prices and per-framework chunked-prefill token budgets, each number ``{value, source}``.

Read by the serving simulation (:mod:`agentprof.replay.serving`); kept apart from the hardware tables so a
hardware catalog stays about hardware.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.hardware import Bounded, _numbers

SERVING_FILE = CATALOG_DIR / "serving.toml"
DEFAULT_BUDGET_TOKENS = 8192


@dataclass(frozen=True)
class ProviderPrice:
    """List prices of one provider model family, USD per million tokens."""

    key: str
    match: str
    input: Bounded
    cache_read: Bounded
    cache_write: Bounded
    output: Bounded


@dataclass(frozen=True)
class ServingCatalog:
    power: dict[str, tuple[Bounded, Bounded]]
    price: dict[str, Bounded]
    budget: dict[str, Bounded]
    providers: tuple[ProviderPrice, ...]

    def budget_tokens(self, framework: str) -> tuple[float, str]:
        """Chunked-prefill token budget of a framework, with its source (a default when the catalog has none)."""
        b = self.budget.get(framework)
        if b is None:
            return float(DEFAULT_BUDGET_TOKENS), f"default {DEFAULT_BUDGET_TOKENS} ({framework} not in serving.toml)"
        return b.value, b.source

    def provider_for(self, model: str | None) -> ProviderPrice | None:
        """The provider price whose ``match`` is the longest substring of the recorded model name."""
        if not model:
            return None
        low = model.lower()
        hits = [p for p in self.providers if p.match.lower() in low]
        return max(hits, key=lambda p: len(p.match)) if hits else None


def _table(data: dict[str, Any], name: str) -> dict[str, Any]:
    t = data.get(name, {})
    if not isinstance(t, dict):
        raise CatalogError(f"{SERVING_FILE}: [{name}] must hold named tables")
    return t


@lru_cache(maxsize=4)
def load_serving() -> ServingCatalog:
    """Parse ``serving.toml``; a malformed entry is one :class:`CatalogError` line naming the key."""
    data = read_toml(SERVING_FILE)
    where = str(SERVING_FILE)
    power = {}
    for k, t in _table(data, "power").items():
        n = _numbers(t, f"{where}: power.{k}", ("busy_kw", "idle_kw"), ())
        power[k] = (n["busy_kw"], n["idle_kw"])
    price = {k: _numbers(t, f"{where}: price.{k}", ("usd_per_hour",), ())["usd_per_hour"]
             for k, t in _table(data, "price").items()}
    budget = {k: _numbers(t, f"{where}: budget.{k}", ("tokens",), ())["tokens"]
              for k, t in _table(data, "budget").items()}
    providers = []
    for k, t in _table(data, "provider").items():
        n = _numbers(t, f"{where}: provider.{k}", ("input", "cache_read", "cache_write", "output"), (), ("match",))
        providers.append(ProviderPrice(k, str(t.get("match", k)), n["input"], n["cache_read"], n["cache_write"],
                                       n["output"]))
    return ServingCatalog(power, price, budget, tuple(providers))
