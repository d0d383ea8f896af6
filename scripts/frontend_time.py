"""The serving frontend's time per prompt token on each AgentX deployment, from the runs' per-request exports
(``data/inferencex/agentx_requests.csv``; method: :func:`agentprof.replay.agentic.frontend_time`), beside what
``catalog/scheduling.toml [[tokenize]]`` lists for it; then the engine's own time per prompt token around a small
prefill (:func:`agentprof.replay.agentic.engine_host_time`), as measured and with the shipped model's prefill of
each call taken out (what the model leaves unpriced; MI355X's recipe lists it as ``[block_host]``).

    python scripts/frontend_time.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = ROOT / "data/inferencex/agentx_requests.csv"


def main() -> int:
    from agentprof.catalog.hardware import load_catalog
    from agentprof.catalog.kvcache import tokenize_s_per_token
    from agentprof.replay.agentic import accelerator_of, engine_host_time, frontend_time

    cat = load_catalog()
    print("| hardware | runs (tp, conc, offload) | calls alone / all | per prompt token | fixed | residual sd | "
          "catalog |")
    print("|---|---|---|---|---|---|---|")
    for hw, f in frontend_time(pl.read_csv(REQUESTS)).items():
        listed = tokenize_s_per_token("vllm", "kimi-k2.5", accelerator_of(hw, cat))[0]
        runs = "; ".join(f"tp{t}, {c}, {o}" for t, c, o in f["runs"])
        print(f"| {hw} | {runs} | {f['calls']} / {f['calls_total']} | {f['s_per_token'] * 1e6:.2f} µs | "
              f"{f['s_fixed'] * 1e3:.0f} ms | {f['residual_sd_s'] * 1e3:.0f} ms | {listed * 1e6:.2f} µs |")
    requests = pl.read_csv(REQUESTS)
    raw, left = engine_host_time(requests), engine_host_time(requests, _model_prefill(cat))
    print("\n| hardware | calls used / all | engine time per prompt token, fixed | less the model's prefill | "
          "median abs. residual |")
    print("|---|---|---|---|---|")
    for hw, e in raw.items():
        r = left.get(hw, {})
        print(f"| {hw} | {e['calls']} / {e['calls_total']} | {e['s_per_token'] * 1e6:.2f} µs, "
              f"{e['s_fixed'] * 1e3:.0f} ms | {r.get('s_per_token', float('nan')) * 1e6:.2f} µs, "
              f"{r.get('s_fixed', float('nan')) * 1e3:.0f} ms | {r.get('residual_mad_s', float('nan')) * 1e3:.0f} ms |")
    return 0


def _model_prefill(cat: Any) -> Any:
    """``modelled(hw, tp, prompt, new)``: the shipped model's prefill seconds of each call on that AgentX deployment
    (:func:`agentprof.replay.costmodel.prefill_s`, the recipe's per-block host time left out)."""
    import numpy as np

    from agentprof.replay.agentic import accelerator_of, load_agentic, probe_deployment
    from agentprof.replay.calibration import DEFAULT_AGENTIC, load_fitted
    from agentprof.replay.costmodel import prefill_s

    fitted, points = load_fitted(), load_agentic(DEFAULT_AGENTIC)

    def modelled(hw: str, tp: int, prompt: np.ndarray, new: np.ndarray) -> np.ndarray:
        got = probe_deployment(points, hw, fitted, cat, fitted.attn_eff_for(accelerator_of(hw, cat)), tp,
                               block_host=False)
        if got is None:
            return np.zeros_like(prompt)
        _, _, dep, p = got
        return np.asarray(prefill_s(dep, p, new, prompt - new), dtype=float)

    return modelled


if __name__ == "__main__":
    sys.exit(main())
