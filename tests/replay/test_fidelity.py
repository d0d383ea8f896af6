"""Leave-one-layout-out and leave-one-group-out cross-validation against the lookup baseline, calibration
levels with their measured errors, and the per-point CSV of `devices check`."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from agentprof.replay.calibration import load_fitted
from agentprof.replay.fidelity import leave_out

from .conftest import CAT, POINTS, ROOT


@pytest.fixture(scope="module")
def lolo(points: pl.DataFrame) -> dict:
    return leave_out(points, "layout", CAT)


@pytest.fixture(scope="module")
def logo(points: pl.DataFrame) -> dict:
    return leave_out(points, "group", CAT)


def _artifact_rows(points: pl.DataFrame) -> list[int]:
    """Row numbers of the run artifacts' points (the rest come from the InferenceX API's other runs)."""
    from agentprof.replay.points import from_run_artifacts

    return from_run_artifacts(points.with_row_index("row"))["row"].to_list()


def test_unseen_layouts_beat_the_lookup_baseline(lolo: dict, points: pl.DataFrame) -> None:
    # every layout of a group with other layouts is predicted without its own points: the per-layer overhead
    # and the collectives carry the group's terms to it; the baseline looks up the nearest measured point of
    # the same hardware and model (nearest GPU count, then concurrency) on the same points
    assert lolo["held_out_units"] >= 200
    model, base = lolo["model_on_baseline_points"], lolo["baseline"]
    assert model["points"] == base["points"] >= 1700
    for m in ("tpot", "e2e"):
        assert model[m]["median_ape"] < base[m]["median_ape"]
    assert set(lolo["model"]["levels"]) <= {"group", "unseen"}
    # the collectives' latency by their kind (one-shot all-reduce under TP, all-to-all under DP attention) and
    # the busiest EP rank carry a group's terms to its unseen layouts; issue 13's targets (TPOT 6 %, E2E 6 %,
    # aggregated TPOT 5 %) on the run artifacts' points it set them on (5.5 / 5.7 / 4.9 %), 7.7 / 7.8 % over all
    t = lolo["table"].filter(pl.col("covered") & pl.col("row").is_in(_artifact_rows(points)))
    assert t.height > 900
    assert t["ape_tpot"].median() < 0.06 and t["ape_e2e"].median() <= 0.06
    assert t.filter(~pl.col("layout").str.starts_with("p"))["ape_tpot"].median() < 0.05
    assert lolo["model"]["tpot"]["median_ape"] < 0.085 and lolo["model"]["e2e"]["median_ape"] <= 0.085


def test_unseen_groups_beat_the_lookup_baseline(logo: dict) -> None:
    model, base = logo["model_on_baseline_points"], logo["baseline"]
    assert logo["held_out_units"] == 62 and model["points"] == base["points"] > 1500
    for m in ("tpot", "e2e"):
        assert model[m]["median_ape"] < base[m]["median_ape"]


def test_shipped_fit_states_the_error_of_each_level(lolo: dict, logo: dict) -> None:
    levels = load_fitted().level_errors
    assert set(levels) == {"fitted", "group", "unseen"}
    assert levels["group"]["median_ape_tpot"] == pytest.approx(lolo["model"]["tpot"]["median_ape"], rel=0.05)
    assert levels["unseen"]["median_ape_tpot"] == pytest.approx(logo["model"]["tpot"]["median_ape"], rel=0.05)
    assert levels["fitted"]["median_ape_tpot"] < levels["unseen"]["median_ape_tpot"]


def test_check_writes_per_point_predictions(tmp_path: Path) -> None:
    with open(POINTS, newline="") as fh:
        rows = list(csv.DictReader(fh))[:30]
    src = tmp_path / "pts.csv"
    with open(src, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        w.writerow(dict(rows[0], hardware="tpu-v9"))
    out = tmp_path / "pred.csv"
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "check", str(src), "--per-point", str(out),
                        "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    got = pl.read_csv(out)
    assert got.height == 31
    assert got.columns[:len(rows[0])] == list(rows[0])  # the input rows, in order, then the predictions
    assert {"ttft_s", "tpot_s", "e2e_s", "calibration"} <= set(got.columns)
    assert got["hardware"].to_list() == [x["hardware"] for x in rows] + ["tpu-v9"]
    ok = got.head(30)
    assert (ok["tpot_s"] > 0).all() and set(ok["calibration"].to_list()) <= {"fitted", "group", "unseen"}
    assert got["tpot_s"][30] is None  # not covered: no prediction
    bad = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "check", str(src), "--per-point",
                          str(tmp_path / "no" / "dir" / "x.csv")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


def test_disaggregated_point_from_an_aggregated_sibling(points: pl.DataFrame) -> None:
    # a disaggregated deployment on hardware with no fit (GB200 removed, as in the ISL/OSL fold that never saw
    # it) borrows the aggregated sibling's terms (B200 SGLang), its prefill efficiency included (the first model
    # swapped in the prior 0.2, which sized the prefill pool 1.3-1.7x too fast), but not its queueing factor:
    # that one describes chunked prefills among decode steps, not a prefill pool's queue
    import copy

    import numpy as np

    from agentprof.replay.calibration import PRIOR_MEAN
    from agentprof.replay.fidelity import check
    from agentprof.replay.points import point_features, predict

    fitted = copy.deepcopy(load_fitted())
    blackwell_disagg = ("gb200/", "gb300/", "b200/dynamo-", "b300/dynamo-")  # no disaggregated Blackwell fit left
    for level in ("group", "layout"):
        fitted.entries[level] = {k: e for k, e in fitted.entries[level].items()
                                 if not k.startswith(blackwell_disagg)}
    sel = points.filter((pl.col("framework") == "dynamo-sglang") & (pl.col("precision") == "fp4")
                        & (pl.col("hardware") == "gb200"))
    f = point_features(sel, CAT)
    key = f.keys[0]
    assert key is not None
    agg, how = fitted.lookup(key, CAT)
    assert how.startswith("nearest group") and agg.key == "b200/sglang/deepseek-r1/fp4/none"
    got = check(sel, fitted, CAT, f)
    assert set(got.table["level"].to_list()) == {"unseen"}
    from agentprof.replay.calibration import borrowed_handoff
    from agentprof.replay.points import PARAMS

    # nor its hand-off (an aggregated engine never makes one): the count of the same model's stacks on the same
    # engine (SGLang's decode scheduler under Dynamo-SGLang and SGLang-disagg), weighted by their points
    sib = [e for e in fitted.entries["group"].values() if e.attrs["model"] == "deepseek-r1"
           and e.attrs["framework"] in ("dynamo-sglang", "sglang-disagg")]
    assert {e.attrs["framework"] for e in sib} == {"dynamo-sglang", "sglang-disagg"}
    h = borrowed_handoff(fitted, key)
    w = np.array([e.points for e in sib], dtype=float)
    assert h == pytest.approx(np.exp(np.sum(w * np.log([e.param("handoff") for e in sib])) / w.sum()))
    assert h != pytest.approx(agg.param("handoff"))
    theta = np.tile(agg.theta, (len(f), 1))
    theta[:, PARAMS.index("q")] = PRIOR_MEAN["q"]
    theta[:, PARAMS.index("handoff")] = h
    ttft, _, _ = predict(f, theta, fitted.attn_eff)
    np.testing.assert_allclose(got.table["pred_ttft"].to_numpy(), ttft)
    # (the sibling's own terms differ from those swapped in, so the check above tells them apart: the prior's
    # prefill efficiency or the sibling's own hand-off in their place move the first tokens; its queueing factor
    # fits at the prior's 1.0 with the closed-loop wait, 1.3 with the open queue before)
    for i, v in ((PARAMS.index("mfu_pf"), PRIOR_MEAN["mfu_pf"]), (PARAMS.index("handoff"), agg.param("handoff"))):
        other = theta.copy()
        other[:, i] = v
        assert np.abs(predict(f, other, fitted.attn_eff)[0] / ttft - 1).max() > 0.05


def test_the_nearest_point_lookup_stays_on_its_hardware_framework_and_model() -> None:
    from agentprof.replay.fidelity import nearest_lookup

    def rows(**cols: list) -> pl.DataFrame:
        n = len(cols["conc"])
        base = {"hardware": ["b200"] * n, "framework": ["vllm"] * n, "model_prefix": ["gptoss"] * n, "isl": [1024] * n,
                "osl": [1024] * n, "tp": [8] * n, "median_ttft_s": [0.1] * n, "median_tpot_s": [0.01] * n,
                "median_e2el_s": [10.0] * n}
        return pl.DataFrame({**base, **cols})

    train = rows(conc=[4, 64, 64, 64], isl=[1024, 1024, 1024, 1024], osl=[1024, 1024, 8192, 1024],
                 framework=["vllm", "vllm", "vllm", "trt"], median_ttft_s=[0.05, 0.2, 0.3, 9.0])
    test = rows(conc=[48, 48, 48], osl=[1024, 8192, 1024], hardware=["b200", "b200", "h100"])
    got = nearest_lookup(test, train, ("hardware", "framework", "model_prefix"))["base_ttft"].to_list()
    # nearest concurrency at the same lengths; the 8K-output point for the 8K-output test; none on other hardware,
    # and never the other framework's point however close
    assert got == [0.2, 0.3, None]


@pytest.fixture(scope="module")
def official_priced() -> tuple:
    """scripts/error_by_slice.py as a module, the official points and their prices by the shipped fit."""
    import importlib.util

    from agentprof.replay.points import load_points

    spec = importlib.util.spec_from_file_location("error_by_slice", ROOT / "scripts" / "error_by_slice.py")
    assert spec is not None and spec.loader is not None
    ebs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ebs)
    api = load_points(ROOT / ebs.OFFICIAL)
    return ebs, api, ebs.priced(api)


def test_the_disaggregated_first_token_share_docs_quote_is_the_fit_s(official_priced: tuple) -> None:
    # docs/DEVICE_MODEL.md §9 says what a disaggregated first token rests on (scripts/error_by_slice.py): with
    # every unit's hand-off at zero steps the official disaggregated points lose most of their predicted TTFT at
    # 1K prompts and less at 8K, and the fit's own 1K points miss more disaggregated than aggregated
    import re

    ebs, api, t = official_priced
    line = ebs.handoff_share(api, t)
    share_1k, share_8k, agg, dis = (float(x) for x in re.findall(r"([\d.]+)%", line))
    assert 50 < share_1k < 90 and 5 < share_8k < share_1k and agg < dis
    doc = " ".join((ROOT / "docs" / "DEVICE_MODEL.md").read_text().split())
    assert (f"a median {share_1k:.0f} % of the predicted first token at 1K prompts, {share_8k:.0f} % at 8K" in doc
            and f"TTFT is off {dis:.1f} % disaggregated, {agg:.1f} % aggregated" in doc)


def test_the_8k_prefill_step_docs_quote_is_the_fit_s(official_priced: tuple) -> None:
    # docs/DEVICE_MODEL.md §4 (family 7) says how the 8K-minus-1K first token at light load compares: about right
    # in the median, far off for some stacks (scripts/error_by_slice.py prefill_step)
    import re

    ebs, _, t = official_priced
    line = ebs.prefill_step(t)
    med, q1, q3 = (float(x) for x in re.search(r"median ([\d.]+) \[([\d.]+)–([\d.]+)\]", line).groups())
    lo, lo_stack, hi, hi_stack = re.search(r"from ([\d.]+) \(([^)]+)\) to ([\d.]+) \(([^)]+)\)", line).groups()
    assert q1 < med < q3 and float(lo) < q1 and float(hi) > q3
    doc = " ".join((ROOT / "docs" / "DEVICE_MODEL.md").read_text().split())
    assert (f"8K-minus-1K first token is {med:.2f}× (quartiles {q1:.2f}–{q3:.2f}), by stack {lo}× ({lo_stack}) to "
            f"{hi}× ({hi_stack})") in doc


def test_the_8k_prefill_bound_docs_quote_is_the_script_s(official_priced: tuple) -> None:
    # docs/DEVICE_MODEL.md §4 (family 7) says how far a right 8K prefill speed per stack would take the model
    # (scripts/error_by_slice.py prefill_bound): a factor chosen per run fits its points at least as well as one
    # per stack, and neither reaches the targets, so the doc can say the rest is load
    import re

    ebs, api, _ = official_priced
    line = ebs.prefill_bound(api)
    stack, run = (re.search(rf"per {k}: ([\d.]+) / [\d.]+ / [\d.]+ %, p90 TTFT ([\d.]+) %, (\d+) > 5x "
                            r"\(TTFT aggregated ([\d.]+) %, disaggregated ([\d.]+) %\)", line).groups()
                  for k in ("stack", "run"))
    assert float(run[0]) <= float(stack[0]) and float(stack[0]) > 15 and float(stack[4]) > float(stack[3])
    doc = " ".join((ROOT / "docs" / "DEVICE_MODEL.md").read_text().split())
    assert (f"leaves TTFT {stack[0]} % (per run {run[0]} %), p90 {stack[1]} %, {stack[2]} off 5×; aggregated "
            f"{stack[3]} %, disaggregated {stack[4]} %") in doc


def test_check_prints_whole_slice_names_at_80_columns(tmp_path: Path) -> None:
    # the error table at 80 columns: no line wider, and a long slice name (a framework with its point count)
    # stays on one line beside its figures instead of folding under them
    import os

    api = pl.read_csv(ROOT / "data" / "inferencex" / "official_api_points.csv", infer_schema_length=100000)
    src = tmp_path / "pts.csv"
    api.filter(pl.col("framework").is_in(["dynamo-sglang", "sglang-disagg"])).head(40).write_csv(src)
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "check", str(src)], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    lines = [x.rstrip() for x in r.stdout.splitlines()]
    assert max(len(x) for x in lines) <= 80
    named = [x for x in lines if x.startswith("framework dynamo-sglang")]
    assert len(named) == 2 and all(x.startswith("framework dynamo-sglang (") and x.endswith("%") for x in named)
    assert not any(x.startswith("(") for x in lines)  # no count folded onto a line of its own


def test_leave_out_prints_the_lookup_beside_the_model_within_80_columns(tmp_path: Path) -> None:
    # the lookup baseline and the model on the same points, one line each, every figure whole at 80 columns
    import os
    import re

    src = tmp_path / "pts.csv"
    pl.read_csv(POINTS, infer_schema_length=100000).filter(pl.col("hardware") == "h200").head(60).write_csv(src)
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "check", str(src), "--leave-out", "layout"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    lines = [x.rstrip() for x in r.stdout.splitlines()]
    assert max(len(x) for x in lines) <= 80
    pair = [x for x in lines if re.fullmatch(r"  (lookup baseline|model) +\d+% / \d+% / \d+%", x)]
    assert [x.split()[0] for x in pair] == ["lookup", "model"]


def test_held_out_prompts_check_the_points_longer_than_the_fit_saw(tmp_path: Path) -> None:
    # the official points with prompts longer than every calibration point are the family the fit never saw: the
    # check picks exactly those, and its summary (the figure the demo quotes) is the per-point predictions' own
    import json
    import math
    import statistics

    api = pl.read_csv(ROOT / "data" / "inferencex" / "official_api_points.csv", infer_schema_length=100000)
    longest = pl.read_csv(POINTS, infer_schema_length=100000)["isl"].max()
    held = api.filter(pl.col("isl") > longest)
    assert 0 < held.height < api.height
    per = tmp_path / "per.csv"
    r = subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "check",
                        "data/inferencex/official_api_points.csv", "--held-out-prompts", "--json", "--per-point",
                        str(per)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["points"] == held.height and 0 < s["covered"] <= held.height
    assert f"> {longest:,} tokens" in s["mode"]
    rows = list(csv.DictReader(per.open()))
    assert len(rows) == held.height and all(int(x["isl"]) > longest for x in rows)
    priced = [x for x in rows if x["ttft_s"]]
    assert len(priced) == s["covered"]
    ape = [abs(float(x["ttft_s"]) / float(x["median_ttft_s"]) - 1) for x in priced]
    assert statistics.median(ape) == pytest.approx(s["ttft"]["median_ape"], rel=1e-6)

    def off(x: dict) -> bool:
        pairs = (("ttft_s", "median_ttft_s"), ("tpot_s", "median_tpot_s"), ("e2e_s", "median_e2el_s"))
        ratios = [float(x[p]) / float(x[m]) for p, m in pairs if x[p] and x[m] and float(x[m]) > 0]
        return any(v > 5 or v < 0.2 for v in ratios if math.isfinite(v))

    assert s["off_5x"] == sum(off(x) for x in priced)


def test_held_out_prompts_refuse_what_they_cannot_check(tmp_path: Path) -> None:
    # a fit checked as it was made: not with a refit; and a file without longer prompts is named, not summarized
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "agentprof.cli", "devices", "check", *args],
                              capture_output=True, text=True, cwd=ROOT)

    r = run("data/inferencex/official_api_points.csv", "--held-out-prompts", "--cross-validate")
    assert r.returncode != 0 and "--held-out-prompts" in r.stderr and "Traceback" not in r.stderr
    r = run(str(POINTS), "--held-out-prompts")
    assert r.returncode != 0 and "no point has a prompt longer than the fit's longest (1,024 tokens)" in r.stderr
    assert "Traceback" not in r.stderr
    r = run("data/inferencex/agentic_kimi_points.csv", "--simulate", "--held-out-prompts")  # not silently ignored
    assert r.returncode != 0 and "not agentic ones" in r.stderr and "Traceback" not in r.stderr


def test_off_by_counts_a_point_once_whichever_metric_misses() -> None:
    from agentprof.replay.fidelity import off_by

    t = pl.DataFrame({"pred_ttft": [6.0, 1.0, 4.0, 1.0, 7.0], "meas_ttft": [1.0, 6.0, 1.0, float("nan"), 1.0],
                      "pred_tpot": [1.0, 1.0, 1.0, 1.0, 0.1], "meas_tpot": [1.0, 1.0, 1.0, 1.0, 1.0],
                      "pred_e2e": [1.0, 1.0, 1.0, 1.0, 1.0], "meas_e2e": [1.0, 1.0, 1.0, 1.0, 1.0]})
    assert off_by(t, 5.0) == 3  # 6x over, 6x under, and the last twice over: once
    assert off_by(t, 3.0) == 4
