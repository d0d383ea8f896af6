#!/usr/bin/env bash
# Set everything up and run the whole test suite: .venv with the test and dask extras, a headless Chromium for the
# HTML-report tests (Debian's package, when run as root and not yet installed), the side environments of two
# cross-checks (lmcache; agentprof on the oldest OpenTelemetry SDK it supports), Arize Phoenix as a real OTLP
# receiver, then ruff and pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -k capture
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_env.sh test,dask
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian chromium for the browser tests..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null) \
    || echo "warning: could not install chromium; browser tests will be skipped"
fi
if [ -x scripts/setup_lmcache.sh ] && [ "${AGENTPROF_SKIP_LMCACHE:-0}" != "1" ]; then
  scripts/setup_lmcache.sh || echo "warning: lmcache environment unavailable; its cross-check test will be skipped"
fi
if [ "${AGENTPROF_SKIP_OTEL_OLDEST:-0}" != "1" ]; then
  scripts/setup_otel_oldest.sh || echo "warning: oldest-OpenTelemetry environment unavailable; its test will be skipped"
fi
if [ "${AGENTPROF_SKIP_PHOENIX:-0}" != "1" ]; then
  scripts/setup_phoenix.sh || echo "warning: Phoenix environment unavailable; its receiver test will be skipped"
fi
.venv/bin/python -m ruff check agentprof tests scripts examples
# two worker processes (the CI machine has 2 cores; AGENTPROF_TEST_WORKERS=0 runs in one process), whole files
# per worker so module fixtures are built once
exec .venv/bin/python -m pytest -q -n "${AGENTPROF_TEST_WORKERS:-2}" --dist loadfile "$@"
