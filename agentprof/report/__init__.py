"""Report stage: the single-file HTML report, rich terminal renderers, Jupyter HTML and the exports
(Perfetto / Chrome trace events, Mooncake JSONL, OTLP JSON). It only reads traces and stage results.

Importing it gives traces and stage results their notebook display (see :mod:`agentprof.report.notebook`).
"""

from __future__ import annotations

from agentprof.report.html import render, write_report
from agentprof.report.notebook import install as _install_notebook_renderers

_install_notebook_renderers()

__all__ = ["render", "write_report"]
