"""Replay a recorded agent trace on serving systems: what happens to the whole task, not just the model calls.

Every model call is re-timed by the device cost model (prefill of the tokens the cache policy does not
serve, loading cached prefix KV from its tier, decode), every CPU-bound orchestration span is scaled by the
host's single-thread speed, waits stay as recorded, and each session is re-assembled along its recorded
critical path (:mod:`agentprof.replay.timeline`). Closed models are replayed through a named open stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from typing import Any

import numpy as np
import polars as pl

from agentprof.analysis.calls import CallBlocks, model_calls
from agentprof.catalog import CatalogError, ModelSpec, replayed_model
from agentprof.catalog.hardware import HardwareCatalog, System, load_catalog
from agentprof.importers.coerce import as_trace
from agentprof.replay.active import human_wait_s, set_agent_active
from agentprof.replay.bands import banded, corner_system
from agentprof.replay.bands import evidence as band_evidence
from agentprof.replay.cachepolicy import (
    CacheHits,
    CachePolicy,
    PrefixIndex,
    cached_tokens,
    cached_tokens_tiered,
    parse_policy,
)
from agentprof.replay.calibration import Fitted, load_fitted, user_fitted_in_use
from agentprof.replay.compaction import client_calls, failed_note, merged, onto_calls, touched
from agentprof.replay.context import beyond_context, context_note, context_tokens, covering_standin
from agentprof.replay.costmodel import call_times, disk_load_s, kv_load_s
from agentprof.replay.equations import WAITING_FOR
from agentprof.replay.orchestration import (
    cpu_split,
    gap_split,
    has_cpu_data,
    scaled_exclusive,
    scaled_gaps,
    span_runq,
)
from agentprof.replay.systems import Resolved, resolve
from agentprof.replay.timeline import MODEL, ORCH, TOOL, WAIT, assemble, prepare
from agentprof.trace.schema import Trace, has_token_counts

DEFAULT_RECORDED_HOST = "xeon-8480c"


def serving_band(ends: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """The serving simulation's headline figures at a band's fast and slow corners: first-token p50 and p99, and
    tasks per hour (``serving_ttft_p50_s`` …, as ``band`` lists them)."""
    return {"serving_ttft_p50_s": [e["ttft_s"]["p50"] for e in ends],
            "serving_ttft_p99_s": [e["ttft_s"]["p99"] for e in ends],
            "serving_tasks_per_hour": [e.get("tasks_per_hour") for e in ends]}


@dataclass
class SystemRow:
    """Replayed totals for one system (or the recorded run)."""

    name: str
    display: str
    e2e_s: float | None = None
    model_s: float | None = None
    orchestration_s: float | None = None
    """Critical-path time outside model calls, tools and waits (the agent's own code, parsing)."""
    wait_s: float | None = None
    tool_s: float | None = None
    """Critical-path time in tool calls (kept out of ``orchestration_s``)."""
    model_calls_s: float | None = None
    amdahl_e2e_s: float | None = None
    speedup_vs_recorded: float | None = None
    speedup_vs_first: float | None = None
    model_calls_speedup: float | None = None
    amdahl_bound: float | None = None
    agent_active_s: float | None = None  # e2e minus the recorded user turns, approvals and idle (replay/active.py)
    speedup_vs_recorded_active: float | None = None
    amdahl_bound_active: float | None = None
    host_speed_ratio: float | None = None
    serving: dict[str, Any] | None = None
    beyond_context: dict[str, Any] | None = None
    """What ``--overflow`` did in the one-session replay (the record ``serving.beyond_context`` is, from
    :meth:`agentprof.replay.serving.overflow.Overflow.summary`); absent when no call reaches the compaction
    trigger."""
    deployments: list[dict[str, Any]] = field(default_factory=list)
    cache: dict[str, float] = field(default_factory=dict)
    waiting_for: dict[str, float] = field(default_factory=dict)
    """Model-call time (the calls counted in ``model_calls_s``) split by what it waits for: compute, bandwidth
    (weights and KV), overhead (fixed step and request overheads, collectives), kv_load (from lower tiers) and
    queueing; the parts sum to ``model_calls_s``."""
    band: dict[str, Any] = field(default_factory=dict)
    """For systems resting on ranged estimates: ``e2e_s``, ``model_calls_s`` and ``speedup_vs_recorded`` at the
    fast and slow ends of the catalog ranges (and of the agentic deployment's estimated CPU tier), with a serving
    simulation its ``serving_ttft_p50_s``, ``serving_ttft_p99_s`` and ``serving_tasks_per_hour`` there too, and
    ``ranged`` (which numbers moved)."""
    error: str | None = None

    @property
    def model_share(self) -> float | None:
        if self.e2e_s is None or self.model_s is None or self.e2e_s <= 0:
            return None
        return self.model_s / self.e2e_s

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if v not in (None, [], {})}
        if self.model_share is not None:
            d["model_share"] = self.model_share
        return d


@dataclass
class ReplayResult:
    """``recorded`` and one row per system, plus the per-call replay table and what was assumed."""

    recorded: SystemRow
    systems: list[SystemRow]
    calls: pl.DataFrame
    cache_policy: str
    concurrency: int
    sessions: int
    model_calls: int
    replayed_calls: int
    standins: dict[str, str]
    orchestration: dict[str, Any]
    notes: list[str]
    beyond_context: list[dict[str, Any]] = field(default_factory=list)
    """Per replayed model, the calls whose prompt and reply exceed its context window
    (:mod:`agentprof.replay.context`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "cache_policy": self.cache_policy, "concurrency": self.concurrency, "sessions": self.sessions,
            "model_calls": self.model_calls, "replayed_calls": self.replayed_calls,
            "recorded": self.recorded.to_dict(), "systems": [s.to_dict() for s in self.systems],
            "standins": self.standins, "orchestration": self.orchestration, "notes": self.notes,
            "beyond_context": self.beyond_context,
        }

    def finding(self) -> str:
        """One sentence: per system, how much the task time changes against how much the model calls change."""
        parts = []
        for s in self.systems:
            if s.e2e_s is None:
                continue
            calls = f"{s.model_calls_speedup:.2f}x" if s.model_calls_speedup else "n/a"
            task = f"{s.speedup_vs_recorded:.2f}x" if s.speedup_vs_recorded else "n/a"
            if s.speedup_vs_recorded_active and s.agent_active_s != s.e2e_s:
                task += f" ({s.speedup_vs_recorded_active:.2f}x of agent-active time)"
            parts.append(f"{s.name} model calls {calls}, task {task}")
        bound = self.recorded.amdahl_bound
        tail = (f"; even an infinitely fast model gives at most {bound:.2f}x" if bound
                else "; all recorded time is model time (no Amdahl limit)")
        return (f"Speed-up against the recorded run over {self.model_calls} model calls in {self.sessions} "
                f"session(s) — " + "; ".join(parts) + tail + ".")


def _subset_blocks(cb: CallBlocks, rows: np.ndarray) -> CallBlocks:
    """The calls ``rows`` of ``cb`` with their prefix keys (all of them: ``cb`` itself, nothing copied)."""
    if rows.size == cb.calls.height and np.array_equal(rows, np.arange(rows.size)):
        return cb
    lengths = cb.lengths[rows]
    offsets = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if cb.ids.size and rows.size:
        idx = np.concatenate([np.arange(cb.offsets[r], cb.offsets[r + 1]) for r in rows]) if rows.size < 64 else \
            np.repeat(cb.offsets[:-1][rows], lengths) + (np.arange(int(lengths.sum())) - np.repeat(offsets[:-1], lengths))
        keys = cb.prefix_keys()[idx.astype(np.int64)]  # prefix keys restart per call: a subset keeps them
    else:
        keys = cb.ids[:0]
    return CallBlocks(cb.calls[rows.tolist()], keys, offsets, cb.block_size, "agentprof", _keys=keys)


def _hbm_capacity_tokens(r: Resolved, concurrency: int) -> float:
    """Prefix-cache room of one client: HBM left after the weights, shared by the concurrent clients."""
    return r.dep.kv_pool_tokens_per_gpu(r.system.mem_util) / max(concurrency, 1)


def _lmcache_hits(trace: Trace, keys: pl.DataFrame, policy: CachePolicy, r: Resolved, concurrency: int,
                  inp: np.ndarray) -> CacheHits:
    """HBM + LMCache CPU/disk tiers through :func:`agentprof.analysis.cachesim.simulate` (capacities per TP rank,
    shared by the concurrent clients)."""
    from agentprof.analysis.cachesim import Tier, simulate

    b = max(concurrency, 1)
    hbm = max(r.dep.free_kv_bytes_per_gpu(r.system.mem_util), 0.0) / b
    tiers = [Tier("hbm", int(hbm)), Tier("cpu", None if not np.isfinite(policy.cpu_bytes)
                                         else int(policy.cpu_bytes / r.dep.gpus / b))]
    if policy.disk_bytes:
        tiers.append(Tier("disk", None if not np.isfinite(policy.disk_bytes)
                          else int(policy.disk_bytes / r.dep.gpus / b)))
    spans = trace.spans.join(keys.with_columns(pl.lit(True).alias("_keep")), on=["session_id", "span_id"],
                             how="left")
    sub = Trace(trace.meta, spans.filter((pl.col("kind") != "model") | pl.col("_keep").is_not_null()).drop("_keep"),
                trace.diagnostics)
    res = simulate(sub, r.model.key, tiers, tp=r.dep.gpus, kv_dtype_bytes=r.dep.kv_dtype_bytes)
    pc = keys.join(res.per_call.select("session_id", "span_id", "hit_tokens_hbm", "hit_tokens_cpu",
                                       "hit_tokens_disk"),
                   on=["session_id", "span_id"], how="left").fill_null(0)
    limit = np.maximum(inp - 1.0, 0.0)
    hbm_t = np.minimum(pc.get_column("hit_tokens_hbm").to_numpy().astype(float), limit)
    cpu_t = np.minimum(pc.get_column("hit_tokens_cpu").to_numpy().astype(float), limit - hbm_t)
    disk_t = np.minimum(pc.get_column("hit_tokens_disk").to_numpy().astype(float), limit - hbm_t - cpu_t)
    notes = ["LMCache tiers simulated by agentprof.analysis.cachesim (256-token chunks; sessions interleaved on "
             "their recorded timestamps)", *res.diagnostics]
    return CacheHits(hbm_t, cpu_t, disk_t, notes)


def replay(trace: Trace, systems: Sequence[str | System], model: str | None = None,
           cache_policy: str | CachePolicy = "auto", concurrency: int = 1,
           catalog: HardwareCatalog | None = None, cpu_bound: dict[str, float] | None = None,
           recorded_host: str = DEFAULT_RECORDED_HOST, fitted: Fitted | None = None,
           bands: bool = True, serving: Any = None, deployment: str = "agentic", kv_dtype: str = "auto",
           speculative: str = "none", overflow: str = "compact", *,
           _human_s: float | None = None,
           _indexes: dict[str, tuple[PrefixIndex, np.ndarray, np.ndarray]] | None = None) -> ReplayResult:
    """Replay ``trace`` on each of ``systems`` (see the module docstring); the first system is the baseline
    for ``speedup_vs_first``. ``cpu_bound`` maps tool names to their CPU-bound fraction. With ``bands``, a
    system resting on ranged catalog estimates is replayed again at both ends of the ranges
    (:mod:`agentprof.replay.bands`).

    ``concurrency`` > 1 (or a :class:`agentprof.replay.serving.ServingConfig` as ``serving``) runs the
    multi-session serving simulation: ``concurrency`` sessions share each system, calls are re-timed by it and
    each system row gets a ``serving`` object (:mod:`agentprof.replay.serving`).

    ``deployment`` (``agentic``: each system as its validated agentic recipe deploys the model, else an estimate
    from those recipes; ``benchmark``: the catalog's benchmark settings) and ``kv_dtype`` apply to the one-session
    replay and the simulation alike (a ``serving`` config brings its own): the HBM share and KV dtype always, the
    CPU tier where ``cache_policy`` is ``auto`` (:mod:`agentprof.replay.serving.deployment`).

    ``speculative`` (``eagle3``; default ``none``) decodes with the model's catalogued drafter
    (:mod:`agentprof.replay.speculative`), in the one-session replay and the simulation alike.

    ``overflow`` (``compact``, ``reject``, ``stand-in``) is what the client does with a call beyond the served
    window, in the one-session replay (:mod:`agentprof.replay.compaction`) and the simulation alike (a ``serving``
    config brings its own where ``overflow`` is left at its default)."""
    from agentprof.replay.serving.config import OVERFLOW_POLICIES, check_choice
    from agentprof.replay.serving.deployment import deployed, deployment_for, summary
    from agentprof.replay.speculative import CHOICES as SPEC_CHOICES
    from agentprof.replay.speculative import ranged as spec_ranged
    from agentprof.replay.speculative import with_speculative

    trace = as_trace(trace)  # also the span table agentprof.trace.load returns
    cat = catalog or load_catalog()
    extra = tuple(p for p in cat.files if not p.endswith(("accelerators.toml", "hosts.toml", "systems.toml")))
    policy = parse_policy(cache_policy) if isinstance(cache_policy, str) else cache_policy
    if concurrency < 1:
        raise CatalogError(f"concurrency must be at least 1, got {concurrency}")
    if speculative not in SPEC_CHOICES:
        raise CatalogError(f"unknown speculative decoding {speculative!r}: expected {', '.join(SPEC_CHOICES)}")
    check_choice("overflow policy", overflow, OVERFLOW_POLICIES)

    if not systems:
        raise CatalogError("name at least one system (see `agentprof devices list`)")
    sys_objs = [s if isinstance(s, System) else cat.system(s) for s in systems]
    if recorded_host not in cat.hosts:
        raise CatalogError(f"unknown recorded host {recorded_host!r} (known: {', '.join(sorted(cat.hosts))})")
    rec_host = cat.hosts[recorded_host]
    own_fit = user_fitted_in_use() if fitted is None else None
    fitted = fitted if fitted is not None else load_fitted()
    if serving is None and concurrency > 1:
        from agentprof.replay.serving import ServingConfig

        serving = ServingConfig(concurrency=concurrency)
    label = policy.label
    if serving is not None:
        concurrency = serving.concurrency
        deployment, kv_dtype = serving.deployment, serving.kv_dtype
        if speculative == "none":  # the simulation's drafter is the replay's
            speculative = serving.speculative
        if overflow == "compact":  # one policy: the simulation's is the replay's
            overflow = serving.overflow
        serving = dc_replace(serving, speculative=speculative, overflow=overflow, prefix_cache=policy.kind != "none")
        if policy.kind != "auto":  # given explicitly: the deployment's CPU tier is not added
            serving = dc_replace(serving, cache_from_deployment=False)
        if policy.kind == "lmcache" and not (serving.cpu_bytes or serving.disk_bytes):
            serving = dc_replace(serving, cpu_bytes=policy.cpu_bytes, disk_bytes=policy.disk_bytes)
    if policy.kind == "auto" and deployment == "agentic":
        label = "auto: each system's agentic deployment (systems[].deployments[].deployment)"
    asked_policy = policy  # the band replays ask for the same
    if policy.kind == "auto":  # one session's replay: the HBM prefix cache
        policy = CachePolicy("prefix")
    spans = trace.spans
    lay = prepare(spans)
    notes: list[str] = []
    if own_fit is not None:
        notes.append(f"the device model uses your own fit {own_fit} (written by `agentprof devices fit`), not the "
                     "shipped one; delete that file to go back")

    # model calls in span-table order; the prefix-cache order (conversation lines in time) is built only when
    # a cache policy needs it
    calls = (spans.select("trace_id", "span_id", "session_id", "model", "input_tokens", "output_tokens", "timing",
                          "kind").with_row_index("_row")  # columns first: filtering would copy the hash lists
             .filter(pl.col("kind") == "model")
             .select("_row", "trace_id", "span_id", "session_id", "model", "input_tokens", "output_tokens",
                     "timing"))
    span_row = calls.get_column("_row").to_numpy().astype(np.int64)
    inp = calls.get_column("input_tokens").cast(pl.Float64).fill_null(np.nan).to_numpy()
    out = calls.get_column("output_tokens").cast(pl.Float64).fill_null(np.nan).to_numpy()
    # re-timed in place on the recorded timeline, so a call needs both ends too (the serving plan, a closed loop,
    # needs only its order and takes every call with token counts: serving.sessions.build_plan)
    replayable = calls.select(has_token_counts()).to_series().to_numpy() & lay.placed[span_row]
    if (~replayable).any():
        notes.append(f"{int((~replayable).sum())} model call(s) lack input/output token counts or times and keep "
                     "their recorded duration")
    names = calls.get_column("model").to_list()
    standins: dict[str, str] = {}
    model_of: list[str] = []
    specs: dict[str, ModelSpec] = {}
    resolved: dict[str | None, tuple[ModelSpec, str | None]] = {}
    for nm in names:
        if nm not in resolved:
            resolved[nm] = replayed_model(nm, model, extra)
            m, note = resolved[nm]
            specs[m.key] = m
            if note:
                standins[str(nm) if nm else "(unnamed)"] = note
        model_of.append(resolved[nm][0].key)
    if overflow == "stand-in" and model is None:
        need = np.nan_to_num(inp) + np.nan_to_num(out)
        for key in list(specs):
            sel = np.array([k == key for k in model_of], dtype=bool) & replayable
            if not sel.any():
                continue
            m, note = covering_standin(specs[key], float(need[sel].max()), extra)
            if m is not specs[key]:
                specs.pop(key)
                specs[m.key] = m
                model_of = [m.key if k == key else k for k in model_of]
                notes.append(note)
    model_arr = np.array(model_of, dtype=object)

    # orchestration: CPU-bound split, once
    split = cpu_split(spans, lay.host_parent, lay.excl_old, cpu_bound, span_runq(trace, lay.host_parent))
    kinds = spans.get_column("kind").to_numpy()
    scalable = np.isin(kinds, ("tool", "parse", "orchestration")) & lay.placed
    orch = split.summary(lay.excl_old, scalable)
    orch["recorded_host"] = rec_host.key
    gaps = gap_split(trace, lay.fixed_s, lay.session_ids, cpu_bound)
    orch.update(gaps.summary(lay.fixed_s, lay.top_level))
    if not has_cpu_data(spans) and not cpu_bound:
        notes.append("this trace records no CPU time (imported logs do not): a host CPU's effect, e.g. Vera's, is "
                     "not measurable from it (only parse spans, CPU work by definition, scale); capture the agent "
                     "with agentprof (--sample shows which code), or declare CPU-bound tools with --cpu-bound "
                     "TOOL[=FRACTION] / orchestration=FRACTION")
    elif orch["cpu_bound_s"] == 0 and orch["gaps_cpu_bound_s"] == 0:
        notes.append("no orchestration time was treated as CPU-bound (no cpu_ns captured, no parse spans, no tool "
                     "declared with --cpu-bound): host CPUs change nothing in this replay")

    k = len(sys_objs)
    # columns: 0 = recorded; 1..k = systems; k+1..2k = systems with an infinitely fast model; 2k+1 = recorded, model 0
    own_new = np.repeat(lay.excl_old[:, None], 2 * k + 2, axis=1)
    fixed_new = np.repeat(lay.fixed_s[:, None], 2 * k + 2, axis=1)
    model_new = np.repeat(lay.excl_old[:, None], 2 * k + 2, axis=1)  # a model call's own time, nested spans apart
    model_new[lay.category == MODEL, 2 * k + 1] = 0.0
    groups = {key: np.flatnonzero((model_arr == key) & replayable) for key in specs}
    too_long = [d for key, sel in groups.items() if (d := beyond_context(specs[key], inp[sel], out[sel]))]
    notes.extend(context_note(specs[d["model"]], d, overflow) for d in too_long)
    indexes: dict[str, tuple[PrefixIndex, np.ndarray, np.ndarray]] = {}
    if _indexes is not None:  # the band replays share the trace's prefix indexes (same trace, models, policy)
        indexes = _indexes
    elif policy.kind == "prefix" and replayable.any():
        cb = model_calls(trace)
        cb_call = (cb.calls.select("trace_id", "span_id")
                   .join(calls.select("trace_id", "span_id").with_row_index("_c"), on=["trace_id", "span_id"],
                         how="left", maintain_order="left").get_column("_c").to_numpy().astype(np.int64))
        for key, sel in groups.items():
            cb_rows = np.flatnonzero(np.isin(cb_call, sel))  # in cache order
            if cb_rows.size:
                # (index, position of each cache-order row within sel, the calls in cache order)
                indexes[key] = (PrefixIndex(_subset_blocks(cb, cb_rows)),
                                np.searchsorted(sel, cb_call[cb_rows]), cb_call[cb_rows])
    rows: list[SystemRow] = []
    call_frames: list[pl.DataFrame] = []
    # model-call speed-up is measured over calls whose recorded duration is a measurement
    timing = calls.get_column("timing").to_numpy()
    measured = replayable & (timing == "measured")
    if not measured.any():
        measured = replayable
        if replayable.any():
            notes.append("no model call has a measured recorded duration (both ends recorded); the model-call "
                         "speed-up uses the derived durations")
    elif (replayable & ~measured).any():
        notes.append(f"{int((replayable & ~measured).sum())} replayed call(s) have derived (not measured) recorded "
                     "durations and are left out of the model-call speed-up")
    rec_calls_s = float(lay.excl_old[span_row[measured]].sum()) if span_row.size else 0.0
    sim = _serving_setup(trace, serving, groups, calls, notes) if serving is not None else None
    plans: dict[str, tuple[Any, np.ndarray]] = {}  # per model: its sessions plan, built once a system needs it
    for j, system in enumerate(sys_objs, start=1):
        row = SystemRow(system.key, system.display)
        ratio = system.host.st_speed / rec_host.st_speed
        row.host_speed_ratio = ratio
        own_new[:, j] = np.where(scalable, scaled_exclusive(lay.excl_old, split, ratio,
                                                            system.host.mt_speed / rec_host.mt_speed), lay.excl_old)
        own_new[:, k + j] = own_new[:, j]
        fixed_new[:, j] = fixed_new[:, k + j] = scaled_gaps(lay.fixed_s, gaps, ratio)
        new_call = lay.excl_old[span_row].copy()
        wait_call = {k: np.zeros(span_row.size) for k in WAITING_FOR}
        cache_tot = {"input_tokens": 0.0, "hbm_hit_tokens": 0.0, "cpu_hit_tokens": 0.0, "disk_hit_tokens": 0.0}
        try:
            for key, spec in specs.items():
                sel = groups[key]
                if not sel.size:
                    continue
                r0 = resolve(system, spec, cat, fitted)
                dep = deployment_for(r0, deployment)
                r = deployed(r0, dep, kv_dtype)
                r, drafter = with_speculative(r, speculative)
                tier = dep.cpu_bytes(r.instances) if asked_policy.kind == "auto" else 0.0
                row.deployments.append({**r.describe(), "deployment": summary(dep, r, tier),
                                        **({"speculative": drafter} if drafter else {})})
                if policy.kind == "none" or (sim is not None and key == sim[0] and policy.kind == "lmcache"):
                    zero = np.zeros(sel.size)
                    hits = CacheHits(zero, zero.copy(), zero.copy())
                elif policy.kind == "lmcache":
                    hits = _lmcache_hits(trace, calls.select("session_id", "span_id")[sel.tolist()], policy,
                                         r, 1, inp[sel])
                else:
                    index, at, order = indexes[key]
                    if tier:  # the deployment's CPU tier behind the HBM prefix cache
                        got = cached_tokens_tiered(index, _hbm_capacity_tokens(r, 1), tier / r.dep.kv_token_bytes,
                                                   inp[order])
                    else:
                        got = cached_tokens(index, policy, _hbm_capacity_tokens(r, 1), inp[order])
                    hits = CacheHits(*(np.zeros(sel.size) for _ in range(3)), got.notes)
                    for name in ("hbm", "cpu", "disk"):
                        getattr(hits, name)[at] = getattr(got, name)
                notes.extend(f"{system.key}: {x}" for x in hits.notes if f"{system.key}: {x}" not in notes)
                client = None
                if sim is None or key != sim[0]:  # the simulation applies the policy to its own calls
                    client, hits = _client_step(trace, calls, sel, spec, r, overflow, hits, inp, out, plans)
                s_inp, s_out = (inp[sel], out[sel]) if client is None else (client.inp, client.out)
                load = kv_load_s(r.dep, hits.cpu, r.host_link_bw) + disk_load_s(r.dep, hits.disk, r.disk_bw)
                t = call_times(r.dep, r.params, s_inp, hits.total, s_out, 1, load, r.system.mem_util)
                if client is not None:
                    t, hits, s_inp, s_out = onto_calls(t, hits, client, sel.size)
                    row.beyond_context = merged(row.beyond_context, client.record)
                new_call[sel] = t.total_s
                for k_w in WAITING_FOR:
                    wait_call[k_w][sel] = t.waiting_for[k_w]
                if sim is not None and key == sim[0]:
                    _apply_serving(row, sim, r0, r, new_call, wait_call)  # the simulation deploys it itself
                cache_tot["input_tokens"] += float(s_inp.sum())
                cache_tot["hbm_hit_tokens"] += float(hits.hbm.sum())
                cache_tot["cpu_hit_tokens"] += float(hits.cpu.sum())
                cache_tot["disk_hit_tokens"] += float(hits.disk.sum())
                call_frames.append(pl.DataFrame({
                    "system": [system.key] * sel.size, "span_id": calls.get_column("span_id").gather(sel),
                    "session_id": calls.get_column("session_id").gather(sel), "model": [key] * sel.size,
                    "input_tokens": s_inp, "cached_hbm": hits.hbm, "cached_cpu": hits.cpu,
                    "cached_disk": hits.disk, "output_tokens": s_out, "load_s": t.load_s, "ttft_s": t.ttft_s,
                    "decode_s": t.decode_s, "replayed_s": t.total_s, "recorded_s": lay.excl_old[span_row[sel]],
                    **{f"wait_{k_w}_s": t.waiting_for[k_w] for k_w in WAITING_FOR}}))
        except CatalogError as e:
            row.error = str(e)
            rows.append(row)
            continue
        model_new[span_row, j] = new_call
        model_new[span_row, k + j] = 0.0
        failed = row.beyond_context or (row.serving or {}).get("beyond_context") or {}
        if failed.get("failed_sessions"):
            notes.append(failed_note(system.key, failed))
        row.model_calls_s = float(new_call[measured].sum())
        row.waiting_for = {k_w: float(v[measured].sum()) for k_w, v in wait_call.items()}
        row.model_calls_speedup = rec_calls_s / row.model_calls_s if row.model_calls_s > 0 else None
        if cache_tot["input_tokens"] and row.serving is None:
            row.cache = {**cache_tot, "hit_share": (cache_tot["hbm_hit_tokens"] + cache_tot["cpu_hit_tokens"]
                                                    + cache_tot["disk_hit_tokens"]) / cache_tot["input_tokens"]}
        rows.append(row)

    asm = assemble(lay, own_new, model_new, fixed_new)
    top = lay.top_level
    e2e = asm.e2e[top].sum(axis=0)
    cats = asm.by_category[top].sum(axis=0)
    recorded = SystemRow("recorded", f"recorded run (host taken as {rec_host.key})")
    recorded.e2e_s = float(e2e[0])
    recorded.model_s, recorded.orchestration_s, recorded.wait_s, recorded.tool_s = (
        float(cats[0, c]) for c in (MODEL, ORCH, WAIT, TOOL))
    recorded.model_calls_s = rec_calls_s
    recorded.amdahl_e2e_s = float(e2e[2 * k + 1])
    recorded.amdahl_bound = recorded.e2e_s / recorded.amdahl_e2e_s if recorded.amdahl_e2e_s > 0 else None
    first_e2e = None
    for j, row in enumerate(rows, start=1):
        if row.error:
            continue
        row.e2e_s = float(e2e[j])
        row.model_s, row.orchestration_s, row.wait_s, row.tool_s = (float(cats[j, c]) for c in (MODEL, ORCH, WAIT, TOOL))
        row.amdahl_e2e_s = float(e2e[k + j])
        row.speedup_vs_recorded = recorded.e2e_s / row.e2e_s if row.e2e_s > 0 else None
        row.amdahl_bound = recorded.e2e_s / row.amdahl_e2e_s if row.amdahl_e2e_s > 0 else None
        if first_e2e is None:
            first_e2e = row.e2e_s
        row.speedup_vs_first = first_e2e / row.e2e_s if row.e2e_s > 0 else None
    human_s = human_wait_s(trace) if _human_s is None else _human_s  # the band replays reuse it: same trace
    set_agent_active(recorded, rows, human_s)
    if bands:
        for row, system in zip(rows, sys_objs, strict=True):
            # the corners take the estimated tier's range ends too where this run takes it (serving.deployment)
            moved = banded(system, deployment == "agentic" and asked_policy.kind == "auto" and any(
                (d.get("deployment") or {}).get("level") == "estimate" for d in row.deployments))
            moved += [x for key in specs for x in spec_ranged(key, speculative)]  # the drafter's ranges
            if row.error or not moved:
                continue
            ends = replay(trace, [corner_system(system, "fast"), corner_system(system, "slow")], model=model,
                          cache_policy=asked_policy, concurrency=concurrency, catalog=cat, cpu_bound=cpu_bound,
                          recorded_host=recorded_host, fitted=fitted, bands=False, deployment=deployment,
                          kv_dtype=kv_dtype, speculative=speculative, overflow=overflow,
                          # the band's corners re-time the calls; the levers are the central run's
                          serving=dc_replace(serving, levers=False) if serving is not None else None,
                          _human_s=human_s, _indexes=indexes)
            if any(e.error for e in ends.systems):
                continue
            row.band = {"ranged": moved, "evidence": band_evidence(system, moved), **{k: [getattr(e, k) for e in ends.systems]
                                            for k in ("e2e_s", "model_calls_s", "speedup_vs_recorded",
                                                      "speedup_vs_recorded_active")}}
            if row.serving is not None and all(e.serving is not None for e in ends.systems):
                row.band.update(serving_band([e.serving for e in ends.systems]))  # type: ignore[misc]
    parallel = _parallel_sessions(lay)
    if parallel:
        notes.append(f"{parallel} session(s) run spans in parallel: their recorded critical path is kept")
    return ReplayResult(
        recorded=recorded, systems=rows,
        calls=pl.concat(call_frames) if call_frames else pl.DataFrame(),
        cache_policy=label, concurrency=concurrency, sessions=int(top.sum()),
        model_calls=int(calls.height), replayed_calls=int(replayable.sum()), standins=standins,
        orchestration=orch, notes=notes, beyond_context=too_long)


def _client_step(trace: Trace, calls: pl.DataFrame, sel: np.ndarray, spec: ModelSpec, r: Resolved, overflow: str,
                 hits: CacheHits, inp: np.ndarray, out: np.ndarray,
                 plans: dict[str, tuple[Any, np.ndarray]]) -> tuple[Any, CacheHits]:
    """``--overflow`` on one model's calls ``sel`` on one system (:mod:`agentprof.replay.compaction`): the calls as
    the client sends them and their hits (the replay's own ``hits`` where the prompt is the recorded one), or
    (None, ``hits``) when no call reaches what the policy acts on. ``plans`` keeps each model's sessions plan."""
    ctx, pool = context_tokens(spec), _hbm_capacity_tokens(r, 1)
    if not touched(inp[sel] + out[sel], ctx, pool, overflow):
        return None, hits
    if spec.key not in plans:
        plans[spec.key] = _key_plan(trace, calls, sel)
    plan, idx = plans[spec.key]
    client = client_calls(plan, np.where(idx >= 0, np.searchsorted(sel, idx), -1), sel.size, ctx, pool, overflow)
    keep = client.recorded_prompt
    return client, CacheHits(np.where(keep, hits.hbm[client.pos], client.own_hits),
                             np.where(keep, hits.cpu[client.pos], 0.0), np.where(keep, hits.disk[client.pos], 0.0),
                             hits.notes)


def _key_plan(trace: Trace, calls: pl.DataFrame, sel: np.ndarray, cap_wait_s: float | None = None,
              scope: str = "global") -> tuple[Any, np.ndarray]:
    """The sessions plan of the calls ``sel`` (one model's), and where each plan call sits in the replay's call
    table (-1: a call the plan does not price)."""
    from agentprof.replay.serving import build_plan

    spans = calls.get_column("span_id").to_list()
    tids = calls.get_column("trace_id").to_list()
    keep = {(tids[i], spans[i]) for i in sel.tolist()}
    plan = build_plan(trace, cap_wait_s, scope, keep=keep)
    where = {(tids[i], spans[i]): i for i in sel.tolist()}
    idx = np.array([where.get((t, s), -1) for t, s in zip(plan.trace_ids, plan.span_ids, strict=True)],
                   dtype=np.int64)
    return plan, idx


def _serving_setup(trace: Trace, cfg: Any, groups: dict[str, np.ndarray], calls: pl.DataFrame,
                   notes: list[str]) -> tuple[str, Any, np.ndarray, np.ndarray]:
    """The sessions plan for the serving simulation: the calls of the most used model (others keep their
    single-session replay), and where each plan call sits in the replay's call table."""
    key = max(groups, key=lambda k: groups[k].size)
    sel = groups[key]
    plan, idx = _key_plan(trace, calls, sel, cfg.cap_wait_s, cfg.scope)
    other = sum(g.size for k, g in groups.items() if k != key)
    if other:
        notes.append(f"serving simulation: {other} call(s) of models other than {key} keep their single-session "
                     "replay and do not load the simulated server")
    return key, (cfg, plan), idx, sel


def _apply_serving(row: SystemRow, sim: tuple[str, Any, np.ndarray, np.ndarray], r: Resolved, alone: Resolved,
                   new_call: np.ndarray, wait_call: dict[str, np.ndarray]) -> None:
    """Run the serving simulation on this system (from ``r`` as resolved) and take its per-call durations and
    cache hits. What a served call waits for is the call alone on ``alone`` (the one-session deployment) with the
    prompt, cache hits and reply the server saw, plus queueing for the rest: the shared server's waits, or what
    a differently sized instance saves. Calls not served (their session's task failed) take 0 s."""
    from agentprof.replay.serving import simulate

    _, (cfg, plan), idx, _ = sim
    run = simulate(plan, r, cfg)
    ok = (idx >= 0) & np.isfinite(run.call_s)
    new_call[idx[ok]] = run.call_s[ok]
    lost = idx[(idx >= 0) & ~np.isfinite(run.call_s)]
    new_call[lost] = 0.0
    for k_w in WAITING_FOR:
        wait_call[k_w][lost] = 0.0
    e, q = run.engine, run.call_req[ok]
    t = call_times(alone.dep, alone.params, e.inp[q], e.hits[q].sum(axis=1), e.out[q], 1, e.load_s[q],
                   alone.system.mem_util)
    alone_s = t.total_s.copy()
    for k_w in WAITING_FOR:
        wait_call[k_w][idx[ok]] = t.waiting_for[k_w]
    pre = run.pre_req[ok]  # a compaction's summarizing call, priced onto the call it precedes
    if (pre >= 0).any():
        has, p = np.flatnonzero(pre >= 0), pre[pre >= 0]
        tp = call_times(alone.dep, alone.params, e.inp[p], e.hits[p].sum(axis=1), e.out[p], 1, e.load_s[p],
                        alone.system.mem_util)
        alone_s[has] += tp.total_s
        for k_w in WAITING_FOR:
            wait_call[k_w][idx[ok][has]] += tp.waiting_for[k_w]
    wait_call["queueing"][idx[ok]] += run.call_s[ok] - alone_s
    row.serving = run.serving
    h = run.serving["hit_share"]
    row.cache = {"input_tokens": float(run.engine.inp.sum()), "hbm_hit_tokens": float(run.engine.hits[:, 0].sum()),
                 "cpu_hit_tokens": float(run.engine.hits[:, 1].sum()),
                 "disk_hit_tokens": float(run.engine.hits[:, 2].sum()), "hit_share": h["total"]}


def _parallel_sessions(lay: Any) -> int:
    """Sessions where top-level spans overlap by more than rounding (5 % of a span and at least 1 s)."""
    # own_len < old_dur for a member means part of it was owned by an overlapping span
    mem = np.flatnonzero(lay.member & lay.placed)
    lost = lay.old_dur[mem] - lay.own_len[mem]
    big = lost > np.maximum(0.05 * lay.old_dur[mem], 1.0)
    return int(np.unique(lay.host[mem[big]]).size)
