"""What a span sent over OTLP carries besides agentprof's own attributes, so receivers can group and classify
it: ``session.id`` and ``gen_ai.conversation.id`` (the run's session id, as Phoenix, Langfuse and the GenAI
conventions look for it) and ``openinference.span.kind`` for every kind (parse spans have no GenAI operation
name to be classified by). Added on OTLP's export thread to a copy; the trace file is unchanged."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

from agentprof import semconv as sc
from agentprof.capture.exporter import span_attributes

SESSION_ID = sc.RECEIVER_SESSION_ID
CONVERSATION_ID = sc.CONVERSATION_ID
OPENINFERENCE_KIND = sc.OPENINFERENCE_KIND
OPENINFERENCE_KINDS = sc.OPENINFERENCE_KINDS
receiver_attributes = sc.receiver_attributes


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
