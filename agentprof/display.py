"""Which classes show themselves in a notebook. The stages that define them import nothing above them; the
report stage draws them (:mod:`agentprof.report.notebook`), and in a running IPython the root package registers
that drawing by type name, so nothing is imported until a result is displayed."""

from __future__ import annotations

DISPLAYED_TYPES = (("agentprof.trace.schema", "Trace"), ("agentprof.analysis.result", "Analysis"),
                   ("agentprof.analysis.cachesim", "CacheSimResult"), ("agentprof.analysis.cachesim", "SweepResult"),
                   ("agentprof.replay.replay", "ReplayResult"))
"""(module, class name) of every class with a notebook display."""
