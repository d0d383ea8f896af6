#!/usr/bin/env bash
# Create or refresh .venv/ in the repository and install agentprof into it (editable).
# Usage: scripts/setup_env.sh [EXTRAS]    e.g. scripts/setup_env.sh test
# Needs only Python >= 3.10 and access to the package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.agentprof-installed-${extras:-base}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q --no-compile uv >/dev/null 2>&1 || true  # optional: pip does it all without
  if [ -n "$extras" ]; then
    scripts/install_into.sh .venv/bin/python -e ".[${extras}]"
  else
    scripts/install_into.sh .venv/bin/python -e .
  fi
  touch "$stamp"
fi
