"""TTFT p99 and tasks per hour against concurrency, per system: the serving panel of the report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentprof.catalog import CatalogError
from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.replay.serving.capacity import plan_for
from agentprof.replay.serving.config import ServingConfig
from agentprof.replay.serving.simulate import simulate
from agentprof.replay.serving.why import beyond_text
from agentprof.trace.schema import Trace

DEFAULT_CONCURRENCY = (1, 4, 16, 50)


def sweep(trace: Trace, systems: Sequence[str], concurrency: Sequence[int] = DEFAULT_CONCURRENCY,
          model: str | None = None, base: ServingConfig | None = None,
          catalog: HardwareCatalog | None = None, bands: bool = True) -> dict[str, Any]:
    """Simulate each system at each concurrency; per system the serving figures as columns. With ``bands``, a
    system resting on ranged estimates (catalog ranges, the agentic deployment's estimated CPU tier) is simulated
    twice more at the largest concurrency, at the ranges' fast and slow ends: its ``band``."""
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.systems import resolve

    cat = catalog or load_catalog()
    base = base or ServingConfig()
    plan, spec = plan_for(trace, model, base, cat)
    fitted = load_fitted()
    conc = sorted({int(n) for n in concurrency if int(n) >= 1})
    rows = []
    for key in systems:
        row: dict[str, Any] = {"system": key}
        try:
            r = resolve(cat.system(key), spec, cat, fitted)
        except CatalogError as e:
            row["error"] = str(e)
            rows.append(row)
            continue
        # the levers of a slow run are simulated at the largest concurrency only (the one the why names)
        runs = [simulate(plan, r, ServingConfig(**{**base.__dict__, "concurrency": n,
                                                   "levers": base.levers and n == conc[-1]})).serving for n in conc]
        row.update({
            "ttft_p50_s": [d["ttft_s"]["p50"] for d in runs], "ttft_p99_s": [d["ttft_s"]["p99"] for d in runs],
            "queue_p99_s": [d["queue_s"]["p99"] for d in runs],
            "tasks_per_hour": [d["tasks_per_hour"] for d in runs],
            "tasks_completed": [d["tasks_completed"] for d in runs],
            "beyond_context": runs[-1].get("beyond_context") if runs else None,
            "beyond": beyond_text(runs[-1]) if runs else "",
            "energy_wh_per_task": [d.get("energy_wh_per_task") for d in runs],
            "hit_share": [d["hit_share"]["total"] for d in runs],
            "calls_in_flight": [d["calls_in_flight_mean"] for d in runs],
            "attention": [(d.get("attention") or {}).get("layout", "tp") for d in runs],
            # the largest concurrency's deployment (the CPU tier of an estimate grows with the instances)
            "deployment": runs[-1].get("deployment") if runs else None,
            # the largest concurrency's levers when it was slow and they were asked for (the why line names them)
            "levers": runs[-1].get("levers") if runs else None,
            "why": (runs[-1]["why"] + " Attention layout by concurrency: "
                    + ", ".join(f"{n} {(d.get('attention') or {}).get('layout', 'tp')}" for n, d in zip(conc, runs,
                                                                                                       strict=True))
                    + ".") if runs else "",
        })
        if bands and runs:
            row["band"] = _band(plan, cat.system(key), r, spec, cat, fitted, base, conc[-1])
        rows.append(row)
    cache = _cache_text(base, rows)
    return {"concurrency": conc, "model": spec.key, "sessions": plan.n_sessions, "cache": cache, "systems": rows,
            "notes": plan.notes}


def _band(plan: Any, system: Any, resolved: Any, spec: Any, cat: HardwareCatalog, fitted: Any, base: ServingConfig,
          n: int) -> dict[str, Any] | None:
    """TTFT p50 / p99 and tasks per hour at ``n`` sessions with every ranged estimate at its fast and at its slow
    end ([fast, slow], as the replay's ``band``), and which numbers moved; None when nothing is ranged."""
    from agentprof.replay.bands import banded, corner_system, evidence
    from agentprof.replay.replay import serving_band
    from agentprof.replay.serving.deployment import estimated_tier
    from agentprof.replay.systems import resolve

    cfg = ServingConfig(**{**base.__dict__, "concurrency": n, "levers": False})
    moved = banded(system, estimated_tier(resolved, cfg))
    if not moved:
        return None
    try:
        ends = [simulate(plan, resolve(corner_system(system, c), spec, cat, fitted), cfg).serving
                for c in ("fast", "slow")]
    except CatalogError:
        return None
    return {"ranged": moved, "evidence": evidence(system, moved), "concurrency": n, **serving_band(ends)}


def _cache_text(base: ServingConfig, rows: list[dict[str, Any]]) -> str:
    """The cache tiers the panel ran: given explicitly, or each system's deployment (the largest concurrency's)."""
    if base.cpu_bytes or base.disk_bytes or not base.cache_from_deployment or not base.prefix_cache:
        if not (base.cpu_bytes or base.disk_bytes):
            return "HBM prefix cache"
        return f"HBM + CPU {base.cpu_bytes / 1e12:g} TB" + (f" + disk {base.disk_bytes / 1e12:g} TB"
                                                          if base.disk_bytes else "")
    if base.deployment == "benchmark":
        return "HBM prefix cache (benchmark deployment)"
    parts = []
    for row in rows:
        dep = row.get("deployment")
        if not dep:
            continue
        how = "recipe" if dep["level"] == "recipe" else "estimate"
        cpu = dep["cpu_tier_bytes"]
        parts.append(f"{row['system']} HBM + CPU {cpu / 2**30:,.0f} GiB, {dep['kv_dtype']} KV ({how})" if cpu
                     else f"{row['system']} HBM only ({how})")
    return "each system's agentic deployment: " + "; ".join(parts) if parts else "HBM prefix cache"
