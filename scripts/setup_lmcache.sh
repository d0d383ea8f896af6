#!/usr/bin/env bash
# Create .venv-lmcache/ with lmcache 0.5.6 for the LMCache cross-check test and benchmark (its own virtual
# environment: lmcache pins opentelemetry-api <= 1.40, which agentprof's own environment must not inherit).
# CPU torch 2.13.0 is installed first so lmcache does not pull a CUDA build (~2 GB in total, 1-2 minutes).
# Idempotent (a stamp file records a finished install); bounded by LMCACHE_SETUP_TIMEOUT seconds (default 900).
# Exit status is non-zero when the environment could not be created or does not import lmcache.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LMCACHE_VENV:-.venv-lmcache}"
PY="${PYTHON:-python3}"
TORCH="${LMCACHE_TORCH:-torch==2.13.0}"
LMCACHE="${LMCACHE_SPEC:-lmcache==0.5.6}"
TIMEOUT="${LMCACHE_SETUP_TIMEOUT:-900}"
STAMP="$VENV/.agentprof-lmcache-ok"
want="$TORCH $LMCACHE"

check() {
  LMCACHE_TRACK_USAGE=false DO_NOT_TRACK=1 timeout 120 "$VENV/bin/python" -c \
    "import lmcache.v1.token_database, lmcache.v1.multiprocess.token_hasher" >/dev/null 2>&1
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && check; then
  echo "lmcache environment ready: $VENV"
  exit 0
fi

echo "creating $VENV ($want; about 2 GB, 1-2 minutes)..."
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# CPU wheel index as a fallback source for torch; a local wheel or mirror in pip's config is used first
timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if ! timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "$TORCH"; then
  echo "plain install of $TORCH failed; trying the PyTorch CPU index" >&2
  timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "$TORCH" --index-url https://download.pytorch.org/whl/cpu
fi
timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "$LMCACHE"
if ! check; then
  echo "error: $VENV was created but 'import lmcache.v1.token_database' fails" >&2
  exit 1
fi
echo "$want" > "$STAMP"
echo "lmcache environment ready: $VENV"
