"""The figures README.md and docs/DEVICE_MODEL.md quote from the bundled kv-cache-tester samples are the ones the
commands they name print now (one name, one number): §7's replay table and finding, §10's serving table, and the
README's findings. A failure shows the text as it should read, to paste."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from agentprof.cli import main

ROOT = Path(__file__).resolve().parents[1]
KVCT = ROOT / "traces" / "samples" / "kv-cache-tester"
REPLAY_SYSTEMS = ("h200+x86", "b200+x86", "b200+vera", "gb200+grace", "rubin+vera", "jalapeno")
SERVING_SYSTEMS = ("h200+x86", "b200+x86", "gb200+grace", "rubin+vera", "jalapeno")
"""The five systems of §7's, §10's and §11's tables (b200+vera only sets §7's tokenizing figure)."""


def _json(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*args, "--json"])
    return json.loads(out.getvalue())


def _flat(path: Path) -> str:
    """The file's text with every run of white space one blank, so a sentence wrapped over lines reads whole."""
    return " ".join(path.read_text(encoding="utf-8").split())


def _systems(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in doc["systems"]}


@pytest.fixture(scope="module")
def single() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    doc = _json("replay", str(KVCT), *sum((["-s", s] for s in REPLAY_SYSTEMS), []))
    return doc["recorded"], _systems(doc)


@pytest.fixture(scope="module")
def serving() -> dict[str, dict[str, Any]]:
    return _systems(_json("replay", str(KVCT), *sum((["-s", s] for s in SERVING_SYSTEMS), []),
                          "--concurrency", "50"))


def _x(v: float) -> str:
    return f"{v:.2f}"


def _range(band: dict[str, Any] | None, key: str, fmt: Any, unit: str = "") -> str:
    """`` (lo–hi)`` of a system's band for ``key``, nothing where it has none or the ends print alike."""
    if not band or key not in band:
        return ""
    lo, hi = sorted(band[key])
    a, b = fmt(lo), fmt(hi)
    return "" if a == b else f" ({a}–{b}{unit})"


def _headline(rec: dict[str, Any], sys_: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures both the README and §7's finding quote: model-call speed-ups on H200 and Rubin, the range of
    task and agent-active speed-ups, and the hours that are users' turns and idle gaps."""
    return {"calls": [sys_[n]["model_calls_speedup"] for n in ("h200+x86", "rubin+vera")],
            "tasks": sorted(s["speedup_vs_recorded"] for s in sys_.values()),
            "active": sorted(s["speedup_vs_recorded_active"] for s in sys_.values()),
            "idle_h": (rec["e2e_s"] - rec["agent_active_s"]) / 3600}


def _two_digits(v: float) -> str:
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}" if v >= 1 else f"{v:.2f}"


def test_device_model_replay_table_and_finding(single) -> None:
    rec, sys_ = single
    text = _flat(ROOT / "docs" / "DEVICE_MODEL.md")
    rows = [f"| recorded (Claude API) | {rec['model_calls_s'] / 3600:.2f} h | 1.00x | {rec['e2e_s'] / 3600:.1f} h "
            "| 1.00x | 1.00x |"]
    for name in SERVING_SYSTEMS:
        s, band = sys_[name], sys_[name].get("band")
        minutes = _range(band, "model_calls_s", lambda v: f"{v / 60:.0f}")
        task_x = _range(band, "speedup_vs_recorded", _x, "x")
        active_x = _range(band, "speedup_vs_recorded_active", _x, "x")
        rows.append(f"| {name} | {s['model_calls_s'] / 60:.0f} min{minutes} | {_x(s['model_calls_speedup'])}x | "
                    f"{s['e2e_s'] / 3600:.1f} h | {_x(s['speedup_vs_recorded'])}x{task_x} | "
                    f"{_x(s['speedup_vs_recorded_active'])}x{active_x} |")
    missing = [r for r in rows if r not in text]
    assert not missing, "DEVICE_MODEL.md §7 should read:\n" + "\n".join(rows)

    h = _headline(rec, sys_)
    calls, tasks, active, idle_h = h["calls"], h["tasks"], h["active"], h["idle_h"]
    vera_s = sys_["b200+x86"]["model_calls_s"] - sys_["b200+vera"]["model_calls_s"]
    finding = (f"the model calls get {_x(calls[0])}× (H200) to {_x(calls[1])}× (Rubin) faster, the whole tasks "
               f"{_x(tasks[0])}× to {_x(tasks[-1])}×: {idle_h:.1f} of the {rec['e2e_s'] / 3600:.1f} recorded hours are "
               f"the users' turns and idle gaps, and model calls are {100 * rec['model_share']:.1f} % of the wall "
               f"time, so even an infinitely fast model caps the gain at {_x(rec['amdahl_bound'])}×. On the "
               f"agent-active clock (waits left out on both sides) the tasks get {_x(active[0])}× to "
               f"{_x(active[-1])}× faster, at most {_x(rec['amdahl_bound_active'])}×")
    assert finding in text, "DEVICE_MODEL.md §7's finding should read:\n" + finding
    assert f"speeds the server's tokenizing ({vera_s:.0f} s)" in text, f"Vera's tokenizing saves {vera_s:.0f} s"


def test_readme_findings(single, serving) -> None:
    rec, sys_ = single
    text = _flat(ROOT / "README.md")
    h = _headline(rec, sys_)
    calls, tasks, active, idle_h = h["calls"], h["tasks"], h["active"], h["idle_h"]
    act = rec["agent_active_s"]
    expect = [
        f"Model calls get {_x(calls[0])}× (H200 + x86) to {_x(calls[1])}× (Rubin + Vera) faster, whole tasks "
        f"{_x(tasks[0])}× to {_x(tasks[-1])}×. {idle_h:.1f} of the {rec['e2e_s'] / 3600:.1f} recorded hours are "
        f"users' turns and idle gaps; model calls are {100 * rec['model_share']:.0f} % of the wall, so an infinitely "
        f"fast model caps the gain at {_x(rec['amdahl_bound'])}×.",
        f"On the agent's own time** ({act / 3600:.1f} hours) model calls are {100 * rec['model_s'] / act:.0f} % and "
        f"tools {100 * rec['tool_s'] / act:.0f} %: tasks get {_x(active[0])}× to {_x(active[-1])}× faster, at most "
        f"{_x(rec['amdahl_bound_active'])}×",
    ]
    p50 = sorted(s["serving"]["ttft_s"]["p50"] for s in serving.values())
    p99 = sorted(s["serving"]["ttft_s"]["p99"] for s in serving.values())
    expect.append(f"median time to first token {p50[0]:.1f}–{p50[-1]:.1f} s on every system, p99 "
                  f"{p99[0]:.0f}–{p99[-1]:.0f} s")
    missing = [e for e in expect if e not in text]
    assert not missing, "README.md should read:\n" + "\n".join(missing)


def test_device_model_serving_table(serving) -> None:
    text = _flat(ROOT / "docs" / "DEVICE_MODEL.md")
    rows = []
    for name in SERVING_SYSTEMS:
        sv = serving[name]["serving"]
        ttft, hits = sv["ttft_s"], sv["hit_share"]
        pool = sv["kv_pool_tokens"] * sv["replicas"]
        rows.append(f"{_two_digits(ttft['p50'])} s / {_two_digits(ttft['p99'])} s | {sv['tpot_s']['p50'] * 1e3:.0f} ms "
                    f"| {100 * hits['hbm']:.0f} % / {100 * hits['cpu']:.0f} % | {pool / 1e6:.2f}M | "
                    f"{sv['energy_wh_per_task']:.0f} | {sv['cost_per_task']['self_hosted_usd']:.2f} |")
    lines = (ROOT / "docs" / "DEVICE_MODEL.md").read_text(encoding="utf-8").splitlines()
    missing = [name for name, r in zip(SERVING_SYSTEMS, rows, strict=True)
               if not any(line.startswith(f"| {name} |") and line.endswith(r) for line in lines)]
    assert not missing, "DEVICE_MODEL.md §10's rows should end:\n" + "\n".join(
        f"{n}: {r}" for n, r in zip(SERVING_SYSTEMS, rows, strict=True))
    rate = sorted(s["serving"]["tasks_per_hour"] for s in serving.values())
    assert f"tasks per hour ({rate[0]:.0f}–{rate[-1]:.0f})" in text, f"tasks per hour {rate[0]:.0f}–{rate[-1]:.0f}"


def test_device_model_speculative_table(single) -> None:
    _, plain = single
    names = SERVING_SYSTEMS  # §11 compares the same five systems
    spec = _systems(_json("replay", str(KVCT), *sum((["-s", s] for s in names), []), "--speculative", "eagle3"))
    text = _flat(ROOT / "docs" / "DEVICE_MODEL.md")
    rows = []
    for name in names:
        s, p = spec[name], plain[name]
        lo, hi = sorted(s["band"]["model_calls_s"])
        rows.append(f"| {name} | {p['model_calls_s'] / 60:.0f} min | {s['model_calls_s'] / 60:.0f} min "
                    f"({lo / 60:.0f}–{hi / 60:.0f}) | {_x(p['speedup_vs_recorded_active'])}x → "
                    f"{_x(s['speedup_vs_recorded_active'])}x | "
                    f"{s['deployments'][0]['speculative']['draft_s_per_step'] * 1e3:.2f} ms |")
    missing = [r for r in rows if r not in text]
    assert not missing, "DEVICE_MODEL.md §11 should read:\n" + "\n".join(rows)
