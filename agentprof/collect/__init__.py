"""``agentprof collect``: an OTLP receiver (HTTP and gRPC, traces, logs and metrics) that writes one agentprof
trace per session as data arrives, so agents in any language (Claude Code, Codex, a TypeScript or Go app with
an OpenTelemetry GenAI instrumentation) are profiled from what they already send.

:mod:`.decode` turns request bodies into the OTLP JSON shape, :mod:`.store` maps them with the OTLP importer's
mapping (``agentprof.importers.otlp_json``), group by group as :mod:`.groups` sorts them, and writes the session
files, :mod:`.server` runs the HTTP and gRPC endpoints.
"""
