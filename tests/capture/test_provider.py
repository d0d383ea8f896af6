"""The lean span start path builds the same spans the SDK's ``Tracer.start_span`` would."""

from __future__ import annotations

from opentelemetry import trace as otel_trace
from opentelemetry.trace import SpanKind

from agentprof.capture import provider


def _describe(span):
    return (span.name, span.kind, span.resource, span.instrumentation_scope, bool(span.context.trace_flags.sampled),
            int(span.context.trace_flags), span.context.is_remote, span.is_recording(),
            span.context.is_valid, span.context.trace_state, type(span.context))


def test_lean_start_matches_the_sdk_and_nests(monkeypatch):
    provider.tracer()
    assert provider._lean, "the lean path should be available on the installed SDK"
    root = provider.start_span("root", None, SpanKind.INTERNAL)
    ctx = otel_trace.set_span_in_context(root)
    lean_child = provider.start_span("child", ctx, SpanKind.INTERNAL)
    monkeypatch.setattr(provider, "_lean", False)
    sdk_root = provider.start_span("root", None, SpanKind.INTERNAL)
    sdk_child = provider.start_span("child", otel_trace.set_span_in_context(sdk_root), SpanKind.INTERNAL)
    assert _describe(root) == _describe(sdk_root)
    assert _describe(lean_child) == _describe(sdk_child)
    assert lean_child.parent.span_id == root.context.span_id
    assert lean_child.context.trace_id == root.context.trace_id
    assert root.parent is None and root.context.span_id != lean_child.context.span_id
    for s in (lean_child, root, sdk_child, sdk_root):
        s.end()
