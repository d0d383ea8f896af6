"""The serving frontend's time per prompt token on each AgentX deployment, from the runs' per-request exports
(``data/inferencex/agentx_requests.csv``; method: :func:`agentprof.replay.agentic.frontend_time`), beside what
``catalog/scheduling.toml [[tokenize]]`` lists for it.

    python scripts/frontend_time.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = ROOT / "data/inferencex/agentx_requests.csv"


def main() -> int:
    from agentprof.catalog.hardware import load_catalog
    from agentprof.catalog.kvcache import tokenize_s_per_token
    from agentprof.replay.agentic import accelerator_of, frontend_time

    cat = load_catalog()
    print("| hardware | runs (tp, conc, offload) | calls alone / all | per prompt token | fixed | residual sd | "
          "catalog |")
    print("|---|---|---|---|---|---|---|")
    for hw, f in frontend_time(pl.read_csv(REQUESTS)).items():
        listed = tokenize_s_per_token("vllm", "kimi-k2.5", accelerator_of(hw, cat))[0]
        runs = "; ".join(f"tp{t}, {c}, {o}" for t, c, o in f["runs"])
        print(f"| {hw} | {runs} | {f['calls']} / {f['calls_total']} | {f['s_per_token'] * 1e6:.2f} µs | "
              f"{f['s_fixed'] * 1e3:.0f} ms | {f['residual_sd_s'] * 1e3:.0f} ms | {listed * 1e6:.2f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
