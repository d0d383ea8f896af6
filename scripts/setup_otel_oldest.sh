#!/usr/bin/env bash
# Create .venv-otel-oldest/: agentprof on the oldest OpenTelemetry SDK it supports (pyproject: opentelemetry-sdk
# >= 1.30), for the test that runs the capture tests there (agentprof reads SDK internals on its hot paths, each
# checked at import; this proves the checks and the fallbacks on the oldest layout). Idempotent (a stamp file
# records a finished install); about 30 s on a first run. Non-zero exit when the environment cannot be made.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${OTEL_OLDEST_VENV:-.venv-otel-oldest}"
PY="${PYTHON:-python3}"
OTEL="opentelemetry-api==1.30.0 opentelemetry-sdk==1.30.0 opentelemetry-exporter-otlp-proto-http==1.30.0"
STAMP="$VENV/.agentprof-otel-oldest-ok"
want="$OTEL sdks $(sha1sum pyproject.toml | cut -c1-12)"

check() {
  timeout 60 "$VENV/bin/python" -c "import agentprof, opentelemetry.sdk.version as v; assert v.__version__ == '1.30.0'" \
    >/dev/null 2>&1
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && check; then
  echo "oldest-OpenTelemetry environment ready: $VENV"
  exit 0
fi
echo "creating $VENV (agentprof on opentelemetry-sdk 1.30.0)..."
# without pip when uv installs (ensurepip costs ~6 s of CPU; scripts/install_into.sh brings pip if uv fails)
[ -x "$VENV/bin/python" ] || "$PY" -m venv $([ -x .venv/bin/uv ] && echo --without-pip) "$VENV"
# shellcheck disable=SC2086
timeout 600 scripts/install_into.sh "$VENV/bin/python" $OTEL -e ".[openai,anthropic]" pytest pytest-timeout httpx
check
echo "$want" > "$STAMP"
echo "oldest-OpenTelemetry environment ready: $VENV"
