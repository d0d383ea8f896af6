"""Running the stages a report shows (analysis, cache capacity sweeps, replay) for ``agentprof report``.

Each stage is optional: one that is not installed, not asked for or fails on this trace leaves its panel
empty with the reason, and the rest of the report is still written. The report never recomputes a stage.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentprof.errors import AgentprofError
from agentprof.trace import Trace

DEFAULT_SYSTEMS = ("h200+x86", "jalapeno", "rubin+vera")
"""Replayed when no ``--system`` is given: a GPU with an x86 host, OpenAI's Jalapeño, a GPU with a Vera host."""
SERVING_MAX_SESSIONS = 100
"""The report simulates serving by default only up to this many sessions (each point is one simulation)."""
SERVING_CALL_BUDGET = 2_000
"""By default the serving sweep stops before the concurrency at which the simulated model calls per system (each
point simulates max(sessions, concurrency) sessions) would pass this many: a simulation costs about its number of
calls, so one long session keeps the report within seconds. ``--serving-concurrency`` asks for any list."""
PROVIDER_TTL_S = 300.0
"""The provider-style curve uses Anthropic's default prompt-cache lifetime (5 minutes)."""


@dataclass
class StageResults:
    """Whatever the stages produced, and why the others are missing (stage name -> one sentence)."""

    analysis: Any = None
    cache: list[tuple[str, Any]] | None = None
    cache_model: str | None = None
    replay: Any = None
    serving: dict[str, Any] | None = None
    notes: dict[str, str] = field(default_factory=dict)


def _why(e: BaseException) -> str:
    if isinstance(e, AgentprofError):
        return str(e)
    if isinstance(e, ImportError):
        return f"that stage is not available in this installation ({e})"
    return f"failed on this trace ({type(e).__name__}: {e})"


def _default_systems() -> list[str]:
    try:
        from agentprof.catalog.hardware import load_catalog

        known = set(load_catalog().systems)
    except Exception:
        return list(DEFAULT_SYSTEMS)
    return [s for s in DEFAULT_SYSTEMS if s in known]


def _stand_in(replay_result: Any) -> str | None:
    """The open model the replay used for the first system (its first deployment)."""
    for row in getattr(replay_result, "systems", []) or []:
        for dep in getattr(row, "deployments", []) or []:
            if isinstance(dep, dict) and dep.get("model"):
                return str(dep["model"])
    return None


def run_stages(trace: Trace, systems: Sequence[str] = (), model: str | None = None, analysis: bool = True,
               cache: bool = True, replay: bool = True,
               serving: Sequence[int] | None = None, attention: str = "auto",
               serving_levers: bool = False, deployment: str = "agentic", serving_bands: bool = False) -> StageResults:
    """Analyze; replay on ``systems`` (default :data:`DEFAULT_SYSTEMS`); sweep cache capacity for ``model``
    (default: the replay's stand-in for the traced model) — each as far as it can go. ``serving_levers``: simulate
    the levers of a slow system at the serving sweep's largest concurrency (:mod:`agentprof.replay.serving.levers`:
    one simulation each, 30-50 s more on a long session, so asked for); ``deployment``: the replay's and the
    serving panel's (:mod:`agentprof.replay.serving.deployment`); ``serving_bands``: the serving panel's band for
    systems resting on estimates (two more simulations each at the largest concurrency, about as long as the
    central ones together; asked for). ``serving`` None: the default concurrencies within
    :data:`SERVING_CALL_BUDGET` (:func:`default_concurrency`). A system or model the
    caller named that the catalog rejects raises its :class:`AgentprofError`; any other failure becomes a
    note and an empty panel."""
    out = StageResults()
    if analysis:
        try:
            from agentprof.analysis import analyze

            out.analysis = analyze(trace)
        except Exception as e:  # a failing stage must not cost the user the rest of the report
            out.notes["analysis"] = _why(e)
    else:
        out.notes["analysis"] = "not run (--no-analysis)"
    if replay:
        chosen = list(systems) or _default_systems()
        try:
            from agentprof.replay import replay as run_replay

            out.replay = run_replay(trace, chosen, model=model, deployment=deployment)
            if not systems:
                out.notes["replay"] = f"default systems ({', '.join(chosen)}); choose others with --system"
        except AgentprofError:
            if systems or model:  # the user named a system or model that is wrong: say so, stop
                raise
            out.notes["replay"] = _why(sys.exc_info()[1])  # type: ignore[arg-type]
        except Exception as e:
            out.notes["replay"] = _why(e)
    else:
        out.notes["replay"] = "not run (--no-replay)"
    _serving_stage(out, trace, systems, model, replay, serving, attention, serving_levers, deployment, serving_bands)
    if cache:
        cache_model = model or _stand_in(out.replay)
        if cache_model is None:
            out.notes["cache"] = "pass --model NAME to simulate a KV cache with that model's KV size"
        else:
            try:
                from agentprof.analysis.cachesim import capacity_sweep

                out.cache = [
                    ("prefix cache, LRU (HBM, CPU or disk tier)", capacity_sweep(trace, cache_model)),
                    (f"provider-style cache, {PROVIDER_TTL_S / 60:.0f} min TTL",
                     capacity_sweep(trace, cache_model, provider=True, ttl_s=PROVIDER_TTL_S)),
                ]
                out.cache_model = cache_model
                if model is None:
                    out.notes["cache"] = f"KV size of {cache_model} (the replay's stand-in); choose with --model"
            except AgentprofError:
                if model:
                    raise
                out.notes["cache"] = _why(sys.exc_info()[1])  # type: ignore[arg-type]
            except Exception as e:
                out.notes["cache"] = _why(e)
    return out


def default_concurrency(n_sessions: int, n_calls: int, levels: Sequence[int]) -> tuple[list[int], list[int]]:
    """(kept, dropped): the leading ``levels`` whose simulated model calls per system stay within
    :data:`SERVING_CALL_BUDGET` (at least the first two), and the rest."""
    per_session = n_calls / max(n_sessions, 1)
    kept: list[int] = []
    total = 0.0
    for c in sorted(levels):
        total += max(n_sessions, c) * per_session
        if len(kept) >= 2 and total > SERVING_CALL_BUDGET:
            break
        kept.append(c)
    return kept, [c for c in sorted(levels) if c not in kept]


def _serving_stage(out: StageResults, trace: Trace, systems: Sequence[str], model: str | None, replay: bool,
                   serving: Sequence[int] | None, attention: str = "auto", levers: bool = False,
                   deployment: str = "agentic", bands: bool = True) -> None:
    """TTFT p99 and tasks/hour against concurrency per system (the serving panel), when it is affordable."""
    if not replay:
        out.notes["serving"] = "not run (--no-replay)"
        return
    if serving is not None and not list(serving):
        out.notes["serving"] = "not run (--serving-concurrency none)"
        return
    try:
        import polars as pl

        from agentprof.replay.serving.sweep import DEFAULT_CONCURRENCY, sweep

        n = trace.spans.filter((pl.col("kind") == "agent") & pl.col("parent_session_id").is_null()).height
        if serving is None and n > SERVING_MAX_SESSIONS:
            out.notes["serving"] = (f"{n:,} sessions: the serving simulation is not run by default above "
                                    f"{SERVING_MAX_SESSIONS}; ask for it with --serving-concurrency 1,8,50")
            return
        from agentprof.replay.serving import ServingConfig

        levels = list(serving or DEFAULT_CONCURRENCY)
        dropped: list[int] = []
        if serving is None:
            calls = trace.spans.filter(pl.col("kind") == "model").height
            levels, dropped = default_concurrency(n, calls, levels)
        out.serving = sweep(trace, list(systems) or _default_systems(), levels, model,
                            ServingConfig(attention=attention, levers=levers, deployment=deployment), bands=bands)
        if dropped:
            out.serving["not_simulated"] = {
                "concurrency": dropped,
                "reason": f"{', '.join(map(str, dropped))} concurrent sessions not simulated by default (over "
                          f"{SERVING_CALL_BUDGET:,} simulated calls per system); ask with --serving-concurrency "
                          + ",".join(map(str, sorted(levels + dropped)))}
        if not bands:
            out.serving["bands"] = "not simulated (ask with --serving-bands)"
    except AgentprofError:
        if (systems or model) and out.replay is None:  # names the replay accepted are not what failed here
            raise
        out.notes["serving"] = _why(sys.exc_info()[1])  # type: ignore[arg-type]
    except Exception as e:
        out.notes["serving"] = _why(e)
