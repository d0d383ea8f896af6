"""Capacity at an SLO: the largest concurrency a system serves while latency percentiles stay within bounds.

Concurrency doubles from 1 until the SLO breaks, then bisects between the last passing and the first failing
value (TTFT and queue percentiles do not decrease with concurrency). The answer is the serving object at that
concurrency: tasks per hour, per kW, energy and cost per task.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentprof.catalog import CatalogError, replayed_model
from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.errors import AgentprofError
from agentprof.replay.context import beyond_context, context_note
from agentprof.replay.serving.config import ServingConfig
from agentprof.replay.serving.sessions import SessionPlan, build_plan
from agentprof.replay.serving.simulate import simulate
from agentprof.trace.schema import Trace

_SLO = re.compile(r"^\s*(ttft|tpot|queue|task)_(p50|p90|p99)\s*=\s*([0-9.]+(?:e-?\d+)?)\s*(ms|s|min|h)?\s*$", re.I)
_UNIT = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, None: 1.0}


def parse_slo(text: str) -> tuple[str, str, float]:
    """``ttft_p99=5s`` → ``("ttft", "p99", 5.0)`` (units ms, s, min, h; seconds by default)."""
    m = _SLO.match(text)
    if not m:
        raise AgentprofError(f"--slo {text!r}: expected METRIC_PCT=VALUE with METRIC ttft, tpot, queue or task, "
                             "PCT p50, p90 or p99, e.g. ttft_p99=5s or tpot_p99=50ms")
    metric, pct, val, unit = m.group(1).lower(), m.group(2).lower(), float(m.group(3)), m.group(4)
    if metric == "task" and pct == "p99":
        raise AgentprofError(f"--slo {text!r}: task time is reported as p50 and p90 only")
    if val <= 0:
        raise AgentprofError(f"--slo {text!r}: the bound must be positive")
    return metric, pct, val * _UNIT[unit.lower() if unit else None]


def _value(serving: dict[str, Any], metric: str, pct: str) -> float:
    v = serving[f"{metric}_s"][pct]
    return float("inf") if v is None else float(v)


def meets(serving: dict[str, Any], slos: Sequence[tuple[str, str, float]]) -> bool:
    return all(_value(serving, m, p) <= b for m, p, b in slos)


@dataclass
class CapacityRow:
    system: str
    concurrency: int | None = None
    serving: dict[str, Any] | None = None
    first_failing: dict[str, Any] | None = None
    tried: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    band: dict[str, Any] | None = None
    """With every ranged estimate at its fast / slow end: ``concurrency`` [fast, slow] and ``ranged``."""

    def to_dict(self) -> dict[str, Any]:
        s = self.serving or {}
        cost = s.get("cost_per_task") or {}
        return {"system": self.system, "concurrency": self.concurrency, "tasks_per_hour": s.get("tasks_per_hour"),
                "tasks_per_hour_per_kw": s.get("tasks_per_hour_per_kw"),
                "energy_wh_per_task": s.get("energy_wh_per_task"), "cost_per_task": cost or None,
                "serving": self.serving, "first_failing": self.first_failing, "tried": self.tried,
                **({"band": self.band} if self.band else {}), **({"error": self.error} if self.error else {})}


def _slo_text(slos: Sequence[tuple[str, str, float]]) -> str:
    return ", ".join(f"{m}_{p} <= {b:g} s" for m, p, b in slos)


def find_capacity(plan: SessionPlan, resolved: Any, slos: Sequence[tuple[str, str, float]], base: ServingConfig,
                  max_concurrency: int = 1024) -> CapacityRow:
    """Largest concurrency in ``1..max_concurrency`` whose simulation meets every SLO on ``resolved``."""
    row = CapacityRow(resolved.system.key)
    cache: dict[int, dict[str, Any]] = {}

    def run(n: int) -> dict[str, Any]:
        if n not in cache:
            # the search compares latencies only: no lever simulations at each point
            cfg = ServingConfig(**{**base.__dict__, "concurrency": n, "levers": False})
            cache[n] = simulate(plan, resolved, cfg).serving
            row.tried.append({"concurrency": n, **{f"{m}_{p}_s": _value(cache[n], m, p) for m, p, _ in slos},
                              "meets": meets(cache[n], slos)})
        return cache[n]

    if not meets(run(1), slos):
        got = ", ".join(f"{m}_{p} = {_value(cache[1], m, p):.3g} s" for m, p, _ in slos)
        row.error = f"no concurrency meets {_slo_text(slos)}: even one session gets {got}"
        return row
    lo, hi = 1, None
    n = 2
    while n <= max_concurrency:
        if meets(run(n), slos):
            lo = n
            n *= 2
        else:
            hi = n
            break
    if hi is None and lo < max_concurrency:
        if meets(run(max_concurrency), slos):
            lo = max_concurrency
        else:
            hi = max_concurrency
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(run(mid), slos):
            lo = mid
        else:
            hi = mid
    row.concurrency = lo
    row.serving = cache[lo]
    row.first_failing = ({"concurrency": hi, **{f"{m}_{p}_s": _value(cache[hi], m, p) for m, p, _ in slos}}
                         if hi is not None else None)
    row.tried.sort(key=lambda x: x["concurrency"])
    return row


def plan_for(trace: Trace, model: str | None, base: ServingConfig, cat: HardwareCatalog) -> tuple[SessionPlan, Any]:
    """The sessions plan of the calls of the most used (catalog or stand-in) model, and that model."""

    extra = tuple(p for p in cat.files if not p.endswith(("accelerators.toml", "hosts.toml", "systems.toml")))
    calls = trace.spans.filter(trace.spans.get_column("kind") == "model")
    if not calls.height:
        raise AgentprofError("no model calls in the input: the serving simulation needs recorded model calls")
    resolved_models: dict[str | None, Any] = {}
    counts: dict[str, int] = {}
    keys: list[str] = []
    for nm in calls.get_column("model").to_list():
        if nm not in resolved_models:
            resolved_models[nm] = replayed_model(nm, model, extra)[0]
        k = resolved_models[nm].key
        keys.append(k)
        counts[k] = counts.get(k, 0) + 1
    main = max(counts, key=lambda k: counts[k])
    spec = next(m for m in resolved_models.values() if m.key == main)
    keep = {(t, s) for t, s, k in zip(calls.get_column("trace_id").to_list(), calls.get_column("span_id").to_list(),
                                      keys, strict=True) if k == main}
    plan = build_plan(trace, base.cap_wait_s, base.scope, keep=keep)
    sim = plan.simulated  # the calls the simulation prices
    d = beyond_context(spec, plan.input_tokens[sim].astype(float), plan.output_tokens[sim].astype(float))
    if d:
        plan.notes.append(context_note(spec, d, base.overflow))
    return plan, spec


def capacity(trace: Trace, systems: Sequence[str], slos: Sequence[str], model: str | None = None,
             base: ServingConfig | None = None, catalog: HardwareCatalog | None = None, fitted: Any = None,
             max_concurrency: int = 1024, bands: bool = True) -> dict[str, Any]:
    """``agentprof capacity``: per system, the largest concurrency meeting ``slos`` and what it serves. With
    ``bands``, a system resting on ranged estimates (catalog ranges, the agentic deployment's estimated CPU tier)
    is searched twice more with every range at its fast and at its slow end: its ``band``."""
    from agentprof.replay.calibration import load_fitted, user_fitted_in_use
    from agentprof.replay.systems import resolve

    if not slos:
        raise AgentprofError("name at least one SLO, e.g. --slo ttft_p99=5s")
    if not systems:
        raise AgentprofError("name at least one system (see `agentprof devices list`)")
    if max_concurrency < 1:
        raise AgentprofError(f"--max-concurrency must be at least 1, got {max_concurrency}")
    parsed = [parse_slo(s) for s in slos]
    cat = catalog or load_catalog()
    base = base or ServingConfig()
    base.check()
    sys_objs = [cat.system(s) for s in systems]
    own_fit = user_fitted_in_use() if fitted is None else None
    fitted = fitted if fitted is not None else load_fitted()
    plan, spec = plan_for(trace, model, base, cat)
    if own_fit is not None:
        plan.notes.append(f"the device model uses your own fit {own_fit} (written by `agentprof devices fit`), not "
                          "the shipped one; delete that file to go back")
    rows = []
    for system in sys_objs:
        try:
            r = resolve(system, spec, cat, fitted)
        except CatalogError as e:
            rows.append(CapacityRow(system.key, error=str(e)))
            continue
        row = find_capacity(plan, r, parsed, base, max_concurrency)
        if bands:  # also where one session misses: the fast end may meet it
            row.band = _band(plan, system, spec, cat, fitted, parsed, base, max_concurrency, r)
        rows.append(row)
    if all(r.error for r in rows):
        def fast_end(r: CapacityRow) -> str:
            n = r.band["concurrency"][0] if r.band else 0
            return f" (with every ranged estimate at its fast end: up to {n} session(s))" if n else ""

        raise AgentprofError("; ".join(f"{r.system}: {r.error}{fast_end(r)}" for r in rows))
    return {"slo": [{"metric": m, "percentile": p, "bound_s": b} for m, p, b in parsed], "model": spec.key,
            "sessions": plan.n_sessions, "calls": plan.n_calls, "max_concurrency": max_concurrency,
            "systems": [r.to_dict() for r in rows], "notes": plan.notes}


def _band(plan: SessionPlan, system: Any, spec: Any, cat: HardwareCatalog, fitted: Any,
          slos: Sequence[tuple[str, str, float]], base: ServingConfig, max_concurrency: int,
          resolved: Any) -> dict[str, Any] | None:
    """The capacity with every ranged estimate at its fast and at its slow end (``concurrency``: [fast, slow];
    0 where even one session misses the SLO), and which numbers moved; None when nothing is ranged."""
    from agentprof.replay.bands import banded, corner_system, evidence
    from agentprof.replay.serving.deployment import estimated_tier
    from agentprof.replay.systems import resolve

    moved = banded(system, estimated_tier(resolved, base))
    if not moved:
        return None
    ends = []
    for corner in ("fast", "slow"):
        try:
            got = find_capacity(plan, resolve(corner_system(system, corner), spec, cat, fitted), slos, base,
                                max_concurrency)
        except CatalogError:
            return None
        ends.append(got.concurrency or 0)
    return {"ranged": moved, "evidence": evidence(system, moved), "concurrency": ends}
