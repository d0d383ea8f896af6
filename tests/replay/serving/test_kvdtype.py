"""The KV dtype lever (--kv-dtype) and the instance size of a tp=fit system under many sessions: the pool in
tokens, what carries into the other layouts, and what the outputs say."""

from __future__ import annotations

import pytest

from agentprof.errors import AgentprofError
from agentprof.replay.serving import ServingConfig
from agentprof.replay.serving.dpattention import RankStepCost, dp_resolved
from agentprof.replay.serving.kvdtype import kv_dtype_name, with_kv_dtype
from agentprof.replay.serving.sizing import instances_to_hold, serving_gpus, system_pool_tokens
from agentprof.replay.serving.stepcost import StepCost


def test_fp8_halves_the_bytes_and_doubles_the_pool_in_tokens_in_both_layouts(resolved) -> None:
    r = resolved("h200+x86")  # Kimi K2.5 on H200: no recipe sets an FP8 KV, so BF16 as deployed
    assert kv_dtype_name(r) == "bf16" and r.dep.kv_token_bytes == 61 * 576 * 2
    f = with_kv_dtype(r, "fp8")
    assert f.dep.kv_token_bytes == r.dep.kv_token_bytes / 2 and kv_dtype_name(f) == "fp8"
    assert "S-KV8a" in f.kv_source and "deployed" in f.kv_source
    assert StepCost.of(f).pool_tokens == pytest.approx(2 * StepCost.of(r).pool_tokens, rel=1e-12)
    # the DP re-resolution keeps the KV dtype asked for
    d, df = dp_resolved(r), dp_resolved(f)
    assert df.dep.kv_dtype_bytes == 1 and d.dep.kv_dtype_bytes == 2
    assert RankStepCost(df).pool_tokens == pytest.approx(2 * RankStepCost(d).pool_tokens, rel=1e-12)
    # the weights and the calibration do not move
    assert f.dep.weight_bytes == r.dep.weight_bytes and f.params == r.params
    # auto is the catalog's figure; ATOM's Kimi recipe on MI355X deploys FP8 [S21e], so bf16 doubles its bytes
    assert with_kv_dtype(r, "auto") is r
    b = resolved("mi355x+x86")
    assert kv_dtype_name(b) == "fp8" and with_kv_dtype(b, "bf16").dep.kv_token_bytes == 2 * b.dep.kv_token_bytes
    with pytest.raises(AgentprofError, match="unknown KV dtype"):
        ServingConfig(kv_dtype="fp4").check()


def test_a_fit_system_serves_many_sessions_in_the_size_that_holds_the_most_kv(resolved) -> None:
    r = resolved("jalapeno")
    assert r.system.tp == "fit" and r.dep.gpus == 4 and r.system.count == 8
    # one session: the fewest chips that hold the weights (the single-session replay's layout)
    assert serving_gpus(r, 1) == (4, "")
    g, why = serving_gpus(r, 50, 6.3e6)
    # per instance one chip's free HBM of latent (copied on every TP rank): 2 x (HBM.u - W/4) < 1 x (HBM.u - W/8)
    hbm = r.dep.accel.hbm_bytes * r.system.mem_util
    pools = {n: (8 // n) * (hbm - r.dep.weight_bytes / n) / r.dep.kv_token_bytes for n in (4, 8)}
    assert system_pool_tokens(r, 4) == pytest.approx(pools[4], rel=1e-12)
    assert system_pool_tokens(r, 8) == pytest.approx(pools[8], rel=1e-12)
    assert pools[8] > pools[4] and g == 8 and "1 x 8" in why and "2 x 4" in why and "none holds it" in why
    # sessions whose KV two instances of 4 hold keep them (two prefills at once)
    assert serving_gpus(r, 8, 0.9 * pools[4]) == (4, "")
    assert serving_gpus(r, 8, 1.1 * pools[4])[0] == 8
    # a tp=max system keeps its instance
    assert serving_gpus(resolved("h200+x86"), 50)[0] == 8
    assert instances_to_hold(6.3e6, 0.75e6) == 9 and instances_to_hold(1.0, 0.0) is None
