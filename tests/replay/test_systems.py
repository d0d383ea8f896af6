"""A model on a serving system: the frontend time the replay charges per prompt token."""

from __future__ import annotations

import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import load_catalog
from agentprof.catalog.kvcache import tokenize_host, tokenize_s_per_token
from agentprof.replay.calibration import load_fitted
from agentprof.replay.systems import resolve

CAT = load_catalog()
KIMI = CAT.models["kimi-k2.5"]


def test_replays_charge_the_resolved_engines_frontend_at_the_system_hosts_speed() -> None:
    x86, vera = CAT.system("b200+x86"), CAT.system("b200+vera")
    a, b = resolve(x86, KIMI, CAT), resolve(vera, KIMI, CAT)
    assert a.framework == b.framework
    listed, src = tokenize_s_per_token(a.framework, KIMI.key, "b200")
    assert listed > 0 and "S48" in src and tokenize_host(a.framework, KIMI.key, "b200") is None
    # a figure that names no host counts as measured on the reference host (single-thread speed 1)
    assert a.params.t_tok_s == pytest.approx(listed / x86.host.st_speed)
    assert b.params.t_tok_s == pytest.approx(listed / vera.host.st_speed)
    assert b.params.t_tok_s < a.params.t_tok_s
    assert "reference host" in a.frontend_source and vera.host.key in b.frontend_source
    assert a.describe()["frontend_us_per_token"] == pytest.approx(a.params.t_tok_s * 1e6, abs=1e-3)
    # every engine tokenizes: the model's tokenizer figure applies where no engine-specific one is listed
    for key in ("gb200+grace", "mi355x+x86", "jalapeno"):
        assert resolve(CAT.system(key), KIMI, CAT).params.t_tok_s > 0
    # a model with no figure of its own gets the catalog's default: a Hugging Face fast tokenizer, faster than
    # Kimi's slow one under vLLM, slower than its native tiktoken encode
    other, other_src = tokenize_s_per_token(a.framework, "gpt-oss-120b", "b200")
    assert "tokenizer_speed.py" in other_src
    assert tokenize_s_per_token("vllm", KIMI.key, "b200")[0] > other > listed
    assert resolve(x86, CAT.models["gpt-oss-120b"], CAT).params.t_tok_s == pytest.approx(other / x86.host.st_speed)


def test_without_any_tokenize_entry_the_frontend_is_not_charged(serving_catalog) -> None:
    serving_catalog("SCHED_PATH", "")
    r = resolve(CAT.system("b200+x86"), CAT.models["gpt-oss-120b"], CAT)
    assert r.params.t_tok_s == 0.0 and "not charged" in r.frontend_source


def test_a_figure_measured_on_a_named_host_scales_by_that_hosts_speed(serving_catalog) -> None:
    # vLLM's Kimi frontend on B200 was measured on the AgentX runs' DGX B200 hosts (Xeon 8570)
    assert tokenize_host("vllm", KIMI.key, "b200") == "xeon-8570"
    serving_catalog("SCHED_PATH", '[[tokenize]]\nmodel = "kimi-k2.5"\nhost = "epyc-9654"\n'
                    's_per_token = { value = 2e-6, source = "test" }\n')
    vera = CAT.system("b200+vera")
    r = resolve(vera, KIMI, CAT)
    assert r.params.t_tok_s == pytest.approx(2e-6 * CAT.hosts["epyc-9654"].st_speed / vera.host.st_speed)
    assert "measured on epyc-9654" in r.frontend_source


def test_a_tokenize_entry_naming_an_unknown_host_is_one_clear_error(serving_catalog) -> None:
    serving_catalog("SCHED_PATH", '[[tokenize]]\nmodel = "kimi-k2.5"\nhost = "pentium-4"\n'
                    's_per_token = { value = 1e-6, source = "test" }\n')
    with pytest.raises(CatalogError, match="pentium-4"):
        resolve(CAT.system("b200+x86"), KIMI, CAT)


def test_replays_state_both_prefill_attention_efficiencies() -> None:
    # a chip with a published attention kernel figure prices each chunk's own tokens at it, attention to earlier
    # tokens at the fitted one; a chip without (MI355X) prices both at the fitted one; --json says which
    fitted = load_fitted()
    b200 = resolve(CAT.system("b200+x86"), KIMI, CAT).describe()
    mi = resolve(CAT.system("mi355x+x86"), KIMI, CAT).describe()
    assert b200["attn_eff_fresh"] == pytest.approx(CAT.accelerators["b200"].attn_fwd_eff)
    assert b200["attn_eff"] == pytest.approx(fitted.attn_eff_for("b200", "mla"), abs=1e-4)
    assert mi["attn_eff_fresh"] == mi["attn_eff"] == pytest.approx(fitted.attn_eff_for("mi355x", "mla"), abs=1e-4)
    # decode attention: B200's MLA figure (an estimate, Hopper's FlashMLA fraction), Kimi's 64 heads over the
    # instance's GPUs filling part of the kernel's 64-row tiles; MI355X has no figure (the GEMMs' mfu)
    r = resolve(CAT.system("b200+x86"), KIMI, CAT)
    assert b200["attn_eff_decode"] == pytest.approx(CAT.accelerators["b200"].mla_decode_eff)
    assert b200["decode_attn_tile_factor"] == pytest.approx(64 / (64 / r.dep.gpus)) and r.dep.gpus > 1
    assert "attention kernels' estimated figures: fresh prompts 0.713, decode 0.667 (" in r.calibration
    assert mi["attn_eff_decode"] is None and "attention kernels" not in resolve(CAT.system("mi355x+x86"), KIMI,
                                                                                CAT).calibration


def test_rubin_prices_fresh_prompts_at_its_proxys_kernel_figure_within_a_band() -> None:
    # no published Rubin attention figure: B200's, an estimate whose range the band moves (the fast corner at its
    # high end), so a fresh prompt's attention on Rubin is never priced at the prefix's fitted efficiency
    from agentprof.replay.bands import corner_system, ranged

    s = CAT.system("rubin+vera")
    f = s.accelerator.fields["attn_fwd_eff"]
    assert f.evidence_class == "estimate" and f.value == CAT.accelerators["b200"].attn_fwd_eff
    assert f.low < f.value < f.high and "rubin.attn_fwd_eff" in ranged(s)
    assert resolve(s, KIMI, CAT).params.fresh_eff == f.value
    assert resolve(corner_system(s, "fast"), KIMI, CAT).params.fresh_eff == f.high
    assert resolve(corner_system(s, "slow"), KIMI, CAT).params.fresh_eff == f.low
