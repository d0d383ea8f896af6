"""Speculative decoding as a what-if (``agentprof replay --speculative eagle3``, one session or served with
``--concurrency``: :class:`agentprof.replay.serving.ServingConfig` ``speculative``): each decode step of the target
verifies the drafter's ``draft_tokens`` tokens per sequence with its own and keeps ``accept`` tokens on average;
the drafter's passes run before it, one after another.

Priced on the step the system's own terms give (:func:`agentprof.replay.costmodel.decode_step_parts`): the verify
step carries ``1 + draft_tokens`` tokens per sequence in its FLOPs, collectives and — the MoE experts they route
to — weights; the drafter adds ``draft_tokens`` passes, each the target's fixed overhead per layer times
``pass_layers`` plus the drafter's BF16 weights read at the system's bandwidth efficiency (its FLOPs, a 1-2 B
parameter model on a few sequences, are left out). The figures and their ranges are ``catalog/speculative.toml``
(the acceptance on agent traffic: SWE-bench Verified's, with the benchmarks' range); a band's corners take the
ranges' ends (faster: higher acceptance, a smaller drafter, fewer layers' overhead). docs/DEVICE_MODEL.md §11.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentprof.catalog import CatalogError
from agentprof.catalog.speculative import METHODS, load_speculative
from agentprof.replay.bands import at_end

if TYPE_CHECKING:
    from agentprof.replay.systems import Resolved

CHOICES = ("none", *METHODS)


def ranged(model: str, method: str) -> list[str]:
    """The band names of the drafter's ranged figures (``speculative.<model>.<method>.<field>``)."""
    if method == "none":
        return []
    d = load_speculative().get((model, method))
    if d is None:
        return []
    return [f"speculative.{model}.{method}.{k}" for k in ("accept", "drafter_params", "pass_layers")
            if getattr(d, k).low is not None or getattr(d, k).high is not None]


def with_speculative(r: Resolved, method: str) -> tuple[Resolved, dict[str, Any] | None]:
    """``r`` decoding with ``method``'s drafter (``none``: unchanged), and what it took (``deployments[].speculative``
    in the replay JSON); a model without a catalogued drafter is a :class:`CatalogError`."""
    if method == "none":
        return r, None
    known = load_speculative()
    d = known.get((r.model.key, method))
    if d is None:
        have = ", ".join(f"{m} ({meth})" for m, meth in sorted(known)) or "none"
        raise CatalogError(f"no {method} drafter catalogued for {r.model.key} (catalog/speculative.toml has: {have})")
    corner = r.system.corner
    accept = at_end(d.accept, corner, faster_high=True)
    params = at_end(d.drafter_params, corner, faster_high=False)
    layers = at_end(d.pass_layers, corner, faster_high=False)
    draft = d.draft_tokens.value
    p = r.params
    per_pass = layers * p.t_fixed_s / r.dep.layers + 2.0 * params / r.dep.gpus / (p.mbu * r.dep.accel.hbm_bw)
    p = p.with_(accept=accept, draft_tokens=draft, draft_s=draft * per_pass, verify_weights=True)
    return replace(r, params=p), {
        "method": method, "draft_tokens": draft, "accept": accept, "drafter_params": params,
        "draft_s_per_step": draft * per_pass, "source": d.source,
        "accept_source": d.accept.source, "drafter_source": d.drafter_params.source,
        **({"corner": corner} if corner else {})}
