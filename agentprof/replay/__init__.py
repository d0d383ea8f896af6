"""Replay: calibrated device models of serving systems and a what-if replay of recorded agent traces.

``replay(trace, systems, model=None, cache_policy="prefix", concurrency=1) -> ReplayResult``; the cost model
is in :mod:`agentprof.replay.costmodel`, calibration in :mod:`agentprof.replay.calibration`, fidelity checks
in :mod:`agentprof.replay.fidelity`. Equations and figures: docs/DEVICE_MODEL.md.
"""

from __future__ import annotations

from agentprof.replay.replay import ReplayResult, SystemRow, replay

__all__ = ["ReplayResult", "SystemRow", "replay"]
