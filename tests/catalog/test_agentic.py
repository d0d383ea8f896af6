"""agentic.toml: the recipes name real accelerators and catalog models; a malformed entry is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog import agentic as mod
from agentprof.catalog.hardware import load_catalog


def test_recipes_cover_catalog_accelerators_and_models_and_the_default_is_an_estimate() -> None:
    cat, ag = load_catalog(), mod.load_agentic()
    assert ag.default_cpu_gib_per_instance.is_estimate and ag.default_cpu_gib_per_instance.high is not None
    assert ag.recipes, "no recipe?"
    for key, r in ag.recipes.items():
        assert key in cat.accelerators, key
        assert all(m in cat.models for m in r.models), r.models
        assert "S61" in r.source and 0 < r.mem_util.value <= 1
    assert ag.recipe("b200", "kimi-k2.5").kv_dtype == "fp8"
    assert ag.recipe("b200", "deepseek-r1") is None and ag.recipe("jalapeno", "kimi-k2.5") is None


def test_a_malformed_recipe_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "agentic.toml"
    f.write_text('[default]\ncpu_tier_gib_per_instance = { value = 500, source = "estimate: x" }\n'
                 '[recipes.h200]\nmodels = ["kimi-k2.5"]\nframework = "vllm"\nsource = "S61"\n'
                 'accelerators_per_worker = { value = 8, source = "S61" }\n'
                 'cpu_tier_gib_per_worker = { value = 500, source = "S61" }\nkv_dtype = "int3"\n'
                 'kv_dtype_source = "S61"\nmem_util = { value = 0.85, source = "S61" }\nspeculative = "none"\n')
    monkeypatch.setattr(mod, "AGENTIC_FILE", f)
    mod.load_agentic.cache_clear()
    try:
        with pytest.raises(CatalogError, match=r"recipes\.h200: kv_dtype must be one of bf16, fp8, got 'int3'"):
            mod.load_agentic()
    finally:
        mod.load_agentic.cache_clear()
