"""``agentprof demo`` as a Python function: capture a real agent run on a loopback model server, import a real
public session, analyze and replay both, and write one report with the two side by side.

Stages, in order: (1) the demo agent runs unmodified under ``agentprof.profile`` against a scripted model whose
latencies come from the replay stage's device model (:mod:`agentprof.demo.agent_run`); (2) a bundled real
trace is imported (:mod:`agentprof.demo.samples`); (3) both go through analysis, replay on the chosen systems
and the cache sweep (:func:`agentprof.report.stages.run_stages`); (4) the device model's held-out error is
measured (:mod:`agentprof.demo.calibration_error`); (5) ``reports/demo.html`` is written
(:mod:`agentprof.report.compare`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprof.demo.agent_run import AgentRun, capture_agent_run
from agentprof.demo.calibration_error import CalibrationError, measured_error
from agentprof.demo.latency import DEFAULT_MODEL, DEFAULT_SYSTEM, DeviceLatency
from agentprof.demo.samples import DEFAULT_SAMPLE, SAMPLES, sample_paths
from agentprof.errors import AgentprofError
from agentprof.trace import Trace

CAPTURED_LABEL = "captured demo run (simulated model latencies)"
REPORT_NAME = "demo.html"


@dataclass
class TraceResult:
    """One trace of the demo with its stage results."""

    label: str
    about: str
    trace: Trace
    paths: list[Path]
    analysis: Any
    replay: Any
    cache: Any
    cache_model: str | None
    notes: dict[str, str]


@dataclass
class DemoResult:
    """Everything the demo produced: the captured run, both traces' results, the report and the timings."""

    agent: AgentRun
    captured: TraceResult
    imported: TraceResult
    report_path: Path
    compare: dict[str, Any]  # the report's comparison data (table and what-if rows, notes)
    calibration: CalibrationError | None
    systems: list[str]
    serve_on: str
    disclosure: list[str]
    timings: dict[str, float] = field(default_factory=dict)


def _resolve_systems(systems: Sequence[str]) -> list[str]:
    """The systems to replay on, checked against the catalog before anything runs."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.report.stages import DEFAULT_SYSTEMS

    chosen = list(dict.fromkeys(systems)) or list(DEFAULT_SYSTEMS)
    cat = load_catalog()
    for s in chosen:
        cat.system(s)  # raises CatalogError naming the known systems
    return chosen


def _sample(sample: str) -> tuple[str, str, list[Path]]:
    """(label, description, paths) of a bundled sample key or a user's trace path."""
    if sample in SAMPLES:
        s = SAMPLES[sample]
        return s.label, s.about + " — attribution in traces/samples/SOURCES.md", sample_paths(s)
    p = Path(sample)
    if not p.exists():
        raise AgentprofError(f"--sample {sample!r}: neither a bundled sample ({', '.join(SAMPLES)}) nor an "
                             "existing trace file or folder")
    return f"imported trace: {p.name}", f"your trace {p}", [p]


def _stages(label: str, about: str, trace: Trace, paths: list[Path], systems: list[str]) -> TraceResult:
    from agentprof.report.stages import run_stages

    res = run_stages(trace, systems, serving=[])  # the demo's page has no serving panel: not simulated
    notes = {k: v for k, v in res.notes.items() if k != "serving"}
    return TraceResult(label, about, trace, paths, res.analysis, res.replay, res.cache, res.cache_model, notes)


def disclosure(agent: AgentRun, imported: TraceResult, calibration: CalibrationError | None) -> list[str]:
    """What in the demo is simulated, estimated and real, a short paragraph each (at most 60 words)."""
    lat = agent.latency
    cal = calibration.sentence() if calibration else \
        "Its measured error is in docs/DEVICE_MODEL.md (the InferenceX points are not in this installation)"
    standins = sorted({v for v in (getattr(imported.replay, "standins", None) or {}).values()})
    return [
        "Simulated: the captured run's model. A scripted model on 127.0.0.1 (no network, no weights) writes the "
        f"answers, with the device cost model's first-token and per-token times for {lat.display}.",
        "Simulated: every device what-if, from an analytical cost model, not a measurement. " + cal + ".",
        "Estimates: Jalapeño's parameters are declared, with no measurement to check them."
        + (" Closed models are replayed through open stand-ins: " + "; ".join(standins) + "." if standins else ""),
        "Real: the agent code (agentprof/demo/agent.py, unmodified), the openai SDK streaming over HTTP, its "
        "tools on a fresh copy of the sample repository, the test runs in child processes, the JSON parsing of "
        "tool arguments, and the capture itself (agentprof.profile, agentprof.tool from the outside).",
        f"Real: the imported trace, as its agent recorded it: {imported.about}.",
    ]


def run_demo(out_dir: str | Path = "reports", traces_dir: str | Path = "traces", systems: Sequence[str] = (),
             serve_on: str = DEFAULT_SYSTEM, sample: str = DEFAULT_SAMPLE, model: str = DEFAULT_MODEL,
             check_calibration: bool = True, step: Callable[[str], None] | None = None,
             repo_dir: str | Path | None = None) -> DemoResult:
    """Run the whole demo (see the module docstring) and return its results; ``step`` hears progress lines.
    ``repo_dir`` keeps the agent's copy of the sample repository there (default: a temporary folder).

    User mistakes (unknown system or sample, unwritable folders) raise :class:`AgentprofError` before the agent
    runs where they can be checked up front.
    """
    from agentprof.importers import load_any
    from agentprof.report.compare import ComparePart, build_compare_payload
    from agentprof.report.html import render_payload

    say = step or (lambda _msg: None)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    chosen = _resolve_systems(systems)
    latency = DeviceLatency(serve_on, model)
    label, about, paths = _sample(sample)
    out = Path(out_dir) / REPORT_NAME

    say(f"agentprof demo: a scripted {latency.short} answers on 127.0.0.1; running the demo agent")
    t0 = time.perf_counter()
    agent = capture_agent_run(traces_dir, latency, repo_dir=repo_dir)
    timings["agent_run_s"] = time.perf_counter() - t0
    say(f"the agent fixed the bug; captured {agent.trace_path}")
    captured_trace = load_any(agent.trace_path)
    t0 = time.perf_counter()
    imported_trace = load_any(paths)
    timings["import_s"] = time.perf_counter() - t0
    say(f"imported {', '.join(p.name for p in paths)}: {imported_trace.spans.height:,} spans")

    t0 = time.perf_counter()
    captured = _stages(CAPTURED_LABEL, f"the bundled demo agent fixing a planted bug; {agent.after.ran} tests pass "
                       "at the end", captured_trace, [agent.trace_path], chosen)
    imported = _stages(label, about, imported_trace, paths, chosen)
    timings["stages_s"] = time.perf_counter() - t0
    say(f"analyzed both traces and replayed them on {', '.join(chosen)}")
    if check_calibration:
        say("checking the device model on InferenceX prompts longer than its fit saw (held out)")

    t0 = time.perf_counter()
    calibration = measured_error() if check_calibration else None
    timings["calibration_s"] = time.perf_counter() - t0

    notes = disclosure(agent, imported, calibration)
    t0 = time.perf_counter()
    parts = [ComparePart(r.label, r.trace, r.analysis, r.replay, r.cache, r.notes, r.cache_model, r.about)
             for r in (captured, imported)]
    payload = build_compare_payload(parts, title="agentprof demo: a captured agent run beside a real session",
                                    notes=notes)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_payload(payload), encoding="utf-8")
    except OSError as e:
        raise AgentprofError(f"{out}: cannot write the report: {e.strerror or e}") from None
    timings["report_s"] = time.perf_counter() - t0
    timings["total_s"] = time.perf_counter() - t
    return DemoResult(agent, captured, imported, out, payload["compare"], calibration, chosen, serve_on, notes,
                      timings)
