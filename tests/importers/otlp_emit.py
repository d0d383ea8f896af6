"""Run one real chat call with one OpenAI instrumentation and print the spans as an OTLP JSON request.

Used by test_otlp_json.py in a subprocess per instrumentation (they patch the openai module globally).
Usage: python otlp_emit.py {otel-genai|openllmetry|openinference} BASE_URL
"""

from __future__ import annotations

import json
import sys


def main(name: str, base_url: str) -> None:
    import openai
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if name == "otel-genai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=tp)
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    with tp.get_tracer("demo").start_as_current_span(
            "invoke_agent demo", attributes={"gen_ai.operation.name": "invoke_agent",
                                             "gen_ai.conversation.id": f"conv-{name}"}):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    spans = exporter.get_finished_spans()
    keys = sorted({k for s in spans for k in (s.attributes or {})})
    print(json.dumps({"request": MessageToDict(encode_spans(spans)), "attribute_keys": keys}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
