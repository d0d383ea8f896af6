"""The deployment many agent sessions are served on: ``agentic`` (the default) or ``benchmark``.

The catalog's per-system settings are the ones InferenceX's benchmark recipes ran: the KV in HBM only, in the
dtype those recipes stored it, at the system's HBM share. Agent deployments are not run that way: NVIDIA's
validated agentic recipes for Kimi K2.6 (K2.5's architecture) add an LMCache CPU tier of 500 GiB per worker on
both the 8-GPU H200 and the 4-GPU B200 worker, and store FP8 KV on B200 [S61] (``catalog/agentic.toml``). With
``agentic`` the simulation takes, per system:

- where a recipe covers the accelerator and model (``level = "recipe"``): its CPU tier for the recipe's workers on
  the system's accelerators, its KV dtype and its HBM share (``--gpu-memory-utilization``);
- elsewhere (``level = "estimate"``): the recipes' 500 GiB CPU tier per serving instance, the KV dtype and HBM
  share as catalogued; the estimate's range runs from HBM only to the AgentX runs' 2,500 GB [S47], and a band's
  corners (:mod:`agentprof.replay.bands`, ``System.corner``) take its ends: HBM only at the slow one.

An explicit ``--cache-policy`` or ``--kv-dtype`` replaces that part. Not taken from the recipes, and said so in the
output: their speculative decoding (its acceptance on agent traffic is not measured, and a system without a
recipe would be compared without it), their workers' tensor-parallel size (the simulation keeps the catalog's
layout) and the KV-aware router (simulated as prefix affinity). ``benchmark`` applies none of this. The
simulation's deployment step is :func:`deploy`; the one-session replay takes the parts it needs. Docs:
docs/DEVICE_MODEL.md §10.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentprof.catalog.agentic import load_agentic
from agentprof.replay.bands import at_end
from agentprof.replay.serving.config import DEPLOYMENTS, check_choice

if TYPE_CHECKING:
    from agentprof.replay.serving.config import ServingConfig
    from agentprof.replay.systems import Resolved

GIB = 2.0**30


@dataclass(frozen=True)
class Deployment:
    """What the simulation takes from the deployment for one system (see the module docstring)."""

    name: str
    level: str
    """``recipe`` (a validated recipe covers the accelerator and model), ``estimate`` or ``none`` (benchmark)."""
    source: str
    cpu_bytes_fixed: float | None = None
    """The recipe's tier on the system: GiB per worker x the workers its accelerators hold."""
    cpu_bytes_per_instance: float = 0.0
    """The estimate's tier per serving instance (used when ``cpu_bytes_fixed`` is None)."""
    cpu_source: str = ""
    kv_dtype: str = "auto"
    kv_source: str = ""
    mem_util: float | None = None
    mem_util_source: str = ""
    not_applied: tuple[str, ...] = field(default_factory=tuple)

    def kv_for(self, asked: str) -> str:
        """The KV dtype stored when ``asked`` (``--kv-dtype``) is given: it, unless ``auto`` (then the deployment's)."""
        return asked if asked != "auto" else self.kv_dtype

    def cpu_bytes(self, instances: int) -> float:
        """The CPU tier of the system when it serves as ``instances`` instances."""
        if self.cpu_bytes_fixed is not None:
            return self.cpu_bytes_fixed
        return self.cpu_bytes_per_instance * max(instances, 1)


def deployment_for(r: Resolved, name: str) -> Deployment:
    """The deployment ``name`` (``agentic`` or ``benchmark``) for ``r``'s model on ``r``'s system."""
    check_choice("deployment", name, DEPLOYMENTS)
    if name == "benchmark":
        return Deployment("benchmark", "none", "the catalog's as-benchmarked settings: HBM prefix cache only, KV as "
                                               "the benchmark recipes stored it, the system's HBM share")
    cat = load_agentic()
    rec = cat.recipe(r.system.accelerator.key, r.model.key)
    if rec is None:
        d = cat.default_cpu_gib_per_instance
        gib, at = d.value, ""
        if r.system.corner is not None:  # a band's corner: the estimate's range end (more tier is faster)
            gib = at_end(d, r.system.corner, faster_high=True)
            at = (f" (the band's {r.system.corner} end of {at_end(d, 'slow', True):g}–{at_end(d, 'fast', True):g} "
                  "GiB)")
        return Deployment("agentic", "estimate",
                          f"no agentic recipe for {r.model.key} on {r.system.accelerator.key}: the recipes' CPU tier "
                          "per serving instance, KV dtype and HBM share as catalogued",
                          cpu_bytes_per_instance=gib * GIB, cpu_source=d.source + at,
                          not_applied=("speculative decoding (no recipe; none is assumed)",))
    workers = max(r.system.count // int(rec.accelerators_per_worker.value), 1)
    skipped = [f"speculative decoding: {rec.speculative} (not by default: its acceptance on agent traffic is not "
               "measured, and systems without a recipe would be compared without it; `replay --speculative "
               "eagle3` replays and serves with it, and its band)"]
    if int(rec.accelerators_per_worker.value) != r.dep.gpus:
        skipped.append(f"the recipe's workers of {rec.accelerators_per_worker.value:g} accelerators (the simulation "
                       f"keeps the catalog's {r.dep.gpus})")
    if r.framework.split("-")[-1] != rec.framework:
        skipped.append(f"the recipe's framework ({rec.framework}; the catalog's calibration is {r.framework}'s)")
    return Deployment(
        "agentic", "recipe", rec.source, cpu_bytes_fixed=rec.cpu_tier_gib_per_worker.value * GIB * workers,
        cpu_source=(f"{rec.cpu_tier_gib_per_worker.value:g} GiB per worker x {workers} worker(s) of "
                    f"{rec.accelerators_per_worker.value:g} on {r.system.count} accelerators: "
                    f"{rec.cpu_tier_gib_per_worker.source}"),
        kv_dtype=rec.kv_dtype, kv_source=rec.kv_dtype_source, mem_util=rec.mem_util.value,
        mem_util_source=rec.mem_util.source,
        not_applied=tuple(skipped))


def with_mem_util(r: Resolved, dep: Deployment) -> Resolved:
    """``r`` on a system whose HBM share is the deployment's (unchanged without one)."""
    if dep.mem_util is None or dep.mem_util == r.system.mem_util:
        return r
    return replace(r, system=replace(r.system, mem_util=dep.mem_util))


def deployed(r: Resolved, dep: Deployment, kv_dtype: str = "auto") -> Resolved:
    """``r`` as ``dep`` deploys it: its HBM share and (unless ``kv_dtype`` asks for one) its KV dtype."""
    from agentprof.replay.serving.kvdtype import with_kv_dtype

    r = with_mem_util(r, dep)
    kv = dep.kv_for(kv_dtype)
    r = with_kv_dtype(r, kv)
    if kv_dtype == "auto" and kv != "auto":
        r = replace(r, kv_source=f"{kv} as the agentic deployment stores it: {dep.kv_source}")
    return r


def summary(dep: Deployment, r: Resolved, cpu_bytes: float) -> dict[str, Any]:
    """What a replay took from the deployment for ``r`` (``deployments[].deployment`` in the replay JSON; the
    simulation's ``serving.deployment`` adds where each part came from)."""
    from agentprof.replay.serving.kvdtype import kv_dtype_name

    return {"name": dep.name, "level": dep.level, "source": dep.source, "cpu_tier_bytes": cpu_bytes,
            "kv_dtype": kv_dtype_name(r), "mem_util": r.system.mem_util, "not_applied": list(dep.not_applied)}


def takes_cache(cfg: ServingConfig) -> bool:
    """Whether the CPU tier comes from the deployment: asked for (no explicit ``--cache-policy``), none given, and
    a prefix cache that can evict."""
    return (cfg.deployment == "agentic" and cfg.cache_from_deployment and not (cfg.cpu_bytes or cfg.disk_bytes)
            and cfg.prefix_cache and not cfg.hbm_unbounded)


def estimated_tier(r: Resolved, cfg: ServingConfig) -> bool:
    """Whether a simulation of ``r`` under ``cfg`` takes the agentic deployment's estimated CPU tier (a band then
    moves it: :data:`agentprof.replay.bands.ESTIMATED_TIER`)."""
    return takes_cache(cfg) and deployment_for(r, cfg.deployment).level == "estimate"


def describe(dep: Deployment, cfg: ServingConfig, r: Resolved, cpu_bytes: float, from_deployment: bool) -> dict[str, Any]:
    """The ``serving.deployment`` object: :func:`summary` and where each part came from."""
    d = summary(dep, r, cpu_bytes)
    d["cpu_tier_from"] = (("deployment: " + dep.cpu_source) if from_deployment
                          else "--cache-policy" if cpu_bytes or not cfg.cache_from_deployment else "none")
    d["kv_dtype_from"] = (("deployment: " + dep.kv_source) if dep.kv_dtype != "auto" and cfg.kv_dtype == "auto"
                          else "--kv-dtype" if cfg.kv_dtype != "auto" else "catalog (as benchmarked)")
    d["mem_util_from"] = ("deployment: " + dep.mem_util_source) if dep.mem_util is not None else "catalog"
    return d


@dataclass(frozen=True)
class Deployed:
    """The deployment step's output: the system as the deployment serves these sessions (resolved at its instance
    size), the settings the simulation runs with (CPU tier and KV dtype as deployed), the ``serving.deployment``
    record and why the instances have that size (empty when as resolved)."""

    resolved: Resolved
    config: ServingConfig
    record: dict[str, Any]
    size_note: str


def deploy(r: Resolved, cfg: ServingConfig, kv_demand_tokens: float) -> Deployed:
    """The deployment step: ``cfg.deployment`` for ``r`` (HBM share, KV dtype, CPU tier) and, for many sessions on a
    ``tp = "fit"`` system, instances sized to the ``kv_demand_tokens`` the tiers leave to HBM
    (:mod:`agentprof.replay.serving.sizing`)."""
    from agentprof.replay.serving.kvdtype import carry_kv
    from agentprof.replay.serving.sizing import serving_gpus

    dep = deployment_for(r, cfg.deployment)
    from_dep = takes_cache(cfg)
    kv = dep.kv_for(cfg.kv_dtype)
    given = cfg
    r = deployed(r, dep, cfg.kv_dtype)
    size_note = ""
    if not cfg.disagg:
        fixed = (dep.cpu_bytes_fixed or 0.0) if from_dep else cfg.cpu_bytes + cfg.disk_bytes
        per_inst = dep.cpu_bytes_per_instance if from_dep and dep.cpu_bytes_fixed is None else 0.0
        kvb = r.dep.kv_token_bytes
        g, size_note = serving_gpus(r, cfg.concurrency, 0.0 if cfg.hbm_unbounded else kv_demand_tokens - fixed / kvb,
                                    per_inst / kvb)
        if g != r.dep.gpus:
            from agentprof.catalog.hardware import load_catalog
            from agentprof.replay.systems import resolve

            r = carry_kv(resolve(r.system, r.model, load_catalog(), r.fitted, accept=r.params.accept, gpus=g), r)
    tier = {"cpu_bytes": dep.cpu_bytes(r.instances), "cache_from_deployment": False} if from_dep else {}
    cfg = replace(cfg, kv_dtype=kv, **tier)
    return Deployed(r, cfg, describe(dep, given, r, cfg.cpu_bytes, from_dep), size_note)
