#!/usr/bin/env bash
# scripts/install_into.sh PY ARGS...: install packages (pip's arguments) into the environment of the interpreter
# PY from PyPI. With uv (.venv/bin/uv, which scripts/setup_env.sh installs) where it is: a fraction of pip's CPU
# (Phoenix's dependencies: 7 s against 105 s), which matters while the suite runs beside the side environments'
# setup; else, or if uv fails, pip, without byte-compiling every installed file (modules compile when first
# imported). torch itself stays pip's (scripts/setup_lmcache.sh): it comes from pip's find-links, where uv would
# fetch PyPI's CUDA build. Run from the repository root (the setup scripts cd there).
set -uo pipefail
py=$1
shift
if [ -x .venv/bin/uv ] && UV_NATIVE_TLS=1 .venv/bin/uv pip install -q --python "$py" "$@"; then
  exit 0
fi
"$py" -m pip --version >/dev/null 2>&1 || "$py" -m ensurepip -q >/dev/null 2>&1  # a venv made --without-pip
exec "$py" -m pip install -q --no-compile "$@"
