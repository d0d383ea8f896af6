"""An instance wider than its accelerator's scale-up domain runs its tensor-parallel all-reduces over the scale-out
network, and each pays that network's latency (``Deployment.crossing_s``): in the fixed step overhead of the
equations' points, of the simulation's and of a replay (docs/DEVICE_MODEL.md §2.2)."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.replay.calibration import prior_theta, step_params
from agentprof.replay.costmodel import SCALEOUT_ALLREDUCE_S, Deployment
from agentprof.replay.points import point_features, predict_times

CAT = load_catalog()
M, H100 = CAT.models["deepseek-r1"], CAT.accelerators["h100"]
# H100 Dynamo-SGLang DeepSeek R1 with MTP: one 16-GPU prefill and one 16-GPU decode worker over two nodes each
ROW = {"hardware": "h100", "framework": "dynamo-sglang", "model_prefix": "dsr1", "precision": "fp8",
       "spec_decoding": "mtp", "isl": 8192, "osl": 1024, "conc": 4, "disagg": True, "prefill_num_workers": 1,
       "num_prefill_gpu": 16, "prefill_tp": 16, "prefill_ep": 1, "decode_num_workers": 1, "num_decode_gpu": 16,
       "decode_tp": 16, "decode_ep": 1}


def test_only_a_tensor_parallel_instance_past_its_domain_crosses_the_network() -> None:
    assert H100.fields["scaleup_domain"].value == 8
    tp16 = Deployment(M, H100, "fp8", 16, engine="sglang")
    assert tp16.crossing_s == pytest.approx(2 * M.get("layers") * SCALEOUT_ALLREDUCE_S)  # two all-reduces a layer
    assert Deployment(M, H100, "fp8", 8, engine="sglang").crossing_s == 0.0
    assert Deployment(M, H100, "fp8", 16, True, engine="sglang").crossing_s == 0.0  # all-to-all: fitted fan-out
    assert Deployment(M, CAT.accelerators["gb200"], "fp8", 16).crossing_s == 0.0  # one NVL72 domain


def test_the_step_overhead_carries_it() -> None:
    th = prior_theta()
    base = step_params(th, 61, 16)
    assert step_params(th, 61, 16, crossing_s=0.0025).t_fixed_s == pytest.approx(base.t_fixed_s + 0.0025)


def test_the_points_price_each_step_with_it() -> None:
    f = point_features(pl.DataFrame([ROW, {**ROW, "prefill_tp": 8, "num_prefill_gpu": 8, "decode_tp": 8,
                                           "num_decode_gpu": 8}]), CAT)
    want = Deployment(M, H100, "fp8", 16, engine="sglang").crossing_s
    assert f.cross_dec[0] == pytest.approx(want) and f.cross_pf[0] == pytest.approx(want)
    assert f.cross_dec[1] == 0.0 and f.cross_pf[1] == 0.0
    th = np.repeat(prior_theta()[None, :], 2, axis=0)
    with_it = predict_times(f, th)
    without = predict_times(dataclasses.replace(f, cross_dec=np.zeros(2), cross_pf=np.zeros(2)), th)
    # every decode step pays it: the time per output token rises by it over the tokens a step keeps (MTP)
    assert with_it.tpot[0] > without.tpot[0] + 0.5 * want
    assert with_it.tpot[1] == without.tpot[1]
    assert with_it.ttft[0] > without.ttft[0]  # the prefill's steps and the decode worker's hand-off steps


def test_a_replay_on_two_nodes_pays_and_names_it() -> None:
    from agentprof.replay.systems import resolve

    two_nodes = dataclasses.replace(CAT.systems["h100+x86"], count=16)
    r = resolve(two_nodes, M, CAT, gpus=16)
    one = resolve(dataclasses.replace(two_nodes, count=8), CAT.models["gpt-oss-120b"], CAT)
    assert r.dep.crossing_s > 0 and "all-reduces over the scale-out network" in r.calibration
    assert r.params.t_fixed_s > r.dep.crossing_s
    assert one.dep.crossing_s == 0.0 and "scale-out network" not in one.calibration
