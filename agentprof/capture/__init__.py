"""Capture: record an agent's model calls, tool calls and JSON parsing as OpenTelemetry spans.

``profile`` (one run, one trace file), ``tool`` (tool functions), ``span`` (custom phases), ``parse_json``;
the ``openai`` and ``anthropic`` SDKs are recorded automatically inside a profile. ``wrap`` hands work to
other threads with the current span as parent. See ``docs/CAPTURE.md``.
"""

from __future__ import annotations

from agentprof.capture import hooks as _hooks  # noqa: F401  (hands the session core what a session installs)
from agentprof.capture.context import wrap
from agentprof.capture.custom_span import span
from agentprof.capture.failsafe import CaptureWarning
from agentprof.capture.parse import parse_json
from agentprof.capture.profile import Run, profile
from agentprof.capture.spans import KINDS
from agentprof.capture.tool import tool

__all__ = ["KINDS", "CaptureWarning", "Run", "parse_json", "profile", "span", "tool", "wrap"]
