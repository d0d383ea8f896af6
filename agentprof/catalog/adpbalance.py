"""TensorRT-LLM's attention-DP balance as a recipe set it (``scheduling.toml [[attention_dp_balance]]``): the
iterations a rank holds a new request's context phase so that every data-parallel attention rank prefills in the
same iteration (``timeout_iters``, ``batching_wait_iters``; docs/DEVICE_MODEL.md §2.2). A deployment not listed
does not hold its prefills."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from agentprof.catalog import CatalogError, read_toml
from agentprof.catalog.kvcache import SCHED_PATH, _sourced, engine


@dataclass(frozen=True)
class AdpBalance:
    """The two hold counts, in engine iterations, and where they come from."""

    timeout_iters: float
    batching_wait_iters: float
    source: str


@lru_cache(maxsize=1)
def _entries() -> tuple[tuple[str, str, str | None, AdpBalance], ...]:
    out = []
    for i, e in enumerate(read_toml(SCHED_PATH).get("attention_dp_balance", [])):
        where = f"{SCHED_PATH}: attention_dp_balance[{i}]"
        if not isinstance(e.get("framework"), str) or not isinstance(e.get("model"), str):
            raise CatalogError(f"{where}: expected string keys framework and model")
        t, ts = _sourced(e, where, "timeout_iters")
        b, bs = _sourced(e, where, "batching_wait_iters")
        for name, v in (("timeout_iters", t), ("batching_wait_iters", b)):
            if v < 0 or v != int(v):
                raise CatalogError(f"{where}.{name}: expected a whole number of iterations >= 0, got {v:g}")
        out.append((str(e["framework"]).lower(), str(e["model"]), e.get("hardware"),
                    AdpBalance(t, b, f"timeout: {ts}; batching: {bs}")))
    return tuple(out)


def adp_balance(framework: str, model: str, hardware: str | None = None) -> AdpBalance | None:
    """The attention-DP balance of ``framework`` (or its engine) serving ``model`` on ``hardware``, or ``None``
    when no recipe listed sets it."""
    eng = engine(framework)
    for fw, mk, hw, bal in _entries():
        if fw in (framework.lower(), eng) and mk == model and (hw is None or hw == hardware):
            return bal
    return None
