"""``agentprof collect``: receive OTLP from agents in any language and write one trace per session."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click


@click.command("collect")
@click.option("--port", default=4318, show_default=True, type=click.IntRange(0, 65535),
              help="OTLP/HTTP port (0: any free port).")
@click.option("--grpc-port", default=4317, show_default=True, type=click.IntRange(0, 65535),
              help="OTLP/gRPC port (0: any free port).")
@click.option("--no-grpc", is_flag=True, help="Serve OTLP/HTTP only.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (the default accepts this machine only).")
@click.option("--out", default="traces/", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the session traces.")
def collect(port: int, grpc_port: int, no_grpc: bool, host: str, out: str) -> None:
    """Receive OpenTelemetry (OTLP) from running agents; write one trace per session.

    Traces, logs and metrics over HTTP (protobuf or JSON) and gRPC. GenAI spans
    from any language, and the events of Claude Code and Codex, become model,
    tool and wait spans; files are updated as data arrives. Stop with Ctrl-C.

    \b
    Example:
      agentprof collect --out traces/live/
      # in another shell (see docs/CAPTURE.md for Codex and TypeScript):
      CLAUDE_CODE_ENABLE_TELEMETRY=1 OTEL_LOGS_EXPORTER=otlp \\
        OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \\
        OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 claude
      agentprof analyze traces/live/
    """
    from agentprof.collect.server import Receiver
    from agentprof.collect.store import Store

    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from agentprof.errors import AgentprofError

        raise AgentprofError(f"{out}: cannot create the output folder ({e.strerror or e})") from None
    store = Store(folder)
    receiver = Receiver(store, host, port, None if no_grpc else grpc_port)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    writer = threading.Thread(target=store.run_writer, args=(stop,), name="agentprof-collect-writer", daemon=True)
    writer.start()
    click.echo(f"listening http {host}:{receiver.http_port} (/v1/traces, /v1/logs, /v1/metrics)")
    if receiver.grpc_port:
        click.echo(f"listening grpc {host}:{receiver.grpc_port}")
    elif receiver.grpc_missing:
        click.echo(f"warning: {receiver.grpc_missing}", err=True)
    click.echo(f"writing one trace per session to {folder}/ as data arrives; Ctrl-C stops", nl=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        receiver.stop()
        stop.set()
        writer.join(5.0)
        files = store.flush()
        for s, handler in previous.items():
            signal.signal(s, handler)
    got = ", ".join(f"{n:,} {what}" for what, n in (("spans", store.received["traces"]),
                                                    ("log records", store.received["logs"]),
                                                    ("metrics", store.received["metrics"])) if n)
    click.echo(f"received {got or 'nothing'}")
    for f in sorted(files, key=lambda f: str(f.path)):
        click.echo(f"wrote {f.path} ({f.model_calls:,} model calls, {f.tool_calls:,} tool calls)")
    for err in store.errors[-3:]:
        click.echo(f"warning: mapping failed once ({err})", err=True)
