"""What a span sent over OTLP carries besides agentprof's own attributes, so receivers can group and classify
it: ``session.id`` and ``gen_ai.conversation.id`` (the run's session id, as Phoenix, Langfuse and the GenAI
conventions look for it) and ``openinference.span.kind`` for every kind (parse spans have no GenAI operation
name to be classified by). Added on OTLP's export thread to a copy; the trace file is unchanged."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from agentprof import semconv as sc
from agentprof.capture.exporter import span_attributes

SESSION_ID = "session.id"
CONVERSATION_ID = "gen_ai.conversation.id"
OPENINFERENCE_KIND = "openinference.span.kind"

OPENINFERENCE_KINDS = {"agent": "AGENT", "model": "LLM", "tool": "TOOL", "parse": "CHAIN",
                       "orchestration": "CHAIN", "wait": "CHAIN"}
"""agentprof span kind -> OpenInference span kind (parsing, orchestration and waits are steps of the agent's
own code: CHAIN, OpenInference's kind for that)."""


def receiver_attributes(attrs: dict[str, Any]) -> dict[str, Any]:
    """The attributes a receiver needs that ``attrs`` lacks (empty when there is nothing to add)."""
    extra: dict[str, Any] = {}
    sid = attrs.get(sc.SESSION_ID)
    if sid is not None:
        if SESSION_ID not in attrs:
            extra[SESSION_ID] = sid
        if CONVERSATION_ID not in attrs:
            extra[CONVERSATION_ID] = sid
    kind = OPENINFERENCE_KINDS.get(str(attrs.get(sc.KIND)))
    if kind is not None and OPENINFERENCE_KIND not in attrs:
        extra[OPENINFERENCE_KIND] = kind
    return extra


def for_receivers(span: ReadableSpan) -> ReadableSpan:
    """``span`` with :func:`receiver_attributes` added (a new ``ReadableSpan``; the original is not touched)."""
    attrs = span_attributes(span)
    extra = receiver_attributes(attrs)
    if not extra:
        return span
    return ReadableSpan(name=span.name, context=span.get_span_context(), parent=span.parent,
                        resource=span.resource, attributes={**attrs, **extra}, events=span.events,
                        links=span.links, kind=span.kind, status=span.status, start_time=span.start_time,
                        end_time=span.end_time, instrumentation_scope=span.instrumentation_scope)
