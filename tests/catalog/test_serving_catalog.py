"""serving.toml: power, prices and budgets cover every shipped system and framework, derived figures add up."""

from __future__ import annotations

import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.serving import load_serving


def test_every_system_has_power_and_a_price_and_every_framework_a_budget() -> None:
    cat, sv = load_catalog(), load_serving()
    assert set(cat.systems) <= set(sv.power) and set(cat.systems) <= set(sv.price)
    frameworks = {f for s in cat.systems.values() for f in s.frameworks}
    assert frameworks <= set(sv.budget), frameworks - set(sv.budget)


def test_busy_power_is_the_all_in_constant_times_the_count() -> None:
    cat, sv = load_catalog(), load_serving()
    for key, s in cat.systems.items():
        busy, idle = sv.power[key]
        allin = s.accelerator.fields["allin_kw"].value
        assert busy.value == pytest.approx(s.count * allin, rel=1e-3), key
        assert idle.value < busy.value and idle.is_estimate and idle.low is not None, key
        assert busy.source.startswith("derived"), key


def test_estimated_prices_carry_ranges_and_provider_prices_match_models() -> None:
    sv = load_serving()
    for key, p in sv.price.items():
        assert p.is_estimate == (p.low is not None), key
    assert sv.provider_for("claude-opus-4-1-20250805").key == "claude-opus-4-1"
    assert sv.provider_for("claude-sonnet-4-5-20250929").key == "claude-sonnet"
    assert sv.provider_for("llama-3") is None
    for p in sv.providers:
        assert p.cache_read.value < p.input.value <= p.cache_write.value < p.output.value * 2
