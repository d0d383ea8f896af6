"""The measured figures of a load test (``agentprof loadtest --json``), each computed once here.

Percentiles are over answered calls; TPOT only over calls with more than one output token. ``cache_read_share``
is the server's own count: usage ``cached_tokens`` over ``prompt_tokens``; ``trace_reuse_share`` what an
unlimited prefix cache holds on the trace's blocks, the answered calls taken in the order they were sent. A task is a session instance whose
every call was answered; its time runs from the session's start to its last reply. Cost per completed task bills
every answered call (uncached prompt tokens at the input price, cached ones at the cache-read price, output at
the output price) and divides by the completed tasks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentprof.errors import AgentprofError
from agentprof.loadtest.client import RunRecords
from agentprof.loadtest.workload import Workload
from agentprof.replay.serving.metrics import pcts


@dataclass
class Price:
    """USD per million tokens: prompt (uncached), cached prompt, output; and where the figures come from."""

    input: float
    cached: float
    output: float
    source: str


def parse_price(text: str) -> Price:
    """``IN,OUT[,CACHED]`` USD per million tokens (cached defaults to the input price)."""
    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        vals = []
    if len(vals) not in (2, 3) or any(not v >= 0 for v in vals):
        raise AgentprofError(f"cannot read --price {text!r}: expected IN,OUT[,CACHED] in USD per million tokens, "
                             "e.g. 3,15,0.3")
    return Price(vals[0], vals[2] if len(vals) == 3 else vals[0], vals[1], "--price")


def catalog_price(model: str) -> Price | None:
    """The catalog's provider list price for a served model name, or None."""
    from agentprof.catalog.serving import load_serving

    p = load_serving().provider_for(model)
    if p is None:
        return None
    return Price(p.input.value, p.cache_read.value, p.output.value, f"catalog provider price {p.key}: {p.input.source}")


def summarize(wl: Workload, rec: RunRecords, price: Price | None) -> dict[str, Any]:
    """The measured object (see the module docstring)."""
    p = wl.plan
    calls = rec.calls
    ok = [r for r in calls if r.error is None]
    ttft = np.array([r.ttft_s for r in ok])
    e2e = np.array([r.e2e_s for r in ok])
    tpot = np.array([r.tpot_s for r in ok])
    usage = [r for r in ok if r.prompt_tokens is not None]
    served_in = sum(r.prompt_tokens or 0 for r in usage)
    cached = sum(r.cached_tokens or 0 for r in usage)
    reported = any(r.cached_tokens is not None for r in usage)
    recorded_in = float(sum(p.input_tokens[r.call] for r in usage))
    done = [s for s in rec.sessions if s.failed_calls == 0 and np.isfinite(s.end_t)]
    task = np.array([s.end_t - s.start_t for s in done])
    cost = None
    if price is not None and done:
        usd = sum(((r.prompt_tokens or 0) - (r.cached_tokens or 0)) * price.input + (r.cached_tokens or 0)
                  * price.cached + r.output_tokens * price.output for r in ok) / 1e6
        cost = usd / len(done)
    asked = int(sum(int(p.output_tokens[r.call]) for r in ok))
    return {
        "sessions": p.n_sessions, "concurrency": wl.concurrency,
        "calls": {"sent": len(calls), "ok": len(ok), "failed": len(calls) - len(ok)},
        "retries": int(sum(r.retries for r in calls)),
        "errors": dict(Counter(r.error for r in calls if r.error is not None)),
        "ttft_s": pcts(ttft), "tpot_s": pcts(tpot), "e2e_s": pcts(e2e),
        "cache_read_share": (cached / served_in if served_in else 0.0) if reported else None,
        "trace_reuse_share": wl.trace_reuse_share([r.call for r in sorted(ok, key=lambda r: r.sent_t)]),
        "prompt_tokens": {"recorded": recorded_in, "served": float(served_in),
                          "drift": (served_in - recorded_in) / recorded_in if recorded_in else None},
        "output_tokens": {"asked": asked, "served": int(sum(r.output_tokens for r in ok))},
        "tasks": {"completed": len(done), "task_s": pcts(task)},
        "cost_per_task": cost,
        "price": None if price is None else {"input": price.input, "cached": price.cached, "output": price.output,
                                             "usd_per": "million tokens", "source": price.source},
        "wall_s": rec.wall_s,
    }
