#!/usr/bin/env python3
"""Benchmark the report stage: `agentprof report` end to end on the largest shared Claude Code session (with
its subagents) and on the shared kv-cache-tester folder, the time of each step, the file size, and the
exports; plus the timeline on a synthetic 200,000-span trace.

Baselines measured in the same run: the time to merely ``json``-load the input files (the floor any tool
pays to read them) and the time to import them (``load_any``). Usage: .venv/bin/python scripts/bench_report.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report_samples import REPORT_SAMPLES

AGENTPROF = [sys.executable, "-m", "agentprof.cli"]


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        out.extend(sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p])
    return out


def json_floor(paths: list[Path]) -> float:
    t = time.perf_counter()
    for f in _files(paths):
        raw = f.read_bytes()
        if f.suffix == ".jsonl":
            for line in raw.splitlines():
                if line.strip():
                    json.loads(line)
        else:
            json.loads(raw)
    return time.perf_counter() - t


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_input(name: str, paths: list[Path], tmp: Path) -> None:
    from agentprof.importers import load_any
    from agentprof.report.html import render_payload
    from agentprof.report.mooncake import write_mooncake
    from agentprof.report.payload import build_payload
    from agentprof.report.perfetto import write_perfetto
    from agentprof.report.stages import run_stages

    floor = best(lambda: json_floor(paths))
    t_import = best(lambda: load_any(paths))
    trace = load_any(paths)
    t_stages = best(lambda: run_stages(trace), repeat=2)
    res = run_stages(trace)
    t_payload = best(lambda: build_payload(trace, res.analysis, res.replay, res.cache, notes=res.notes,
                                           cache_model=res.cache_model))
    payload = build_payload(trace, res.analysis, res.replay, res.cache, notes=res.notes, cache_model=res.cache_model)
    t_html = best(lambda: render_payload(payload))
    t_perfetto = best(lambda: write_perfetto(trace, tmp / "p.json"))
    t_mooncake = best(lambda: write_mooncake(trace, tmp / "m.jsonl"))
    out = tmp / "report.html"
    walls = []
    for _ in range(3):  # the real command, interpreter start-up included
        t = time.perf_counter()
        subprocess.run([*AGENTPROF, "report", *map(str, paths), "-o", str(out)], check=True, cwd=tmp,
                       stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t)
    wall = min(walls)
    size = out.stat().st_size
    spans = trace.spans.height
    files = _files(paths)
    print(f"\n{name}: {spans:,} spans, {trace.model_calls.height:,} model calls, "
          f"{sum(f.stat().st_size for f in files) / 1e6:.1f} MB of input in {len(files)} files")
    print(f"  json-load floor        {floor:7.3f} s")
    print(f"  import (load_any)      {t_import:7.3f} s   {t_import / floor:5.1f}x floor")
    print(f"  stages (analysis, replay on 3 systems, 2 cache sweeps) {t_stages:7.3f} s")
    print(f"  report data            {t_payload:7.3f} s")
    print(f"  HTML page              {t_html:7.3f} s")
    print(f"  `agentprof report`     {wall:7.3f} s   {wall / floor:5.1f}x floor, {wall / t_import:5.1f}x import"
          f"   (target < 10 s)")
    print(f"  report size            {size / 1e6:7.3f} MB  ({size / max(1, spans):,.0f} B per span; target: a few MB)")
    print("  " + browser_timing(out))
    print(f"  export perfetto        {t_perfetto:7.3f} s,  mooncake {t_mooncake:7.3f} s")


def startup() -> float:
    """Seconds for the interpreter to start and load the CLI (a floor under every `agentprof` command)."""
    return best(lambda: subprocess.run([*AGENTPROF, "--help"], check=True, stdout=subprocess.DEVNULL))


def browser_timing(page: Path) -> str:
    """Load-and-draw time and mean redraw time of a report in headless Chromium, when one is installed."""
    import shutil

    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "browser: playwright not installed"
    if exe is None:
        return "browser: no Chromium found"
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=exe, headless=True, args=args,
                                                   viewport={"width": 1400, "height": 1000})
        pg = ctx.new_page()
        t = time.perf_counter()
        pg.goto(page.resolve().as_uri())
        pg.wait_for_selector("html[data-rendered]")
        load = time.perf_counter() - t
        redraw = pg.evaluate("""() => { const b = [...document.querySelectorAll('#timeline .btn')];
            const t = performance.now(); for (let i = 0; i < 20; i++) { b[0].click(); b[1].click(); }
            return (performance.now() - t) / 40; }""")
        ctx.close()
    return f"browser: opened and drawn in {load:.2f} s, {redraw:.1f} ms per zoom redraw"


def bench_synthetic(n: int = 200_000) -> None:
    import polars as pl

    from agentprof.report.html import render
    from agentprof.report.timeline import DEFAULT_MAX_SPANS, build_timeline
    from agentprof.trace import Trace, TraceMeta
    from agentprof.trace.schema import conform

    t0 = 1_700_000_000_000_000_000
    starts = [t0 + i * 5_000_000 for i in range(n)]
    df = conform(pl.DataFrame({
        "trace_id": ["t"] * (n + 1), "span_id": ["root"] + [f"s{i}" for i in range(n)],
        "parent_id": [None] + ["root"] * n, "session_id": ["s"] * (n + 1),
        "kind": ["agent"] + ["model" if i % 2 else "tool" for i in range(n)],
        "name": ["invoke_agent x"] + [f"span {i % 50}" for i in range(n)],
        "start_ns": [t0] + starts, "end_ns": [t0 + n * 5_000_000] + [s + 3_000_000 for s in starts],
        "timing": ["measured"] * (n + 1), "status": ["ok"] * (n + 1),
    }))
    t = time.perf_counter()
    tl = build_timeline(df)
    dt = time.perf_counter() - t
    t = time.perf_counter()
    page = render(Trace(TraceMeta(name="synthetic"), df))
    dr = time.perf_counter() - t
    print(f"\nsynthetic session, {n:,} spans: timeline data in {dt:.2f} s, shipped as {len(tl['spans']['start']):,} "
          f"spans (budget {DEFAULT_MAX_SPANS:,}); whole report {dr:.2f} s, {len(page) / 1e6:.2f} MB")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "synthetic.html"
        f.write_text(page, encoding="utf-8")
        print("  " + browser_timing(f))


def main() -> None:
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    print(f"interpreter + CLI start-up (`agentprof --help`): {startup():.3f} s")
    with tempfile.TemporaryDirectory() as d:
        for name, paths in REPORT_SAMPLES.items():
            bench_input(name, paths, Path(d))
    bench_synthetic()


if __name__ == "__main__":
    main()
