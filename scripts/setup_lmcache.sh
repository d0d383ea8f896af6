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
# torch: a CPU wheel only. First a local wheel from pip's find-links (no network), then the PyTorch CPU index;
# plain PyPI would bring a CUDA build of several GB, so it is used only when asked (LMCACHE_ALLOW_PYPI_TORCH=1).
timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if ! timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q --no-index "$TORCH" 2>/dev/null; then
  echo "no local CPU wheel for $TORCH; trying the PyTorch CPU index" >&2
  if ! timeout 300 "$VENV/bin/python" -m pip install -q "$TORCH" --index-url https://download.pytorch.org/whl/cpu; then
    if [ "${LMCACHE_ALLOW_PYPI_TORCH:-0}" = "1" ]; then
      timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "$TORCH"
    else
      echo "error: no CPU build of $TORCH reachable (set LMCACHE_ALLOW_PYPI_TORCH=1 to take PyPI's CUDA build)" >&2
      exit 1
    fi
  fi
fi
timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "$LMCACHE"
if ! check; then
  echo "error: $VENV was created but 'import lmcache.v1.token_database' fails" >&2
  exit 1
fi
echo "$want" > "$STAMP"
echo "lmcache environment ready: $VENV"
