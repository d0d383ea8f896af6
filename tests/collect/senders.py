"""Senders for the collector tests: the OpenTelemetry Python SDK's own OTLP exporters (HTTP or gRPC) sending
GenAI spans (an agent, its model calls and tool calls) and Claude Code-shaped events over the logs signal.
Each returns what it sent, so the tests compare the collector's traces against it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

S = 1_000_000_000


@dataclass
class Sent:
    """What one session sent: model and tool call durations in seconds."""

    session: str
    model_s: list[float] = field(default_factory=list)
    tool_s: list[float] = field(default_factory=list)
    user_wait_s: list[float] = field(default_factory=list)
    input_tokens: list[int] = field(default_factory=list)


def exporters(endpoint: str, protocol: str):
    """The SDK's span and log exporters for ``endpoint`` (``http://host:port``, or ``host:port`` for gRPC)."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint, insecure=True), OTLPLogExporter(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint + "/v1/traces"), OTLPLogExporter(endpoint=endpoint + "/v1/logs")


def send_genai_spans(span_exporter, session: str, calls: list[tuple[float, float | None]]) -> Sent:
    """An ``invoke_agent`` span naming the session (only it: its children inherit it) over ``chat`` and
    ``execute_tool`` spans of the given durations, exported span by span as they end (children first)."""
    tp = TracerProvider(resource=Resource.create({"service.name": "genai-agent"}))
    tp.add_span_processor(SimpleSpanProcessor(span_exporter))
    tr = tp.get_tracer("genai-test")
    sent = Sent(session)
    t0 = time.time_ns() - 120 * S
    root = tr.start_span("invoke_agent planner", start_time=t0, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "gen_ai.conversation.id": session})
    ctx = trace.set_span_in_context(root)
    t = t0 + S // 10
    for i, (model_s, tool_s) in enumerate(calls):
        tokens = 1000 + 17 * i
        c = tr.start_span("chat gpt-4o", context=ctx, start_time=t, kind=trace.SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": tokens, "gen_ai.usage.cache_read.input_tokens": 512,
            "gen_ai.usage.output_tokens": 50})
        t += int(model_s * S)
        c.end(end_time=t)
        sent.model_s.append(model_s)
        sent.input_tokens.append(tokens)
        if tool_s is not None:
            x = tr.start_span("execute_tool grep", context=ctx, start_time=t, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"})
            t += int(tool_s * S)
            x.end(end_time=t)
            sent.tool_s.append(tool_s)
    root.end(end_time=t + S // 10)
    tp.shutdown()
    return sent


def send_claude_code_events(log_exporter, session: str, turns: list[list[tuple[float, tuple[str, float] | None]]],
                            think_s: float = 30.0) -> Sent:
    """Claude Code's events as its monitoring documentation names them: per turn a ``user_prompt``, then per
    call an ``api_request`` (ending now, ``duration_ms`` long; token counts as strings, as Claude Code sends
    them) and a ``tool_result``; ``think_s`` of the user's time between turns."""
    lp = LoggerProvider(resource=Resource.create({"service.name": "claude-code"}))
    lp.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    lg = lp.get_logger("com.anthropic.claude_code.events")
    sent = Sent(session)

    def event(name: str, ts: int, **attrs: str) -> None:
        iso = datetime.fromtimestamp(ts / 1e9, timezone.utc).isoformat().replace("+00:00", "Z")
        lg.emit(timestamp=ts, body=f"claude_code.{name}", attributes={
            "event.name": name, "event.timestamp": iso, "session.id": session, **attrs})

    t = time.time_ns() - 100 * S
    for n, turn in enumerate(turns):
        if n:
            t += int(think_s * S)
            sent.user_wait_s.append(think_s)
        event("user_prompt", t, prompt_length="42", prompt="SECRET-PROMPT-TEXT")
        t += S // 20
        for model_s, tool in turn:
            t += int(model_s * S)
            event("api_request", t, model="claude-sonnet-4-5", duration_ms=str(int(model_s * 1000)),
                  input_tokens="10", output_tokens="300", cache_read_tokens="20000", cache_creation_tokens="1500",
                  cost_usd="0.012")
            sent.model_s.append(model_s)
            sent.input_tokens.append(10 + 20000 + 1500)
            if tool is not None:
                t += int(tool[1] * S)
                event("tool_result", t, tool_name=tool[0], duration_ms=str(int(tool[1] * 1000)), success="true")
                sent.tool_s.append(tool[1])
        event("tool_decision", t, tool_name="Bash", decision="accept", source="config")
    lp.shutdown()
    return sent
