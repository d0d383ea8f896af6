"""``--predict SYSTEM``: the device model's figures for the very sessions a load test sent, beside the measurement.

The workload's plan (the same calls, lengths, blocks and capped gaps) runs through the serving simulation
(:func:`agentprof.replay.serving.simulate`, as ``agentprof replay --concurrency`` runs it) on the catalogued
system, all sessions starting at once as the load test starts them, under the catalog's benchmark deployment (a
plain server's HBM prefix cache, no CPU tier). Each figure's error is (predicted − measured) / measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentprof.loadtest.workload import Workload
from agentprof.replay.serving.metrics import pcts

FIGURES = (("ttft_s", "p50"), ("ttft_s", "p90"), ("ttft_s", "p99"), ("tpot_s", "p50"), ("tpot_s", "p90"),
           ("tpot_s", "p99"), ("e2e_s", "p50"), ("e2e_s", "p90"), ("e2e_s", "p99"), ("tasks", "task_s.p50"),
           ("tasks", "task_s.p90"), ("tasks", "task_s.p99"))
"""Figures compared between the measurement and the prediction (``cache_read_share`` too, in points)."""


def predict(wl: Workload, system: str, model: str | None) -> dict[str, Any]:
    """The simulated figures for ``wl`` on ``system`` serving ``model`` (a catalog model, or a served name the
    catalog resolves through its stand-ins, which say so)."""
    from agentprof.catalog import resolve_model
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.serving import ServingConfig, simulate
    from agentprof.replay.systems import resolve

    cat = load_catalog()
    sys_ = cat.system(system)
    spec, note = resolve_model(model or "unknown model")
    r = resolve(sys_, spec, cat)
    run = simulate(wl.plan, r, ServingConfig(concurrency=wl.concurrency, ramp_s=0.0, deployment="benchmark"))
    eng, d = run.engine, run.serving
    task = eng.sess_end - eng.sess_start
    notes = [note] if note else []
    notes += [n for n in run.notes if n not in wl.notes]
    return {"system": sys_.key, "model": spec.key, "ttft_s": d["ttft_s"], "tpot_s": d["tpot_s"],
            "e2e_s": pcts(eng.done_t - eng.issue_t), "cache_read_share": d["hit_share"]["total"],
            "tasks": {"completed": int(np.isfinite(task).sum()), "task_s": pcts(task[np.isfinite(task)])},
            "frontend_s_per_token": r.params.t_tok_s, "frontend_source": r.frontend_source, "notes": notes}


def _get(d: dict[str, Any], key: str, sub: str) -> float | None:
    v: Any = d.get(key)
    for part in sub.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v if isinstance(v, (int, float)) else None


def errors(measured: dict[str, Any], predicted: dict[str, Any]) -> dict[str, float | None]:
    """Per figure, (predicted − measured) / measured; ``cache_read_share`` as predicted − measured (points)."""
    out: dict[str, float | None] = {}
    for key, sub in FIGURES:
        m, p = _get(measured, key, sub), _get(predicted, key, sub)
        out[f"{key}.{sub}"] = (p - m) / m if m and p is not None else None
    m, p = measured.get("cache_read_share"), predicted.get("cache_read_share")
    out["cache_read_share"] = p - m if m is not None and p is not None else None
    m, p = (measured.get("prompts") or {}).get("server_frontend_s_per_token"), predicted.get("frontend_s_per_token")
    out["frontend_s_per_token"] = (p - m) / m if m and p is not None else None
    return out
