"""Analysis stage: where an agent's time went, how much of each prompt repeated earlier prompts, what a KV
cache would have served, and why caches missed. See ``docs/ANALYSIS.md`` for every definition.

``analyze(trace) -> Analysis`` is the entry point (``agentprof analyze``); the cache simulator is
``agentprof.analysis.cachesim.simulate`` (``agentprof cachesim``).
"""

from __future__ import annotations

from agentprof.analysis.analyzer import analyze
from agentprof.analysis.result import Analysis

__all__ = ["Analysis", "analyze"]
