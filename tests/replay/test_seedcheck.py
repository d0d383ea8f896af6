"""The seed check and the `devices` commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentprof.catalog import CATALOG_DIR, read_toml
from agentprof.replay.seedcheck import seed_check, to_markdown

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def result() -> dict:
    return seed_check()


def test_every_claim_gets_a_prediction(result: dict) -> None:
    claims = read_toml(CATALOG_DIR / "seed_claims.toml")["claims"]
    models = {r["model"] for r in result["rows"]}
    assert models == {c["display"] for c in claims.values()} == {"GPT-OSS 120B", "DeepSeek R1", "Kimi K2.5"}
    for r in result["rows"]:
        assert r["jalapeno_model"] > 0
        if r["claim_lands"] is not None and r["ratio_vs_measured"] is not None:
            assert r["claim_lands"] == pytest.approx(r["ratio_vs_measured"] / r["claim"] - 1)
    tbt = next(r for r in result["rows"] if r["model"] == "GPT-OSS 120B" and r["metric"].startswith("min time"))
    # Jalapeño's batch-1 step: its declared per-layer overhead (36 layers) plus the bandwidth term, nothing
    # back-solved from the claim; the band spans the catalog ranges and contains the nominal figure
    lo, hi = tbt["jalapeno_fewest_band"]
    assert lo < tbt["jalapeno_model"] < hi
    assert tbt["baseline_measured"] == claims["gpt-oss-120b"]["baseline_tbt_s"]["value"]
    # the GPU baseline is predicted at 8k1k from a fit on 1k prompts: within 15 % of the measured figure
    assert tbt["baseline_model"] == pytest.approx(tbt["baseline_measured"], rel=0.15)
    kimi = next(r for r in result["rows"] if r["model"] == "Kimi K2.5")
    assert kimi["claim"] == 700 and kimi["baseline_measured"] is None
    assert result["jalapeno"]["deepseek-r1"]["accelerators"] == 4  # 671B needs >= 4 chips (hardware.md §2.4)
    assert result["jalapeno"]["gpt-oss-120b"]["accelerators"] == 1


def test_markdown_table(result: dict) -> None:
    md = to_markdown(result)
    lines = md.splitlines()
    assert lines[0].startswith("| model | metric | claim |") and len(lines) == 4 + len(result["rows"])
    assert "equal chip count" in lines[0] and "equal power" in lines[0] and "all-in kW" in lines[0]


def test_every_jalapeno_figure_has_a_band_and_states_chips_and_power(result: dict) -> None:
    for r in result["rows"]:
        chips = r["jalapeno_chips"]
        assert chips["fewest"] <= chips.get("equal_count", chips["fewest"])
        # equal power: as many chips as the GPU baseline's all-in power buys
        if "equal_power" in chips:
            assert chips["equal_power"] * r["jalapeno_allin_kw_per_chip"] <= max(
                r["gpu_allin_kw"], chips["fewest"] * r["jalapeno_allin_kw_per_chip"]) + 1e-9
        lo, hi = sorted(r["jalapeno_fewest_band"])
        assert lo <= r["jalapeno_fewest"] <= hi and lo < hi
        assert r["gpu_baseline_accelerators"] >= 1 and r["gpu_allin_kw"] > 0


def test_no_claim_value_is_an_input(result: dict, tmp_path: Path) -> None:
    # change every claimed ratio and every measured baseline: Jalapeño's predictions must not move
    text = (CATALOG_DIR / "seed_claims.toml").read_text()
    import re

    def bump(m: re.Match) -> str:
        return f"{m.group(1)}{float(m.group(2)) * 3.7:g}"

    edited = re.sub(r"((?:_ratio|baseline_\w+|peak_tokens_per_s) = \{ value = )([0-9.e+-]+)", bump, text)
    assert edited != text
    f = tmp_path / "claims.toml"
    f.write_text(edited)
    other = seed_check(claims_path=f)
    assert other["claims_file"] == str(f)
    for a, b in zip(result["rows"], other["rows"], strict=True):
        assert a["metric"] == b["metric"]
        for k in ("jalapeno_fewest", "jalapeno_equal_count", "jalapeno_equal_power"):
            if k in a:
                assert b[k] == a[k], (a["metric"], k)
                assert b[f"{k}_band"] == a[f"{k}_band"]
        if a["claim"] and a["metric"] != "peak tokens/s per user":
            assert b["claim"] == pytest.approx(a["claim"] * 3.7)


def test_devices_seed_check_reads_another_claims_file(tmp_path: Path) -> None:
    f = tmp_path / "claims.toml"
    f.write_text((CATALOG_DIR / "seed_claims.toml").read_text().replace(
        'min_tbt_ratio = { value = 2.7', 'min_tbt_ratio = { value = 5.4'))
    r = _cli("devices", "seed-check", "--claims", str(f), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    tbt = next(x for x in d["rows"] if x["model"] == "GPT-OSS 120B" and x["metric"].startswith("min time"))
    assert tbt["claim"] == 5.4 and d["claims_file"] == str(f)
    bad = _cli("devices", "seed-check", "--claims", str(tmp_path / "missing.toml"))
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentprof.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={"COLUMNS": "200", "PATH": ""})


def test_devices_list_json() -> None:
    r = _cli("devices", "list", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    names = {s["name"] for s in d["systems"]}
    assert {"jalapeno", "h200+x86", "b200+x86", "gb200+grace", "rubin+vera", "b200+vera"} <= names
    jal = next(s for s in d["systems"] if s["name"] == "jalapeno")
    assert jal["calibration"] == "declared estimates"
    assert {a["key"] for a in d["accelerators"]} >= {"h100", "h200", "b200", "gb200", "mi300x", "mi355x", "rubin",
                                                      "jalapeno"}
    r = _cli("devices", "list")
    assert r.returncode == 0 and "serving systems" in r.stdout and "host CPUs" in r.stdout


def test_devices_fit_writes_provenance(tmp_path: Path) -> None:
    src = ROOT / "data" / "inferencex" / "calibration_points.csv"
    lines = src.read_text().splitlines()
    small = tmp_path / "pts.csv"
    small.write_text("\n".join([lines[0], *[x for x in lines[1:] if ",mi300x," in x]]) + "\n")
    out = tmp_path / "fitted.toml"
    r = _cli("devices", "fit", "--points", str(small), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["in_sample"]["points"] == d["provenance"]["points_used"] == 30
    prov = read_toml(out)["provenance"]
    assert prov["data_file"] == str(small) and len(prov["data_sha256"]) == 64
    r = _cli("devices", "check", str(small), "--fitted", str(out), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["covered"] == 30


def test_devices_seed_check_cli() -> None:
    r = _cli("devices", "seed-check", "--markdown")
    assert r.returncode == 0 and "Jalapeño" in r.stdout and "Kimi K2.5" in r.stdout


def test_seed_check_in_a_terminal_fits_80_columns_with_every_cell_whole(result: dict) -> None:
    # without --markdown the same cells print as tables that fit the terminal: nothing over 80 characters, every
    # figure cell whole on one line, and the all-in power per chip taken from the catalog, not typed in
    from agentprof.replay.seedcheck import table_rows

    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "seed-check"], capture_output=True,
                       text=True, cwd=ROOT, env={"COLUMNS": "80", "PATH": ""})
    assert r.returncode == 0, r.stderr
    lines = [x.rstrip() for x in r.stdout.splitlines()]
    assert max(len(x) for x in lines) <= 80 and not any(x.startswith("|") for x in lines)
    rows, note = table_rows(result)
    for row in rows:
        assert all(c in r.stdout for c in row[2:])  # figures are never folded
    per_chip = result["rows"][0]["jalapeno_allin_kw_per_chip"]
    assert f"chips × {per_chip:g} kW" in note
