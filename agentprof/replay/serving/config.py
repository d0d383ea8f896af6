"""The settings of one serving simulation (the flags of ``replay --concurrency`` and ``capacity``) and the values
each may take, checked in one place before a simulation starts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentprof.errors import AgentprofError
from agentprof.replay.serving.scheduler import ROUTERS

ATTENTION_MODES = ("auto", "tp", "dp")
KV_DTYPES = ("auto", "bf16", "fp8")
DEPLOYMENTS = ("agentic", "benchmark")
OVERFLOW_POLICIES = ("compact", "reject", "stand-in")


def check_choice(what: str, value: str, choices: Sequence[str]) -> None:
    """A clear error when ``value`` is not one of ``choices`` (``what``: e.g. ``attention layout``)."""
    if value not in choices:
        sep = " or " if len(choices) == 2 else ", "
        raise AgentprofError(f"unknown {what} {value!r}: expected {sep.join(choices)}")


@dataclass(frozen=True)
class ServingConfig:
    """User-facing settings of the simulation (CLI flags of ``replay`` and ``capacity``)."""

    concurrency: int = 1
    router: str = "prefix-affinity"
    cpu_bytes: float = 0.0
    disk_bytes: float = 0.0
    ttl_s: float | None = None
    cap_wait_s: float | None = None
    arrival_rate_per_h: float | None = None
    scope: str = "global"
    hbm_unbounded: bool = False
    prefix_cache: bool = True  # False: --cache-policy none, every prompt is prefilled in full
    seed: int = 0
    disagg: str | None = None
    """Disaggregated pools ``p{workers}x{gpus}-d{workers}x{gpus}`` (e.g. ``p1x4-d1x8``: one 4-GPU prefill
    worker, one 8-GPU decode worker of the system's accelerator), each sized and calibrated as the system's
    resolution does for that GPU count; None: the system's aggregated replicas."""
    attention: str = "auto"
    """Attention layout of the aggregated replicas: ``tp`` (tensor-parallel, the single-session replay's), ``dp``
    (data-parallel attention ranks, :mod:`agentprof.replay.serving.dpattention`) or ``auto`` (where more than one
    session shares an MLA model on a framework that runs DP and only DP's KV pool holds the sessions' prompts, both
    layouts simulated and the one whose sessions finish their tasks faster kept; tp otherwise:
    :func:`agentprof.replay.serving.dpattention.choose`)."""
    kv_dtype: str = "auto"
    """KV-cache element type: ``auto`` (the catalog's as-deployed figure), ``bf16`` or ``fp8``
    (:mod:`agentprof.replay.serving.kvdtype`)."""
    levers: bool = False
    """When the run is slow (TTFT p50 of 10 s or more), also simulate the deployment
    levers that would change it (:mod:`agentprof.replay.serving.levers`) and report their figures; on in
    ``replay --concurrency`` and with ``report --serving-levers`` (at the panel's largest concurrency), off in the
    capacity search and by default (each lever is one more simulation)."""
    deployment: str = "agentic"
    """``agentic`` (the CPU tier, KV dtype and HBM share of the system's validated agentic recipe, else the recipes'
    CPU tier as an estimate) or ``benchmark`` (the catalog's as-benchmarked settings, HBM only):
    :mod:`agentprof.replay.serving.deployment`."""
    cache_from_deployment: bool = True
    """False when the cache tiers were given explicitly (``--cache-policy``, even ``prefix``): the deployment's CPU
    tier is then not added."""
    speculative: str = "none"
    """Speculative decoding with the model's catalogued drafter (``eagle3``; :mod:`agentprof.replay.speculative`),
    applied to every variant the simulation runs (each instance size and attention layout); not with ``disagg``."""
    overflow: str = "compact"
    """What the client does with a call beyond the served window (the stand-in's context, or one replica's KV
    pool): ``compact``, ``reject`` or ``stand-in`` (:mod:`agentprof.replay.serving.overflow`)."""
    sessions: int | None = None
    """Session instances the closed loop runs (the recorded sessions cycled, copies sharing no cache blocks);
    None: each recorded session once, or one per slot when the concurrency is larger."""
    ramp_s: float | None = None
    """Seconds between the starts of the closed loop's first sessions; None: the mean recorded session time
    divided by the concurrency, so sessions start spread over their phases as in a steady state instead of
    all cold at once."""

    def check(self) -> None:
        if self.concurrency < 1:
            raise AgentprofError(f"concurrency must be at least 1, got {self.concurrency}")
        check_choice("router", self.router, ROUTERS)
        if self.ttl_s is not None and self.ttl_s <= 0:
            raise AgentprofError(f"cache TTL must be positive, got {self.ttl_s}")
        if self.arrival_rate_per_h is not None and self.arrival_rate_per_h <= 0:
            raise AgentprofError(f"--arrival-rate must be positive sessions/hour, got {self.arrival_rate_per_h}")
        if self.disagg is not None:
            pool_layout(self.disagg)
        check_choice("attention layout", self.attention, ATTENTION_MODES)
        check_choice("KV dtype", self.kv_dtype, KV_DTYPES)
        check_choice("deployment", self.deployment, DEPLOYMENTS)
        check_choice("overflow policy", self.overflow, OVERFLOW_POLICIES)
        if self.sessions is not None and self.sessions < 1:
            raise AgentprofError(f"--sessions must be at least 1, got {self.sessions}")


def pool_layout(text: str) -> tuple[int, int, int, int]:
    """(prefill workers, GPUs each, decode workers, GPUs each) of ``p1x4-d2x8``; a clear error otherwise."""
    m = re.fullmatch(r"p(\d+)x(\d+)-d(\d+)x(\d+)", text.strip())
    if not m or min(int(x) for x in m.groups()) < 1:
        raise AgentprofError(f"cannot read pools {text!r}: expected p{{workers}}x{{gpus}}-d{{workers}}x{{gpus}}, "
                             "e.g. p1x4-d1x8")
    a, b, c, d = (int(x) for x in m.groups())
    return a, b, c, d
