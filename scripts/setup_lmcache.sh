#!/usr/bin/env bash
# Create .venv-lmcache/ with lmcache 0.5.6 for the LMCache cross-check test and benchmark (its own virtual
# environment: lmcache pins opentelemetry-api <= 1.40, which agentprof's own environment must not inherit).
# torch 2.13.0 is installed first (a local wheel when pip's find-links has one, else PyPI's), then lmcache.
# Idempotent (a stamp file records a finished install); bounded by LMCACHE_SETUP_TIMEOUT seconds (default 900).
# Exit status is non-zero when the environment could not be created or lacks lmcache or torch.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LMCACHE_VENV:-.venv-lmcache}"
PY="${PYTHON:-python3}"
TORCH="${LMCACHE_TORCH:-torch==2.13.0}"
LMCACHE="${LMCACHE_SPEC:-lmcache==0.5.6}"
TIMEOUT="${LMCACHE_SETUP_TIMEOUT:-900}"
STAMP="$VENV/.agentprof-lmcache-ok"
want="$TORCH $LMCACHE"

# the installed distributions at the pinned versions (a local label such as +cpu aside): importing lmcache and
# torch costs ~10 s of CPU on first import, which the cross-check test pays once
check() {
  timeout 60 "$VENV/bin/python" -c "
import importlib.metadata as m, importlib.util as u, sys
want = dict(s.split('==') for s in '$want'.split() if '==' in s)
sys.exit(not (all(m.version(k).split('+')[0] == v for k, v in want.items()) and u.find_spec('lmcache')))" \
    >/dev/null 2>&1
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && check; then
  echo "lmcache environment ready: $VENV"
  exit 0
fi

echo "creating $VENV ($want; about 2 GB, 1-2 minutes)..."
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# torch: from the package registry only (PyPI, by name), never another index. A wheel already in pip's
# find-links is taken first (no network; pip, which reads that setting); otherwise PyPI's build, which brings its
# CUDA libraries (~2-3 GB more), through uv where it is (scripts/install_into.sh; pip unpacks them on one core)
links="${PIP_FIND_LINKS:-$("$VENV/bin/python" -m pip config get global.find-links 2>/dev/null || true)}"
if ! timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q --no-compile --no-index "$TORCH" 2>/dev/null; then
  echo "installing $TORCH with its dependencies (pip's find-links first; PyPI's build brings CUDA libraries)" >&2
  if [ -n "$links" ]; then
    install=("$VENV/bin/python" -m pip install -q --no-compile)
  else
    install=(scripts/install_into.sh "$VENV/bin/python")
  fi
  if ! timeout "$TIMEOUT" "${install[@]}" "$TORCH"; then
    echo "error: could not install $TORCH from PyPI" >&2
    exit 1
  fi
fi
# lmcache and its other dependencies: uv where it is (scripts/install_into.sh: 6 s of CPU against pip's 40 s),
# held to the torch just installed
echo "$TORCH" > "$VENV/torch-pin.txt"
timeout "$TIMEOUT" scripts/install_into.sh "$VENV/bin/python" -c "$VENV/torch-pin.txt" "$LMCACHE"
if ! check; then
  echo "error: $VENV was created but lacks $want or lmcache's token hasher" >&2
  exit 1
fi
echo "$want" > "$STAMP"
echo "lmcache environment ready: $VENV"
