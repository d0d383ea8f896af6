"""The hardware catalog: every number sourced, user files validated with clear one-line errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.hardware import EVIDENCE, check_sources, iter_numbers, load_catalog

ROOT = Path(__file__).resolve().parents[2]
SOURCED_FILES = ("accelerators.toml", "hosts.toml", "systems.toml", "models.toml", "seed_claims.toml", "kv_cache.toml", "memory.toml",
                 "scheduling.toml", "serving.toml", "decode_slots.toml", "draft_depth.toml", "agentic.toml",
                 "speculative.toml")


@pytest.mark.parametrize("name", SOURCED_FILES)
def test_every_catalog_number_names_a_source(name: str) -> None:
    path = CATALOG_DIR / name
    numbers = list(iter_numbers(read_toml(path)))
    assert numbers, f"{name} holds no numbers?"
    unsourced = [p for p, _, ok in numbers if not ok]
    assert unsourced == [], f"{name}: numbers without a source: {unsourced}"


def test_every_shipped_toml_is_checked() -> None:
    # a new catalog file must be added to SOURCED_FILES (or be fitted.toml, sourced by its provenance)
    shipped = {p.name for p in CATALOG_DIR.glob("*.toml")}
    assert shipped - set(SOURCED_FILES) <= {"fitted.toml"}


def test_source_check_catches_a_bare_number(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('[accelerators.x]\nhbm_bw = 8e12\nbf16_flops = { value = 1e15, source = "" }\n'
                 'hbm_bytes = { value = 1e11, source = "spec sheet", low = 9e10 }\n')
    assert sorted(check_sources(f)) == ["accelerators.x.bf16_flops.value", "accelerators.x.hbm_bw"]


def test_estimates_are_labelled_with_ranges() -> None:
    cat = load_catalog()
    jal = cat.accelerators["jalapeno"]
    for key in ("hbm_bytes", "hbm_bw", "fp8_flops", "fp4_flops", "tdp_w"):
        f = jal.fields[key]
        assert f.is_estimate, key
        assert f.low is not None and f.high is not None and f.low <= f.value <= f.high, key
    # every Jalapeño, Rubin and Vera number states its evidence class; the capacity, bandwidth and power rest on
    # the seed statements (the same announcements as the seed claims), the compute on estimates
    for fields in (jal.fields, cat.accelerators["rubin"].fields, cat.hosts["vera"].fields):
        assert all(f.evidence in EVIDENCE for f in fields.values())
    assert {k: jal.fields[k].evidence for k in ("hbm_bytes", "hbm_bw", "tdp_w", "fp8_flops")} == {
        "hbm_bytes": "seed", "hbm_bw": "seed", "tdp_w": "seed", "fp8_flops": "estimate"}
    # one announcement, so its band is a rounded "5x H100" (4.5-5.5x), not the two multiples' 4 % spread
    h100 = cat.accelerators["h100"].hbm_bw
    assert jal.fields["hbm_bw"].low == pytest.approx(4.5 * h100, rel=0.01)
    assert jal.fields["hbm_bw"].high == pytest.approx(5.5 * h100, rel=0.01)
    # Vera's host ratio = vendor ratio (1.6-2.0, an "up to 2x") x 72/88 x Grace's range
    vera, grace = cat.hosts["vera"].fields["st_speed"], cat.hosts["grace"].fields["st_speed"]
    assert vera.low == pytest.approx(1.6 * 72 / 88 * grace.low, rel=0.01)
    assert vera.high == pytest.approx(2.0 * 72 / 88 * grace.high, rel=0.01)
    for key in ("grace", "vera", "xeon-8570", "epyc-9654"):
        st = cat.hosts[key].fields["st_speed"]
        assert st.is_estimate, f"{key}: single-thread speed must be labelled an estimate"
    # the vendor's agentic claim is kept apart from the single-thread estimate
    vera = cat.hosts["vera"]
    assert vera.fields["vendor_claim"].value == 1.8
    assert vera.st_speed < vera.fields["vendor_claim"].value


def test_systems_compose_known_parts() -> None:
    cat = load_catalog()
    for name in ("jalapeno", "h200+x86", "b200+x86", "gb200+grace", "rubin+vera", "b200+vera"):
        s = cat.system(name)
        assert s.count >= 1 and s.accelerator.key in cat.accelerators and s.host.key in cat.hosts
    assert cat.system("b200+vera").accelerator is cat.system("b200+x86").accelerator
    assert cat.system("gb200+grace").link.bw.value > cat.system("b200+x86").link.bw.value


def test_fitted_parameters_come_from_the_shipped_data_file() -> None:
    prov = read_toml(CATALOG_DIR / "fitted.toml")["provenance"]
    data = ROOT / prov["data_file"]
    assert data.is_file()
    assert hashlib.sha256(data.read_bytes()).hexdigest() == prov["data_sha256"]
    assert prov["method"] and prov["date"]


def _write(tmp_path: Path, text: str) -> str:
    f = tmp_path / "user.toml"
    f.write_text(text)
    return str(f)


GOOD_ACC = ('[accelerators.myacc]\nhbm_bytes = { value = 96e9, source = "spec" }\n'
            'hbm_bw = { value = 4e12, source = "spec" }\nbf16_flops = { value = 1e15, source = "spec" }\n')


@pytest.mark.parametrize("text, needles", [
    ("[accelerators.myacc]\nhbm_bw = 8e12\n", ["user.toml", "accelerators.myacc.hbm_bw", "needs a source"]),
    ('[accelerators.myacc]\nhbm_bw = { value = 8e12 }\n', ["accelerators.myacc.hbm_bw", "missing 'source'"]),
    ('[accelerators.myacc]\nhbm_bw = { value = "fast", source = "x" }\n', ["hbm_bw.value", "expected a number"]),
    (GOOD_ACC.replace("bf16_flops", "bf16_flop"), ["accelerators.myacc", "unknown key(s) bf16_flop"]),
    ('[gpus.x]\nbw = { value = 1, source = "x" }\n', ["user.toml", "unknown table [gpus]"]),
    ('[accelerators.myacc\n', ["user.toml", "invalid TOML"]),
    (GOOD_ACC + '[systems.mine]\naccelerator = "nope"\ncount = { value = 4, source = "me" }\nhost = "vera"\n'
     'link = "pcie5-x16"\ndisk = "nvme-gen4-x4"\nframeworks = ["vllm"]\nprecisions = ["fp8"]\n'
     'mem_util = { value = 0.9, source = "me" }\n', ["systems.mine.accelerator", "unknown accelerator 'nope'"]),
    (GOOD_ACC.replace('hbm_bw = { value = 4e12, source = "spec" }',
                      'hbm_bw = { value = 4e12, source = "estimate: x", low = 5e12, high = 6e12 }'),
     ["accelerators.myacc.hbm_bw", "outside its range"]),
    ('[models.tiny]\nattention = "gqa"\nlayers = 2\n', ["models.tiny.layers", "needs a source"]),
])
def test_invalid_user_catalog_gives_one_clear_line(tmp_path: Path, text: str, needles: list[str]) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(CatalogError) as e:
        load_catalog((path,))
    msg = str(e.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg


def test_user_file_adds_a_system(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD_ACC + 'proxy = "h200"\nfamily = "mine"\n'
                  '[systems."myacc+vera"]\naccelerator = "myacc"\ncount = { value = 8, source = "me" }\n'
                  'host = "vera"\nlink = "pcie5-x16"\ndisk = "nvme-gen4-x4"\nframeworks = ["vllm"]\n'
                  'precisions = ["fp8", "fp4"]\nmem_util = { value = 0.9, source = "me" }\n')
    cat = load_catalog((path,))
    s = cat.system("myacc+vera")
    assert s.accelerator.hbm_bw == 4e12 and s.accelerator.proxy == "h200"
    assert "h200+x86" in cat.systems  # shipped entries stay


def test_cli_reports_bad_catalog_as_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _write(tmp_path, "[accelerators.myacc]\nhbm_bw = 8e12\n")
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "list", "--catalog", path],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "accelerators.myacc.hbm_bw" in lines[0]


def test_an_unknown_evidence_class_is_a_clear_error(tmp_path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('[accelerators.x]\ndisplay = "x"\nvendor = "x"\nfamily = "x"\n'
                 'hbm_bytes = { value = 1e11, source = "spec sheet", evidence = "rumour" }\n')
    with pytest.raises(CatalogError, match="hbm_bytes.evidence: expected one of measured, vendor, seed, estimate"):
        load_catalog((str(f),))


def test_prefill_gemm_ratio_is_the_chips_measured_efficiency_over_hoppers() -> None:
    cat = load_catalog()
    hopper = cat.accelerators["h100"].gemm_fp8_eff
    assert hopper and cat.gemm_ratio("h100") == cat.gemm_ratio("h200") == 1.0
    for hw in ("mi300x", "mi325x", "mi355x"):
        eff = cat.accelerators[hw].gemm_fp8_eff
        assert eff is not None and 0 < eff < hopper
        assert cat.gemm_ratio(hw) == pytest.approx(eff / hopper)
    # unpublished (B200) or unknown: the prior stays Hopper's
    assert cat.accelerators["b200"].gemm_fp8_eff is None
    assert cat.gemm_ratio("b200") == cat.gemm_ratio("no-such-chip") == 1.0


def test_a_user_chip_can_declare_its_gemm_efficiency(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD_ACC + 'gemm_fp8_eff = { value = 0.263, source = "measured: my GEMM sweep" }\n')
    cat = load_catalog((path,))
    assert cat.gemm_ratio("myacc") == pytest.approx(0.263 / cat.accelerators["h100"].gemm_fp8_eff)
