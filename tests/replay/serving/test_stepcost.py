"""The simulation's step costs are the cost model's: one decode step definition, a mixed step that reads the
weights once, a prefill that pays its per-request overhead once over its chunks."""

from __future__ import annotations

import numpy as np
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.costmodel import (
    Deployment,
    StepParams,
    call_times,
    decode_step_parts,
    decode_step_s,
    prefill_bytes_per_gpu,
    prefill_s,
)
from agentprof.replay.serving.stepcost import StepCost

CAT = load_catalog()
P = StepParams(t_fixed_s=2e-3, mbu=0.75, mfu=0.35, t0_s=0.01, t_req_s=0.005, mfu_pf=0.2)


def cost(model: str = "deepseek-r1", acc: str = "b200", prec: str = "fp4", gpus: int = 8) -> StepCost:
    return StepCost(Deployment(CAT.models[model], CAT.accelerators[acc], prec, gpus), P, 0.9, 64e9, 25e9)


def test_decode_step_adds_bytes_and_flops_as_the_equations_do() -> None:
    c = cost()
    parts = decode_step_parts(c.dep, P, 64, 3000.0)
    assert float(parts["bandwidth"]) > 0 and float(parts["compute"]) > 0  # both paid, neither hidden
    # the replay's per-token decode (equations.times at batch 1) is decode_step_s at the mean context
    inp, out = 3000.0, 400.0
    want = float(decode_step_s(c.dep, P, 1, inp + out / 2)) * (out - 1)
    got = float(call_times(c.dep, P, [inp], [0.0], [out]).decode_s[0])
    assert got == pytest.approx(want, rel=1e-12)
    assert c.decode_s(64, 3000.0) == pytest.approx(float(decode_step_s(c.dep, P, 64, 3000.0)), rel=5e-3)


def test_a_chunk_riding_decode_does_not_read_the_weights_again() -> None:
    c = cost()
    alone = c.chunks_s([(900.0, 0.0, 1.0)])
    riding = c.chunks_s([(900.0, 0.0, 1.0)], decoding=32)
    assert alone == pytest.approx(float(prefill_s(c.dep, P, 900.0, 0.0)), rel=1e-12)
    # a short prefill alone is bound by the weight reads; riding a decode step those are already streamed
    weights = float(prefill_bytes_per_gpu(c.dep, 900.0, 0.0)) / (P.mbu * c.dep.accel.hbm_bw)
    assert riding < alone - 0.5 * weights
    assert riding > 0


def test_a_chunked_prefill_pays_its_request_overhead_once() -> None:
    c = cost()
    whole, n = 24000.0, 3
    parts = [c.chunks_s([(whole / n, k * whole / n, 1.0 / n)], decoding=8) for k in range(n)]
    no_req = StepCost(c.dep, StepParams(**{**P.__dict__, "t_req_s": 0.0}), 0.9, 64e9, 25e9)
    base = [no_req.chunks_s([(whole / n, k * whole / n, 1.0 / n)], decoding=8) for k in range(n)]
    assert sum(parts) - sum(base) == pytest.approx(P.t_req_s, rel=1e-9)
    assert np.all(np.diff(parts) > 0)  # later chunks attend to more context


def test_a_chunk_series_prices_as_its_chunks_one_by_one() -> None:
    c = cost()
    ctxs = [0.0, 8192.0, 16384.0, 24576.0]
    for decoding in (0, 16):
        series = c.chunk_series_s(8192.0, ctxs, 0.25, decoding)
        assert series == pytest.approx([c.chunks_s([(8192.0, x, 0.25)], decoding) for x in ctxs], rel=1e-12)
