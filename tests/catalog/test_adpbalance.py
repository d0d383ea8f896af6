"""TensorRT-LLM's attention-DP balance as the recipe set it (``scheduling.toml [[attention_dp_balance]]``):
sourced, matched by engine, model and hardware, bad entries rejected with one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.catalog import CatalogError, adpbalance, read_toml
from agentprof.catalog.adpbalance import adp_balance
from agentprof.catalog.kvcache import SCHED_PATH


def test_the_entries_are_sourced_to_the_engine_defaults_or_the_recipes_counts() -> None:
    entries = read_toml(SCHED_PATH)["attention_dp_balance"]
    assert len(entries) >= 3
    for e in entries:
        for field in ("timeout_iters", "batching_wait_iters"):
            assert "S59" in e[field]["source"] and "enable_balance" in e[field]["source"]
    bal = adp_balance("trt", "gpt-oss-120b", "b200")
    assert bal is not None and (bal.timeout_iters, bal.batching_wait_iters) == (50, 10)
    assert "S59" in bal.source
    # the DeepSeek R1 recipes set both counts themselves, on every accelerator they run TensorRT-LLM on
    for hw in ("b200", "h200"):
        bal = adp_balance("trt", "deepseek-r1", hw)
        assert bal is not None and (bal.timeout_iters, bal.batching_wait_iters) == (60, 0)
        assert "dsr1_fp8_" + hw + "_trt" in bal.source


def test_other_engines_models_and_hardware_do_not_hold_their_prefills() -> None:
    assert adp_balance("vllm", "gpt-oss-120b", "b200") is None
    assert adp_balance("vllm", "deepseek-r1", "b200") is None
    assert adp_balance("trt", "deepseek-r1", "mi355x") is None
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
