#!/usr/bin/env bash
# Set everything up and run the main job: a real demo agent run captured on a loopback model server,
# a bundled real public trace imported, analysis, device replay, and reports/demo.html.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_env.sh openai
exec .venv/bin/agentprof demo --out reports/ "$@"
