"""Plausibility of every (system, model) pair the catalog can replay: batch-1 time per output token between
the bandwidth floor and a stated ceiling (docs/DEVICE_MODEL.md §9)."""

from __future__ import annotations

import math

import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.replay.costmodel import decode_step_s
from agentprof.replay.systems import resolve

CAT = load_catalog()
CTX = 2000.0
CEIL_MBU = 0.3
"""The ceiling's bandwidth term: 30 % of peak HBM bandwidth, below every fitted mbu (0.4-0.98, fitted.toml)."""
CEIL_LAYER_S = 150e-6
"""The ceiling's fixed overhead per layer: the top of the 60-145 us per layer measured across stacks
(hardware.md §5.4), growing by half per doubling of accelerators (collective fan-out)."""
MEASURED_ABOVE = {("mi300x+x86", "deepseek-r1"): "measured: MI300X SGLang DeepSeek R1 runs ~26.6 ms at conc 4 "
                  "(hardware.md §5.4), ~350 us per layer"}
"""Pairs allowed above the ceiling because a measurement puts them there (the ceiling is for borrowed terms)."""


def _pairs() -> list[tuple[str, str]]:
    return [(s, m) for s in sorted(CAT.systems) for m in sorted(CAT.models)]


@pytest.mark.parametrize("system, model", _pairs())
def test_batch1_tpot_between_the_bandwidth_floor_and_the_ceiling(system: str, model: str) -> None:
    try:
        r = resolve(CAT.system(system), CAT.models[model], CAT)
    except CatalogError as e:
        assert "does not fit" in str(e)
        return
    tpot = float(decode_step_s(r.dep, r.params, 1, CTX)) / r.params.accept
    floor = float(r.dep.decode_bytes_per_gpu(1, CTX)) / r.dep.accel.hbm_bw
    ceiling = floor / CEIL_MBU + r.dep.layers * CEIL_LAYER_S * (1 + 0.5 * math.log2(r.dep.gpus))
    assert tpot > floor, f"{system} {model}: {tpot * 1e3:.2f} ms is below the bandwidth floor {floor * 1e3:.2f} ms"
    if (system, model) in MEASURED_ABOVE:
        assert r.level == "fitted"
        return
    assert tpot < ceiling, (f"{system} {model}: {tpot * 1e3:.2f} ms above the ceiling {ceiling * 1e3:.2f} ms "
                            f"({r.calibration})")


def test_rubin_is_never_slower_than_the_b200_it_borrows_from() -> None:
    # Rubin borrows B200's fitted overheads (an estimate with a band): with more bandwidth it must not be slower
    for model in ("gpt-oss-120b", "deepseek-r1", "kimi-k2.5"):
        rb = resolve(CAT.system("rubin+vera"), CAT.models[model], CAT)
        b2 = resolve(CAT.system("b200+x86"), CAT.models[model], CAT)
        assert float(decode_step_s(rb.dep, rb.params, 1, CTX)) <= float(decode_step_s(b2.dep, b2.params, 1, CTX))
        assert rb.level == "unseen" and "borrows b200" in rb.calibration
