"""Serving settings as the engines deploy them: the CUDA-graph batch a decode step runs at."""

from __future__ import annotations

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
