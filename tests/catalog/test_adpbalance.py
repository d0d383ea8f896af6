"""TensorRT-LLM's attention-DP balance as the recipe set it (``scheduling.toml [[attention_dp_balance]]``):
sourced, matched by engine, model and hardware, bad entries rejected with one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.catalog import CatalogError, adpbalance, read_toml
from agentprof.catalog.adpbalance import adp_balance
from agentprof.catalog.kvcache import SCHED_PATH


def test_the_b200_gpt_oss_recipe_entry_is_sourced_to_the_engine_defaults_and_the_recipe() -> None:
    entries = read_toml(SCHED_PATH)["attention_dp_balance"]
    assert len(entries) >= 1
    for e in entries:
        for field in ("timeout_iters", "batching_wait_iters"):
            assert "S59" in e[field]["source"] and "enable_balance" in e[field]["source"]
    bal = adp_balance("trt", "gpt-oss-120b", "b200")
    assert bal is not None and (bal.timeout_iters, bal.batching_wait_iters) == (50, 10)
    assert "S59" in bal.source


def test_other_engines_models_and_hardware_do_not_hold_their_prefills() -> None:
    assert adp_balance("vllm", "gpt-oss-120b", "b200") is None
    assert adp_balance("trt", "deepseek-r1", "b200") is None
    assert adp_balance("trt", "gpt-oss-120b", "h200") is None


@pytest.mark.parametrize("body, match", [
    ('timeout_iters = 50\nbatching_wait_iters = { value = 10, source = "x" }\n', r"timeout_iters"),
    ('timeout_iters = { value = 2.5, source = "x" }\nbatching_wait_iters = { value = 10, source = "x" }\n',
     r"timeout_iters: expected a whole number"),
])
def test_a_bad_entry_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, match: str) -> None:
    bad = tmp_path / "scheduling.toml"
    bad.write_text('[[attention_dp_balance]]\nframework = "trt"\nmodel = "gpt-oss-120b"\n' + body)
    monkeypatch.setattr(adpbalance, "SCHED_PATH", bad)
    adpbalance._entries.cache_clear()
    try:
        with pytest.raises(CatalogError, match=match):
            adp_balance("trt", "gpt-oss-120b", "b200")
    finally:
        adpbalance._entries.cache_clear()
