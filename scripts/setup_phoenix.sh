#!/usr/bin/env bash
# Create .venv-phoenix/ with Arize Phoenix (PyPI: arize-phoenix), a real OTLP receiver, for the test that sends
# agentprof's spans to it on loopback and reads them back (sessions, span kinds, token counts). Its own virtual
# environment: Phoenix brings ~850 MB of dependencies agentprof's environment must not inherit (about 3 minutes
# on a first run). Idempotent (a stamp file records a finished install). Non-zero exit when it cannot be made.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${PHOENIX_VENV:-.venv-phoenix}"
PY="${PYTHON:-python3}"
SPEC="${PHOENIX_SPEC:-arize-phoenix==20.26.1}"
STAMP="$VENV/.agentprof-phoenix-ok"

# the installed distribution and its server command: importing phoenix costs 12-25 s of CPU (its first import
# compiles it), which the test that starts the server pays once
want_v=""
case $SPEC in *==*) want_v=${SPEC#*==} ;; esac
check() {
  timeout 60 "$VENV/bin/python" -c \
    "import importlib.metadata as m, sys; v = m.version('arize-phoenix'); sys.exit('$want_v' not in ('', v))" \
    >/dev/null 2>&1 && [ -x "$VENV/bin/phoenix" ]
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SPEC" ] && check; then
  echo "phoenix environment ready: $VENV"
  exit 0
fi
echo "creating $VENV ($SPEC; about 850 MB, a few minutes)..."
# without pip when uv installs (ensurepip costs ~6 s of CPU; scripts/install_into.sh brings pip if uv fails)
[ -x "$VENV/bin/python" ] || "$PY" -m venv $([ -x .venv/bin/uv ] && echo --without-pip) "$VENV"
timeout 900 scripts/install_into.sh "$VENV/bin/python" "$SPEC"
check
echo "$SPEC" > "$STAMP"
echo "phoenix environment ready: $VENV"
