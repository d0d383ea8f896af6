#!/usr/bin/env bash
# The device model against a real GPU server: serve a small open model with vLLM (prefix caching on), run
# `agentprof loadtest` on bundled kv-cache-tester sessions at 1, 8 and 32 sessions with --predict, and write
# measured vs predicted side by side.
#
#   scripts/gpu_check.sh                  # on a machine with an NVIDIA GPU, vLLM and the model's weights
#   SERVER=demo scripts/gpu_check.sh      # the same steps against the CPU prefix-caching demo server
#
# Needs: agentprof importable by $PYTHON (this checkout, PYTHONPATH=.), and for SERVER=vllm the `vllm` package
# and the weights of $MODEL on local disk or in the Hugging Face cache (nothing is downloaded: HF_HUB_OFFLINE=1).
# Settings (environment):
#   MODEL          weights to serve (default mistralai/Mistral-Nemo-Instruct-2407, the catalog's mistral-nemo-12b)
#   PREDICT_MODEL  catalog model the prediction uses (default mistral-nemo-12b)
#   SYSTEM         catalog system the prediction runs on (default h200+x86)
#   SESSIONS       session counts to run (default "1 8 32")
#   MAX_CALLS      calls sent per session (default 8); CAP_WAIT seconds between calls at most (default 2)
#   OUT            folder for the results (default ./gpu-check-out)
# Writes $OUT/loadtest-N.json, .txt (the terminal table) and .html per session count, $OUT/report.html (the
# samples' report with every run in "Measured on your backend") and $OUT/gpu_check.md (one row per session count:
# measured, predicted, error).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SERVER=${SERVER:-vllm}
MODEL=${MODEL:-mistralai/Mistral-Nemo-Instruct-2407}
PREDICT_MODEL=${PREDICT_MODEL:-mistral-nemo-12b}
SYSTEM=${SYSTEM:-h200+x86}
SESSIONS=${SESSIONS:-"1 8 32"}
MAX_CALLS=${MAX_CALLS:-8}
CAP_WAIT=${CAP_WAIT:-2}
OUT=${OUT:-gpu-check-out}
PORT=${PORT:-8011}
export PYTHONPATH=${PYTHONPATH:-$PWD} HF_HUB_OFFLINE=1
mkdir -p "$OUT"
# samples whose first 8 prompts stay under 48K tokens (they fit a 64K context)
K=traces/samples/kv-cache-tester
SAMPLES="$K/trace_0121.json $K/trace_0581.json $K/trace_0610.json $K/trace_0697.json $K/trace_0726.json"

server_pid=""
cleanup() { if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

if [ "$SERVER" = vllm ]; then
  if ! "$PYTHON" -c "import vllm" 2>/dev/null; then
    echo "gpu_check: vLLM is not installed for $PYTHON (pip install vllm); nothing run" >&2
    exit 3
  fi
  "$PYTHON" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name served --host 127.0.0.1 \
    --port "$PORT" --enable-prefix-caching --enable-prompt-tokens-details --max-model-len 65536 --gpu-memory-utilization 0.90 \
    > "$OUT/server.log" 2>&1 &
  server_pid=$!
  URL="http://127.0.0.1:$PORT/v1"
else
  "$PYTHON" -m agentprof.demo.prefix_server --port "$PORT" --max-seconds 3600 --ignore-stdin \
    > "$OUT/server.log" 2>&1 &
  server_pid=$!
  URL="http://127.0.0.1:$PORT/v1"
fi

# wait up to 15 minutes for the server to answer (loading weights and compiling take minutes)
for _ in $(seq 1 180); do
  if "$PYTHON" -c "import httpx,sys; sys.exit(httpx.get('$URL/models', timeout=2).status_code >= 500)" 2>/dev/null; then
    break
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "gpu_check: the server exited; see $OUT/server.log" >&2
    exit 4
  fi
  sleep 5
done

LOADTESTS=()
for n in $SESSIONS; do
  echo "gpu_check: $n session(s) at once" >&2
  "$PYTHON" -m agentprof loadtest $SAMPLES --endpoint "$URL" --model served --concurrency "$n" --sessions "$n" \
    --max-calls "$MAX_CALLS" --cap-wait "$CAP_WAIT" --predict "$SYSTEM" --predict-model "$PREDICT_MODEL" \
    --out "$OUT/loadtest-$n.json" --html "$OUT/loadtest-$n.html" > "$OUT/loadtest-$n.txt"
  LOADTESTS+=(--loadtest "$OUT/loadtest-$n.json")
done
"$PYTHON" -m agentprof report $SAMPLES --no-replay --serving-concurrency none "${LOADTESTS[@]}" \
  -o "$OUT/report.html" > /dev/null

"$PYTHON" - "$OUT" "$SERVER" "$([ "$SERVER" = vllm ] && echo "$MODEL" || echo agentprof.demo.prefix_server)" "$SYSTEM" "$PREDICT_MODEL" $SESSIONS <<'EOF'
import json, sys
out, server, model, system, pmodel, *ns = sys.argv[1:]
def s(x): return "—" if x is None else f"{x:.3f}"
def e(x, pts=False): return "—" if x is None else (f"{x * 100:+.1f} pts" if pts else f"{x * 100:+.0f} %")
rows = [f"# Measured ({server}: {model}) vs predicted ({system}, {pmodel})", "",
        "| sessions | calls ok | TTFT p50 s (meas / pred / err) | TPOT p50 s | E2E p50 s | cache read (meas / pred) |",
        "|---|---|---|---|---|---|"]
for n in ns:
    d = json.load(open(f"{out}/loadtest-{n}.json"))
    p, err = d["predicted"], d["error"]
    cells = [f"{s(d[k]['p50'])} / {s(p[k]['p50'])} / {e(err[k + '.p50'])}" for k in ("ttft_s", "tpot_s", "e2e_s")]
    rows.append(f"| {n} | {d['calls']['ok']}/{d['calls']['sent']} | " + " | ".join(cells)
                + f" | {s(d['cache_read_share'])} / {s(p['cache_read_share'])} |")
open(f"{out}/gpu_check.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
EOF
