"""Serving settings as the engines deploy them: the CUDA-graph batch a decode step runs at."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.kvcache import graph_batch, graph_sizes
from agentprof.replay.costmodel import Deployment, StepParams, decode_step_s

CAT = load_catalog()


def test_a_batch_between_two_captured_sizes_runs_at_the_larger() -> None:
    sizes, src = graph_sizes("vllm")
    assert sizes[:4] == (1, 2, 4, 8) and "S66" in src
    got = graph_batch("vllm", [1, 3, 5, 8, 9, 16, 17, 250])
    assert got.tolist() == [1, 4, 8, 8, 16, 16, 24, 256]
    # every captured size maps to itself; above the largest a batch runs without a graph, at its own size
    assert graph_batch("vllm", list(sizes)).tolist() == list(sizes)
    assert graph_batch("vllm", [sizes[-1] + 1]).tolist() == [sizes[-1] + 1]
    # engines differ: SGLang captures 12, and Dynamo's SGLang workers are SGLang's
    assert graph_batch("sglang", [9, 13]).tolist() == [12, 16]
    assert graph_sizes("dynamo-sglang") == graph_sizes("sglang")
    # TRT-LLM pads only when a recipe enables it: not listed, no padding
    assert graph_batch("trt", [9, 13]).tolist() == [9, 13]


def test_a_padded_step_pays_the_captured_batchs_weights_but_only_its_own_kv() -> None:
    dep = Deployment(CAT.models["deepseek-r1"], CAT.accelerators["b200"], "fp4", 4, kv_dtype_bytes=1,
                     expert_parallel=4, engine="vllm")
    p = StepParams(t_fixed_s=0.005, mbu=0.75, mfu=0.3)
    b = np.arange(5, 9, dtype=float)
    padded = decode_step_s(dep, p, b, 80_000.0, padded=True)
    own = decode_step_s(dep, p, b, 80_000.0)
    full = decode_step_s(dep, p, np.full(4, 8.0), 80_000.0)
    # 5-7 sequences run as 8: dearer than their own batch, cheaper than 8 real sequences by the KV they do not hold
    assert np.all(padded[:-1] > own[:-1]) and np.all(padded[:-1] < full[:-1])
    assert padded[-1] == pytest.approx(float(own[-1])) == pytest.approx(float(full[-1]))
    # the difference is three sequences' KV read and attention, nothing else
    kv_each = float(dep.kv_seq_bytes(80_000.0)) / dep.kv_divisor / (p.mbu * dep.accel.hbm_bw)
    attn_each = float(dep.decode_peak_s(1, 80_000.0) - dep.decode_peak_s(1, 0.0)) / p.mfu
    assert full[0] - padded[0] == pytest.approx(3 * (kv_each + attn_each), rel=1e-6)


def test_a_graph_sizes_entry_that_is_not_an_increasing_list_is_one_clear_error(serving_catalog) -> None:
    serving_catalog("SCHED_PATH", '[[cuda_graphs]]\nframework = "vllm"\nsizes = { value = [8, 4], source = "test" }\n')
    with pytest.raises(CatalogError, match=r"cuda_graphs\[0\]\.sizes"):
        graph_sizes("vllm")


def test_a_prefill_step_holds_the_tokens_its_recipe_set() -> None:
    import polars as pl

    from agentprof.catalog.kvcache import prefill_budget
    from agentprof.catalog.serving import load_serving
    from agentprof.replay.points import point_features

    # SGLang's chunked-prefill size as each recipe sets it, a recipe's branch by prompt length and concurrency
    assert prefill_budget("sglang", "deepseek-r1", "mi300x", "fp8", 8, 1024, 1024, 4)[0] == 131072
    assert prefill_budget("sglang", "deepseek-r1", "mi355x", "fp4", 8, 8192, 1024, 64)[0] == 32768
    assert prefill_budget("sglang", "deepseek-r1", "mi355x", "fp4", 8, 8192, 1024, 32)[0] == 196608
    assert prefill_budget("sglang", "deepseek-r1", "b200", "fp8", 4, 8192, 1024, 8)[0] == 8192
    assert prefill_budget("sglang", "deepseek-r1", "b200", "fp8", 8, 1024, 1024, 8)[0] == 32768
    # a disaggregated stack's own launcher comes before its engine's recipe; no recipe, no figure
    disagg = prefill_budget("sglang-disagg", "deepseek-r1", "mi355x", "fp8", 8, 1024, 1024, 64)
    assert disagg.tokens == 262144
    # its launcher leaves --max-prefill-tokens at SGLang's 16384: a pass takes no further prompt past it; where a
    # recipe sets both to one figure, that figure
    assert disagg.batch == 16384
    assert prefill_budget("sglang", "deepseek-r1", "mi300x", "fp8", 8, 1024, 1024, 4).batch == 131072
    assert prefill_budget("atom", "deepseek-r1", "mi355x", "fp8", 8, 1024, 1024, 64) is None
    # its prefill server runs 8 requests at once with DP attention, one per attention rank, and 128 without
    assert (disagg.requests_dp, disagg.requests) == (8, 128)
    assert disagg.prompts_per_rank(8, True) == 1 and disagg.prompts_per_rank(1, False) == 128
    assert prefill_budget("sglang", "deepseek-r1", "mi300x", "fp8", 8, 1024, 1024, 4).prompts_per_rank(8, True) == math.inf
    # the points carry it, and an engine without one its estimate
    rows = [{"hardware": hw, "framework": fw, "model": "deepseek-r1", "precision": "fp8", "isl": 8192, "osl": 1024,
             "conc": 64, "tp": 8, "ep": 1, "dp_attention": False, "disagg": False}
            for hw, fw in (("mi300x", "sglang"), ("mi355x", "atom"))]
    f = point_features(pl.DataFrame(rows), CAT)
    assert f.budget.tolist() == [131072, load_serving().budget_tokens("atom")[0]]
    assert f.batch.tolist() == f.budget.tolist()


def test_a_budget_entry_for_a_malformed_setting_is_one_clear_error(serving_catalog) -> None:
    from agentprof.catalog.kvcache import prefill_budget

    serving_catalog("SCHED_PATH", '[[budget]]\nframework = "sglang"\nisl_osl = "8k1k"\n'
                                  'tokens = { value = 8192, source = "test" }\n')
    with pytest.raises(CatalogError, match=r"budget\[0\]\.isl_osl"):
        prefill_budget("sglang", "deepseek-r1")


def test_a_prefill_batch_above_the_steps_budget_is_one_clear_error(serving_catalog) -> None:
    from agentprof.catalog.kvcache import prefill_budget

    serving_catalog("SCHED_PATH", '[[budget]]\nframework = "sglang"\ntokens = { value = 8192, source = "test" }\n'
                                  'batch = { value = 16384, source = "test" }\n')
    with pytest.raises(CatalogError, match=r"budget\[0\]\.batch: expected 1 to 8192 tokens"):
        prefill_budget("sglang", "deepseek-r1")


def test_a_prefill_server_running_no_request_is_one_clear_error(serving_catalog) -> None:
    from agentprof.catalog.kvcache import prefill_budget

    serving_catalog("SCHED_PATH", '[[budget]]\nframework = "sglang"\ntokens = { value = 8192, source = "test" }\n'
                                  'requests_dp = { value = 0, source = "test" }\n')
    with pytest.raises(CatalogError, match=r"budget\[0\]\.requests_dp: expected at least 1 request, got 0"):
        prefill_budget("sglang", "deepseek-r1")
