"""The run step: one configuration through the engine (:mod:`agentprof.replay.serving.scheduler`), its options
taken from the settings, the variant the layout step made and the plan as the server sees it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agentprof.replay.serving.config import ServingConfig
from agentprof.replay.serving.layout import Variant
from agentprof.replay.serving.overflow import Overflow
from agentprof.replay.serving.scheduler import Engine, EngineResult, Options


@dataclass(frozen=True)
class Ran:
    """The run step's output: the engine's result, the seconds between the closed loop's first starts and the
    copies of the recorded sessions it ran."""

    engine: EngineResult
    ramp_s: float
    copies: int


def run(served: Overflow, v: Variant, cfg: ServingConfig) -> Ran:
    """The run step: ``served.plan``'s sessions on ``v`` at ``cfg.concurrency``."""
    plan = served.plan
    per_block = v.cost.tier_token_bytes * plan.block_size
    ramp = cfg.ramp_s if cfg.ramp_s is not None else float(np.mean(plan.recorded_s)) / cfg.concurrency
    copies = max(math.ceil(max(cfg.concurrency, cfg.sessions or 0) / max(plan.n_sessions, 1)), 1)
    opt = Options(concurrency=cfg.concurrency, replicas=v.replicas, budget_tokens=v.budget_tokens, router=cfg.router,
                  cpu_blocks=cfg.cpu_bytes / per_block if cfg.cpu_bytes else 0.0,
                  disk_blocks=cfg.disk_bytes / per_block if cfg.disk_bytes else 0.0,
                  hbm_blocks=math.inf if cfg.hbm_unbounded else (None if cfg.prefix_cache else 0.0), ttl_s=cfg.ttl_s,
                  arrival_rate_per_h=cfg.arrival_rate_per_h, seed=cfg.seed, copies=copies,
                  ramp_s=ramp, lockstep=v.layout.ranks, sessions=cfg.sessions,
                  failed=served.failed if served.failed.any() else None)
    return Ran(Engine(plan, v.cost, opt, v.pools).run(), ramp, copies)
