"""Speculative decoding as a what-if (agentprof.replay.speculative): the drafter's cost and the verify step priced
on the system's own terms, the acceptance and drafter ranges as a band, one session at a time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.importers import load_any
from agentprof.replay import replay
from agentprof.replay.bands import corner_system
from agentprof.replay.costmodel import decode_step_s, tokens_per_second_per_user
from agentprof.replay.speculative import with_speculative
from agentprof.replay.systems import resolve

KVCT = Path(__file__).resolve().parents[2] / "traces" / "samples" / "kv-cache-tester"
CAT = load_catalog()
KIMI = CAT.models["kimi-k2.5"]


@pytest.fixture(scope="module")
def kvct():
    return load_any(str(KVCT))


def test_the_step_pays_for_the_drafter_and_the_verified_tokens() -> None:
    """With nothing accepted the drafter is pure cost: every step is longer than without it (its passes, the
    verified tokens' FLOPs, collectives and MoE experts); with the catalogued acceptance a batch-1 user's decode
    is faster, by less than the acceptance itself."""
    r = resolve(CAT.system("h200+x86"), KIMI, CAT)
    s, info = with_speculative(r, "eagle3")
    assert info is not None and info["draft_tokens"] == 3 and s.params.verify_weights
    for b in (1, 16):
        plain, spec = decode_step_s(r.dep, r.params, b, 100_000), decode_step_s(s.dep, s.params, b, 100_000)
        assert spec > plain + info["draft_s_per_step"] * 0.999
    # the verified tokens route to more experts: more weight bytes than the batch alone
    assert s.dep.decode_bytes_per_gpu(1, 1000, 4) > s.dep.decode_bytes_per_gpu(1, 1000)
    gain = tokens_per_second_per_user(s.dep, s.params, 100_000) / tokens_per_second_per_user(r.dep, r.params, 100_000)
    assert 1.2 < gain < info["accept"]


def test_the_band_moves_the_acceptance_and_the_drafter() -> None:
    """At the fast corner a higher acceptance and a smaller drafter, at the slow one the opposite: the per-user
    decode speed is ordered fast > nominal > slow."""
    system = CAT.system("b200+x86")
    speeds = []
    for sysm in (corner_system(system, "fast"), system, corner_system(system, "slow")):
        s, _ = with_speculative(resolve(sysm, KIMI, CAT), "eagle3")
        speeds.append(tokens_per_second_per_user(s.dep, s.params, 50_000))
    assert speeds[0] > speeds[1] > speeds[2]


def test_replay_with_eagle3_shortens_the_model_calls_and_says_what_it_rests_on(kvct) -> None:
    plain = replay(kvct, ["h200+x86", "jalapeno"], bands=False)
    spec = replay(kvct, ["h200+x86", "jalapeno"], speculative="eagle3")
    for p, s in zip(plain.systems, spec.systems, strict=True):
        assert s.model_calls_s < p.model_calls_s
        d = s.deployments[0]["speculative"]
        assert d["method"] == "eagle3" and "S64" in d["source"] and "SWE-bench" in d["accept_source"]
        # what the calls wait for still adds up to their time
        parts = sum(s.waiting_for.values())
        assert parts == pytest.approx(s.model_calls_s, rel=1e-9)
        assert "speculative.kimi-k2.5.eagle3.accept" in s.band["ranged"]
        fast, slow = s.band["model_calls_s"]
        assert fast < s.model_calls_s < slow
    # the same calls, their decode shortened; the first token is the prefill's, waiting for a (longer) step to
    # poll it in: a few percent at most
    pc, sc = plain.calls, spec.calls
    p_ttft, s_ttft = pc["ttft_s"].to_numpy(), sc["ttft_s"].to_numpy()
    assert (s_ttft >= p_ttft - 1e-12).all() and np.median(s_ttft / p_ttft) < 1.05
    assert (sc["decode_s"].to_numpy() < pc["decode_s"].to_numpy()).mean() > 0.9
    assert "speculative" not in plain.systems[0].deployments[0]


def test_a_model_without_a_drafter_says_so(kvct) -> None:
    row = replay(kvct, ["h200+x86"], model="gpt-oss-120b", speculative="eagle3", bands=False).systems[0]
    assert row.error and "no eagle3 drafter catalogued for gpt-oss-120b" in row.error
    with pytest.raises(CatalogError, match="unknown speculative decoding"):
        replay(kvct, ["h200+x86"], speculative="medusa")


def test_cli_prints_the_drafter(capsys) -> None:
    from agentprof.cli import main

    try:
        main(["replay", str(KVCT), "-s", "b200+x86", "--speculative", "eagle3"])
    except SystemExit as e:
        assert e.code in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert "b200+x86: speculative decoding eagle3: 3 draft tokens, 2.55 kept per step" in out
    assert "and the drafter's figures" in out
    try:
        main(["replay", str(KVCT), "-s", "b200+x86", "--speculative", "eagle3", "--json"])
    except SystemExit as e:
        assert e.code in (0, None)
    d = json.loads(capsys.readouterr().out)
    assert d["systems"][0]["deployments"][0]["speculative"]["accept"] == 2.55
