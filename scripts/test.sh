#!/usr/bin/env bash
# Set everything up and run the whole test suite: .venv with the test and dask extras, a headless Chromium for the
# HTML-report tests (Debian's package, when run as root and not yet installed), the side environments of two
# cross-checks (lmcache; agentprof on the oldest OpenTelemetry SDK it supports) and Arize Phoenix as a real OTLP
# receiver (these three in the background, see below), then ruff and pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -k capture
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytecode is written on first import and read after. The environments are installed without it (uv, pip
# --no-compile), so under a container's PYTHONDONTWRITEBYTECODE=1 every process — the pytest workers, the many
# agentprof and agent subprocesses the tests start, Phoenix — compiled all it imports from source again: three
# subprocess-heavy test files took 73 s of CPU that way against 54 s writing it (50 s precompiled)
unset PYTHONDONTWRITEBYTECODE
scripts/setup_env.sh test,dask
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian chromium for the browser tests..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null) \
    || echo "warning: could not install chromium; browser tests will be skipped"
fi
# The three side environments build in the background while the suite runs (lmcache's torch download is the
# longest step of a fresh machine's setup): each writes VENV.pending with its process id, and the tests that need
# one (marker side_env, ordered last) wait for it there (tests/side_envs.py). Their output goes to VENV.setup.log.
side_env() {  # VENV SCRIPT WHAT
  local venv=$1 script=$2 what=$3
  ( trap 'rm -f "$venv.pending"' EXIT
    "$script" >"$venv.setup.log" 2>&1 \
      || echo "warning: $what unavailable (see $venv.setup.log); its test will be skipped" >&2 ) &
  echo $! >"$venv.pending"
}
if [ -x scripts/setup_lmcache.sh ] && [ "${AGENTPROF_SKIP_LMCACHE:-0}" != "1" ]; then
  side_env .venv-lmcache scripts/setup_lmcache.sh "lmcache environment"
fi
if [ "${AGENTPROF_SKIP_OTEL_OLDEST:-0}" != "1" ]; then
  side_env .venv-otel-oldest scripts/setup_otel_oldest.sh "oldest-OpenTelemetry environment"
fi
if [ "${AGENTPROF_SKIP_PHOENIX:-0}" != "1" ]; then
  side_env .venv-phoenix scripts/setup_phoenix.sh "Phoenix environment"
fi
.venv/bin/python -m ruff check agentprof tests scripts examples
# On a fresh clone, one collection first writes the bytecode (and pytest's rewritten test modules) that the three
# workers would otherwise each compile at once: 23 + 3 x 7 CPU-s instead of 3 x 20
if [ ! -d tests/__pycache__ ]; then
  .venv/bin/python -m pytest -q -p no:xdist -p no:cacheprovider --collect-only "$@" >/dev/null 2>&1 || true
fi
# three worker processes on the CI machine's 2 cores (the tests wait on subprocesses, servers and sockets, and the
# side setups share the cores: 3 took 664 s where 2 took 745 s on a fresh clone; AGENTPROF_TEST_WORKERS=0 runs in
# one process), whole files per worker so module fixtures are built once
rc=0
.venv/bin/python -m pytest -q -n "${AGENTPROF_TEST_WORKERS:-3}" --dist loadfile --durations=25 "$@" || rc=$?
wait  # a side setup the selected tests did not need still ends here
rm -f .venv-*.pending  # a setup that ended before its marker was written leaves it behind
exit "$rc"
