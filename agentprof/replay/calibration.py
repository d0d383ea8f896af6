"""Fit the cost model's free terms on measured serving points, hierarchically, and store them as data.

Levels: accelerator family → hardware → group (hardware, framework, model, precision, speculation) → exact
parallel layout. Each level is a regularized least-squares fit (log-TPOT weight 1, log-TTFT and log-E2E
weight 0.5) whose log-normal prior is the level above, so a layout with three points stays close to its
group and an unseen layout falls back to it. Parameters (natural units) are :data:`points.PARAMS`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml
from agentprof.catalog.hardware import HardwareCatalog, load_catalog
from agentprof.replay.costmodel import Deployment, StepParams
from agentprof.replay.points import (
    PARAMS,
    Features,
    PointKey,
    fixed_overhead,
    point_features,
    predict,
)

FITTED_PATH = CATALOG_DIR / "fitted.toml"
DEFAULT_POINTS = Path("data/inferencex/calibration_points.csv")
DEFAULT_AGENTIC = Path("data/inferencex/agentic_kimi_points.csv")
DEFAULT_AGENTIC_OTHER = Path("data/inferencex/agentic_other_points.csv")
DEFAULT_AGENTIC_METRICS = Path("data/inferencex/agentx_server_metrics.csv")
"""The AgentX points of the other models (MiniMax M2.5: GQA attention), for the GQA kernels' efficiency."""
ATTN_EFF_BASIS = "bf16_peak"
"""What ``[global] attn_eff`` is a fraction of: the BF16 peak (attention at its kernels' own efficiency). A file
without it was written when attn_eff scaled each group's prefill GEMM efficiency, and is refused (refit)."""
METHOD = ("hierarchical regularized least squares (Levenberg-Marquardt, scipy.optimize.least_squares): levels family > hardware > "
          "group (hardware, framework, model, precision, speculation) > layout; residuals log(pred/measured) "
          "of median TPOT (weight 1), TTFT and E2E (weight 0.5); log-normal priors from the level above "
          "(a disaggregated group's prefill efficiency: its chip's sourced value)")

# prior means (natural units) and log-space widths for the top level
PRIOR_MEAN = {"tau_s": 80e-6, "kappa": 0.05, "mbu": 0.75, "mfu": 0.35, "t0_s": 0.02, "q": 1.0, "t_req_s": 0.01,
              "accept": 1.8, "mfu_pf": 0.2, "handoff": 3.0, "a2a_ratio": 1.0}
"""``handoff`` (estimate): the fewest decode-engine iterations a disaggregated request's first token can wait for
after its KV arrives: the transfer is noticed by a poll at a step boundary (half a step on average), the request
joins the next batch (one step) and, under the overlap scheduler both SGLang and TRT-LLM run, its output is
processed one step later; ≈ 3, with a wide prior (docs/DEVICE_MODEL.md §2.2)."""
"""``a2a_ratio`` (estimate): the all-to-all's fan-out latency (data-parallel attention with expert-parallel MoE:
dispatch and combine) relative to the tensor-parallel all-reduce's ``kappa``; 1 (one constant for both, the model
before the split) with a log-sd of 1, fitted where a unit has points of the all-to-all kind, else the level
above's (docs/DEVICE_MODEL.md §2.2)."""
PRIOR_MEAN_AMD = {"mbu": 0.6}
PRIOR_SD = np.array([0.8, 1.5, 1.0, 0.15, 1.5, 0.5, 1.5, 0.5, 0.3, 1.0, 1.0])
SPLIT_A2A = True
"""Fit the all-to-all's fan-out constant apart from the all-reduce's (``a2a_ratio``); False holds it at 1 (one
``kappa`` for both kinds, the model before the split) for before/after measurements."""
LEVEL_SD_SCALE = {"family": 1.0, "hardware": 1.0, "group": 1.0, "layout": 0.7}
W_TPOT, W_TTFT, W_E2E = 1.0, 0.5, 0.5
LEVELS = ("family", "hardware", "group", "layout")


def to_x(theta: np.ndarray) -> np.ndarray:
    """Natural parameters → unconstrained fit space (log, logit for efficiencies, log(a−1) for acceptance)."""
    tau, kappa, mbu, mfu, t0, q, treq, acc, mfu_pf, handoff, a2a = theta
    return np.array([math.log(tau), math.log(kappa), math.log(mbu / (1 - mbu)), math.log(mfu / (1 - mfu)),
                     math.log(t0), math.log(q), math.log(treq), math.log(max(acc - 1.0, 1e-3)),
                     math.log(mfu_pf / (1 - mfu_pf)), math.log(handoff), math.log(a2a)])


def from_x(x: np.ndarray) -> np.ndarray:
    e = np.exp(np.clip(x, -40, 40))
    return np.array([e[0], e[1], 1 / (1 + 1 / e[2]), 1 / (1 + 1 / e[3]), e[4], e[5], e[6], 1.0 + e[7],
                     1 / (1 + 1 / e[8]), e[9], e[10]])


def step_params(theta: np.ndarray, layers: float, gpus: int, accept: float | None = None,
                dpa: bool = False, crossing_s: float = 0.0) -> StepParams:
    """Cost-model parameters of a configuration from a fitted vector: the per-step fixed overhead is
    ``layers·tau·(1 + kappa·fanout(gpus, dpa))`` (:func:`agentprof.replay.points.fixed_overhead`) plus
    ``crossing_s``, the deployment's all-reduces over the scale-out network
    (:attr:`agentprof.replay.costmodel.Deployment.crossing_s`); ``accept`` overrides the fitted speculative
    acceptance (1 = off)."""
    t = dict(zip(PARAMS, (float(v) for v in theta), strict=True))
    fixed = fixed_overhead(layers, t["tau_s"], t["kappa"], gpus, dpa, t["a2a_ratio"]) + crossing_s
    return StepParams(t_fixed_s=float(fixed),
                      mbu=t["mbu"], mfu=t["mfu"], t0_s=t["t0_s"], q=t["q"], t_req_s=t["t_req_s"],
                      accept=t["accept"] if accept is None else accept, mfu_pf=t["mfu_pf"])


def deployment_params(theta: np.ndarray, dep: Deployment, accept: float | None = None) -> StepParams:
    """:func:`step_params` of a deployment: its layers, accelerators, attention layout and all-reduces over the
    scale-out network (:attr:`Deployment.crossing_s`)."""
    return step_params(theta, dep.layers, dep.gpus, accept, dep.dp_attention, dep.crossing_s)


def prior_theta(vendor: str = "", gemm_ratio: float = 1.0) -> np.ndarray:
    """The top-level prior: :data:`PRIOR_MEAN` (with :data:`PRIOR_MEAN_AMD` for AMD chips), its prefill GEMM
    efficiency scaled by the chip's measured block-scale GEMM efficiency relative to Hopper's
    (``HardwareCatalog.gemm_ratio``; 1 where unpublished): 1K-token prompts rarely show it, long ones do."""
    p = dict(PRIOR_MEAN)
    if vendor == "amd":
        p.update(PRIOR_MEAN_AMD)
    p["mfu_pf"] *= gemm_ratio
    return np.array([p[k] for k in PARAMS])


def prior_for(cat: HardwareCatalog, *hardware: str) -> np.ndarray:
    """:func:`prior_theta` of an accelerator, or of a family's points: the first one's vendor, the median of their
    GEMM ratios (an unknown chip: the defaults)."""
    acc = cat.accelerators.get(hardware[0])
    return prior_theta(acc.vendor if acc else "", float(np.median([cat.gemm_ratio(h) for h in hardware])))


@dataclass
class FitEntry:
    """Fitted parameters of one calibration unit (a family, hardware, group or layout)."""

    level: str
    key: str
    theta: np.ndarray
    points: int
    attrs: dict[str, str] = field(default_factory=dict)
    median_ape_tpot: float = float("nan")

    def param(self, name: str) -> float:
        return float(self.theta[PARAMS.index(name)])


def attn_eff_lookup(hardware: str, attention: str, pooled: float, by_accelerator: Mapping[str, float],
                    by_attention: Mapping[str, Mapping[str, float]]) -> float:
    """The prefill-attention efficiency of ``hardware`` running ``attention`` kernels: where ``by_attention`` lists
    the kind, its value for the accelerator, else that kind's pooled one; otherwise (MLA, and any kind not listed)
    ``by_accelerator[hardware]``, else ``pooled``."""
    table = by_attention.get(attention)
    if table:
        return float(table.get(hardware, table["pooled"]))
    return float(by_accelerator.get(hardware, pooled))


@dataclass
class Fitted:
    """All fitted entries by level, with the provenance of the fit."""

    entries: dict[str, dict[str, FitEntry]]
    provenance: dict[str, Any]
    attn_eff: float = 1.0
    """Efficiency of prefill attention as a fraction of the BF16 peak (one global value, fitted on the long-prompt
    agentic points, :mod:`agentprof.replay.agentic`); 1 when not fitted. It is the pooled value: the fixed-sequence
    terms are fitted with it, and it is the fallback of an accelerator without agentic points of its own."""
    agentic: dict[str, Any] = field(default_factory=dict)
    level_errors: dict[str, dict[str, float]] = field(default_factory=dict)
    """Cross-validated error per calibration level (``fitted``, ``group``, ``unseen``): median and p90 APE of
    TTFT, TPOT and E2E, measured by :func:`agentprof.replay.fidelity.level_errors` when the fit was made."""
    attn_eff_by_accelerator: dict[str, float] = field(default_factory=dict)
    """Prefill-attention efficiency per accelerator, each fitted on that accelerator's own agentic points
    (:func:`agentprof.replay.agentic.fit_attn_eff_per_accelerator`); an accelerator not listed takes ``attn_eff``."""
    attn_eff_by_attention: dict[str, dict[str, float]] = field(default_factory=dict)
    """The same for another family of attention kernels (``{"gqa": {"pooled": η, "mi355x": η}}``), fitted on the
    AgentX points of models with that attention; ``attn_eff`` and ``attn_eff_by_accelerator`` are the MLA kernels'
    (Kimi K2.5's points), and any kind not listed takes them."""

    engine_steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per-step fixed-overhead terms (``tau_s``, ``kappa``) of a serving engine on an accelerator where the
    fixed-sequence points hold no group of that engine there (``{"vllm/mi355x": {...}}``), fitted on that stack's
    single-user AgentX decode (:func:`agentprof.replay.enginestep.fit_engine_steps`). :meth:`lookup` puts them into
    the entry it borrows from another engine: the engines' decode paths differ on one chip (docs/DEVICE_MODEL.md
    §2.2, [S69])."""

    def attn_eff_for(self, hardware: str, attention: str = "mla") -> float:
        """The prefill-attention efficiency of ``hardware`` running ``attention`` kernels: its own fitted value,
        else the pooled one of that kind (MLA's where the kind has none)."""
        return attn_eff_lookup(hardware, attention, self.attn_eff, self.attn_eff_by_accelerator,
                               self.attn_eff_by_attention)

    def attn_eff_basis(self, hardware: str, attention: str = "mla") -> str:
        """Where :meth:`attn_eff_for` comes from, in words (for reports and notes)."""
        if self.attn_eff_by_attention.get(attention):
            kind = attention.upper()
            if hardware not in self.attn_eff_by_attention[attention]:
                return f"pooled over the {kind} AgentX points (none on {hardware})"
            n = self.agentic.get(f"{attention}_{hardware}_attn_eff_points")
            return f"fitted on {hardware}'s own {n} {kind} AgentX points" if n else \
                f"fitted on {hardware}'s own {kind} AgentX points"
        if hardware in self.attn_eff_by_accelerator:
            n = self.agentic.get(f"{hardware}_attn_eff_points")
            return f"fitted on {hardware}'s own {n} AgentX points" if n else f"fitted on {hardware}'s own AgentX points"
        return "pooled over all accelerators' AgentX points (none of its own)"

    def lookup(self, key: PointKey, cat: HardwareCatalog | None = None) -> tuple[FitEntry, str]:
        """The parameters for a configuration: its layout, else its group, else the nearest calibrated group
        (same family and model, framework base, precision; :func:`nearest_group`), else its hardware or
        family fit, else the prior (its accelerator's in ``cat``, :func:`prior_for`; without ``cat`` the
        defaults). Returns ``(entry, how)`` where ``how`` names the level used."""
        lay = self.entries["layout"].get(key.config)
        if lay is not None:
            return lay, "layout"
        grp = self.entries["group"].get(key.group)
        if grp is not None:
            return grp, "group"
        near = nearest_group(self, key)
        if near is not None:
            return self._own_engine_step(near, key, f"nearest group {near.key}")
        hw = self.entries["hardware"].get(key.hardware)
        if hw is not None:
            return self._own_engine_step(hw, key, "hardware")
        fam = self.entries["family"].get(key.family)
        if fam is not None:
            return self._own_engine_step(fam, key, "family")
        theta = prior_theta() if cat is None else prior_for(cat, key.hardware)
        return self._own_engine_step(FitEntry("prior", "prior", theta, 0), key, "prior")

    def _own_engine_step(self, entry: FitEntry, key: PointKey, how: str) -> tuple[FitEntry, str]:
        """``entry`` (borrowed from another engine, or a level above) with the per-step overhead of the key's own
        engine on its accelerator where :attr:`engine_steps` holds it; ``how`` then names it after the level (its
        first word stays the level's)."""
        from agentprof.catalog.kvcache import engine

        name = engine_step_key(engine(key.framework), key.hardware)
        step = self.engine_steps.get(name)
        if step is None or engine(entry.attrs.get("framework", "")) == engine(key.framework):
            return entry, how
        theta = entry.theta.copy()
        theta[PARAMS.index("tau_s")], theta[PARAMS.index("kappa")] = step["tau_s"], step["kappa"]
        out = FitEntry(entry.level, entry.key, theta, entry.points, dict(entry.attrs), entry.median_ape_tpot)
        return out, f"{how} with the step overhead of {name} (AgentX single-user decode)"


def engine_step_key(engine_name: str, hardware: str) -> str:
    """The key of :attr:`Fitted.engine_steps`: ``vllm/mi355x``."""
    return f"{engine_name}/{hardware}"


def is_disaggregated(framework: str) -> bool:
    """Frameworks that serve with separate prefill and decode pools (Dynamo, SGLang-disagg)."""
    f = framework.lower()
    return f.startswith("dynamo") or "disagg" in f


def borrowed_handoff(fitted: Fitted, key: PointKey) -> float:
    """The hand-off (decode steps, :data:`PRIOR_MEAN` ``handoff``) for a disaggregated configuration whose own
    stack was never fitted: the points-weighted geometric mean over the fitted disaggregated groups of the same
    model on the same serving engine (``dynamo-sglang`` and ``sglang-disagg`` both run SGLang's decode
    scheduler), else the prior. An aggregated sibling never hands a request over, and the fitted stacks take
    6-27 steps: borrowing across models did worse when whole groups were held out, across engines it only
    cancelled other errors (docs/DEVICE_MODEL.md §3). The count is the engine's; the time comes from the
    configuration's own decode step."""
    from agentprof.catalog.kvcache import engine

    base = engine(key.framework)
    use = [e for e in fitted.entries["group"].values()
           if is_disaggregated(e.attrs.get("framework", "")) and e.attrs.get("model") == key.model
           and engine(e.attrs.get("framework", "")) == base]
    if not use:
        return PRIOR_MEAN["handoff"]
    w = np.array([max(e.points, 1) for e in use], dtype=float)
    h = np.array([e.param("handoff") for e in use])
    return float(np.exp(np.sum(w * np.log(h)) / np.sum(w)))


def _match_score(a: PointKey, e: FitEntry) -> float:
    from agentprof.catalog.kvcache import engine

    s = 0.0
    if e.attrs.get("model") != a.model:
        return -1.0
    if e.attrs.get("hardware") == a.hardware:
        s += 8
    elif e.attrs.get("family") == a.family:
        s += 4
    else:
        return -1.0
    if e.attrs.get("framework") == a.framework:
        s += 4
    elif engine(e.attrs.get("framework", "")) == engine(a.framework):
        s += 3
    if e.attrs.get("precision") == a.precision:
        s += 2
    if e.attrs.get("spec") == a.spec:
        s += 1
    return s + min(e.points, 100) / 1000.0


def nearest_group(fitted: Fitted, key: PointKey) -> FitEntry | None:
    """The calibrated group that best matches an uncalibrated configuration: same model and accelerator
    family required; then hardware, framework (or its base engine), precision and speculation."""
    best, best_s = None, 0.0
    for e in fitted.entries["group"].values():
        s = _match_score(key, e)
        if s > best_s:
            best, best_s = e, s
    return best


ACCEPT, HANDOFF, A2A = PARAMS.index("accept"), PARAMS.index("handoff"), PARAMS.index("a2a_ratio")
MFU_PF = PARAMS.index("mfu_pf")
POOL_PF_PRIOR_SOURCED = True
"""A disaggregated group's prefill efficiency prior is its chip's sourced value (:func:`prior_for`: the top prior
scaled by the chip's measured block-scale GEMM efficiency over Hopper's), not the hardware level's fitted one: 1K
prompts show the efficiency mostly through TPOT, where an aggregated stack's chunks ride the decode steps, which is
not a pool's cost, and the pools of held-out 8K prompts followed the sourced value better (docs/DEVICE_MODEL.md
§3, §4). False: the hardware's, as every other term."""


A2A_LEVELS = ("hardware", "group", "layout")
"""Levels whose fit informs ``a2a_ratio``: the all-to-all is the engine's own kernel (TRT-LLM's MNNVL all-to-all,
SGLang's DeepEP or MORI dispatch), so a group fits it where it measured the kind, and a group that did not keeps 1
(one constant for both kinds; it does not take the hardware's ratio, a compromise over the hardware's frameworks
that transferred worse). The hardware level fits it too, so that the hardware's ``kappa`` — every group's prior —
is the all-reduce's: held at 1 there, GB200's and MI355X's ``kappa`` were set by their mostly attention-DP
layouts' all-to-all, and a group's unidentified all-reduce inherited it (docs/DEVICE_MODEL.md §4, 2026-12-02
`lolo3`)."""


def _without_a2a_ratio(mu: np.ndarray) -> np.ndarray:
    """``mu`` (natural units) with the all-to-all ratio at its prior 1: the prior of a group without the kind."""
    out = mu.copy()
    out[A2A] = PRIOR_MEAN["a2a_ratio"]
    return out


def _fixed_terms(f: Features, level: str = "group") -> list[int]:
    """Terms the points of a unit cannot inform, held at their prior: MTP acceptance without MTP points, the
    disaggregated hand-off without disaggregated points, the all-to-all's fan-out ratio without a multi-GPU
    data-parallel-attention decode instance inside its scale-up domain (the decode step is what TPOT measures; a
    prefill instance's shows only in TTFT, among larger terms; an instance that spans nodes, MI355X EP16, waits
    for the scale-out network's latency too, which the ratio does not describe) or with :data:`SPLIT_A2A` off."""
    a2a = SPLIT_A2A and level in A2A_LEVELS and bool((f.dpa_dec & (f.g_dec > 1) & f.in_domain).any())
    return ([] if f.mtp.any() else [ACCEPT]) + ([] if f.disagg.any() else [HANDOFF]) + ([] if a2a else [A2A])


def _residuals(f: Features, xs: np.ndarray, mu: np.ndarray, sd: np.ndarray, fixed: list[int],
               attn_eff: float) -> np.ndarray:
    """The fit's weighted residuals (log(pred/measured) of TPOT, TTFT, E2E, then the prior's) for each row of
    ``xs`` (k parameter vectors in fit space): k × (3·n + len(PARAMS)). ``f`` holds a unit's n points k times
    over, row ``j`` of ``xs`` for the ``j``-th copy, so that one prediction serves every vector: the serving
    equations are elementwise, each point's result the same as in a call of its own."""
    k = xs.shape[0]
    n = len(f) // k
    xx = xs.copy()
    xx[:, fixed] = mu[fixed]
    theta = np.repeat(np.array([from_x(x) for x in xx]), n, axis=0)
    ttft, tpot, e2e = predict(f, theta, attn_eff)
    parts = []
    for w, pred, meas in ((W_TPOT, tpot, f.tpot), (W_TTFT, ttft, f.ttft), (W_E2E, e2e, f.e2e)):
        ok = np.isfinite(meas) & (meas > 0) & np.isfinite(pred) & (pred > 0)
        r = np.zeros(meas.size)
        r[ok] = np.log(pred[ok] / meas[ok])
        r[~np.isfinite(pred) | (pred <= 0)] = 10.0
        parts.append(math.sqrt(w) * r.reshape(k, n))
    prior = (xs - mu) / sd
    prior[:, fixed] = 0.0
    parts.append(prior)
    return np.concatenate(parts, axis=1)


FD_ROWS = 3000
"""Most points one prediction of the finite-difference Jacobian holds (:class:`_Objective`): a call of the serving
equations costs as much as a few hundred points, so the steps of the parameters are predicted together, one copy
of the unit's points per step (a 600-point family: 0.7 ms a step that way, 1.8 ms alone), up to arrays that
outgrow the processor's cache."""


class _Objective:
    """One unit's residuals (:func:`_residuals`) and their Jacobian for the Levenberg-Marquardt solver: scipy's
    forward difference (``jac="2-point"``: the step ``sqrt(eps)·max(1, |x|)`` signed as ``x``; the same numbers)
    with every step's prediction in one call (:data:`FD_ROWS`), and the columns of the terms held fixed at their
    exact zero without predicting them."""

    def __init__(self, f: Features, mu: np.ndarray, sd: np.ndarray, fixed: list[int], attn_eff: float) -> None:
        self.f, self.mu, self.sd, self.fixed, self.attn_eff = f, mu, sd, fixed, attn_eff
        self.free = np.array([i for i in range(len(PARAMS)) if i not in fixed], dtype=int)
        self._copies: dict[int, Features] = {1: f}
        self._last: tuple[bytes, np.ndarray] | None = None

    def _times(self, k: int) -> Features:
        """The unit's points ``k`` times over."""
        if k not in self._copies:
            self._copies[k] = self.f.subset(np.tile(np.arange(len(self.f)), k))
        return self._copies[k]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        r = _residuals(self.f, x[None, :], self.mu, self.sd, self.fixed, self.attn_eff)[0]
        self._last = (x.tobytes(), r)
        return r

    def jac(self, x: np.ndarray) -> np.ndarray:
        f0 = self._last[1] if self._last is not None and self._last[0] == x.tobytes() else self(x)
        h = np.finfo(float).eps ** 0.5 * np.where(x >= 0, 1.0, -1.0) * np.maximum(1.0, np.abs(x))
        free, at = self.free, np.arange(self.free.size)
        steps = np.tile(x, (free.size, 1))
        steps[at, free] += h[free]
        dx = steps[at, free] - x[free]
        per = max(1, FD_ROWS // max(len(self.f), 1))
        out = np.zeros((f0.size, len(PARAMS)))
        for i in range(0, free.size, per):
            part = steps[i:i + per]
            r = _residuals(self._times(len(part)), part, self.mu, self.sd, self.fixed, self.attn_eff)
            out[:, free[i:i + per]] = ((r - f0) / dx[i:i + per, None]).T
        return out


def _fit_unit(f: Features, idx: np.ndarray, mu_theta: np.ndarray, sd: np.ndarray, attn_eff: float,
              level: str = "group") -> np.ndarray:
    mu = to_x(mu_theta)
    sub = f.subset(idx)
    fixed = _fixed_terms(sub, level)
    from scipy.optimize import least_squares  # here, not at import: scipy.optimize costs a report ~0.5 s

    obj = _Objective(sub, mu, sd, fixed, attn_eff)
    x = least_squares(obj, mu.copy(), jac=obj.jac, method="lm").x
    x[fixed] = mu[fixed]
    return from_x(x)


def _ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred - meas) / meas


def fit(df: pl.DataFrame, cat: HardwareCatalog | None = None, attn_eff: float = 1.0,
        chain: PointKey | None = None, f: Features | None = None, levels: Sequence[str] = LEVELS,
        share_acceptance: bool = True) -> Fitted:
    """Fit every level on the covered points of ``df`` (an InferenceX-style points table), with the global
    prefill-attention efficiency ``attn_eff`` held fixed. With ``chain`` only the family, hardware and group of
    that configuration are fitted (what predicting it needs; cross-validation uses it to save time); ``levels``
    (a leading part of :data:`LEVELS`) stops the fit early, e.g. without layouts for a group never measured.
    ``share_acceptance``: a family without MTP points takes the others' measured acceptance
    (:func:`_share_acceptance`); False leaves it at the prior."""
    cat = cat or load_catalog()
    f = f if f is not None else point_features(df, cat)
    cov = np.flatnonzero(f.covered)
    entries: dict[str, dict[str, FitEntry]] = {lv: {} for lv in LEVELS}
    if cov.size == 0:
        return Fitted(entries, {}, attn_eff)

    def groups(level: str) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i in cov:
            k = f.keys[i]
            assert k is not None
            name = {"family": k.family, "hardware": k.hardware, "group": k.group, "layout": k.config}[level]
            if chain is not None and (level == "layout" or name != {
                    "family": chain.family, "hardware": chain.hardware, "group": chain.group}[level]):
                continue
            out.setdefault(name, []).append(int(i))
        return out

    for level in levels:
        sd = PRIOR_SD * LEVEL_SD_SCALE[level]
        for name, ids in sorted(groups(level).items()):
            k0 = f.keys[ids[0]]
            assert k0 is not None
            if level == "family":
                mu = prior_for(cat, *(f.keys[i].hardware for i in ids))  # type: ignore[union-attr]
            elif level == "hardware":
                mu = entries["family"][k0.family].theta
            elif level == "group":
                mu = entries["hardware"][k0.hardware].theta
            else:
                mu = entries["group"][k0.group].theta
            idx = np.array(ids)
            if level == "group" and A2A in _fixed_terms(f.subset(idx), level):
                mu = _without_a2a_ratio(mu)  # no all-to-all measured: one constant for both kinds, as before
            if level == "group" and POOL_PF_PRIOR_SOURCED and f.disagg[idx].any():
                mu = mu.copy()
                mu[MFU_PF] = prior_for(cat, k0.hardware)[MFU_PF]  # a prefill pool's prior: the chip's sourced value
            theta = _fit_unit(f, idx, mu, sd, attn_eff, level)
            attrs = {"family": k0.family, "hardware": k0.hardware}
            if level in ("group", "layout"):
                attrs.update(framework=k0.framework, model=k0.model, precision=k0.precision, spec=k0.spec)
            if level == "layout":
                attrs["layout"] = k0.layout
            _, tpot, _ = predict(f.subset(idx), np.tile(theta, (idx.size, 1)), attn_eff)
            ok = np.isfinite(f.tpot[idx]) & (f.tpot[idx] > 0)
            mape = float(np.median(_ape(tpot[ok], f.tpot[idx][ok]))) if ok.any() else float("nan")
            entries[level][name] = FitEntry(level, name, theta, idx.size, attrs, mape)
        if level == "family" and share_acceptance:
            _share_acceptance(df, f, cov, entries["family"], cat, attn_eff)
    return Fitted(entries, {}, attn_eff)


def _share_acceptance(df: pl.DataFrame, f: Features, cov: np.ndarray, families: dict[str, FitEntry],
                      cat: HardwareCatalog, attn_eff: float) -> None:
    """Give each fitted family without MTP points the acceptance the families with MTP points measured (geometric
    mean weighted by their MTP points) in place of the prior's: tokens kept per step are set by the draft head,
    the recipe's draft depth and the text, not by the chip, so a family that never ran MTP borrows what the others
    measured, and its hardware, groups and layouts inherit it as they inherit the rest."""
    mtp_points: dict[str, list[int]] = {}
    for i in cov:
        if f.mtp[i]:
            mtp_points.setdefault(f.keys[i].family, []).append(int(i))  # type: ignore[union-attr]
    if not mtp_points or all(name in mtp_points for name in families):
        return
    logs, weights = [], []
    for name, ids in mtp_points.items():
        e = families.get(name)
        if e is None:  # left out under ``chain``: fitted here for this alone
            e = fit(df, cat, attn_eff, f.keys[ids[0]], f, LEVELS[:1], share_acceptance=False).entries["family"][name]
        logs.append(math.log(e.theta[ACCEPT]))
        weights.append(len(ids))
    shared = math.exp(float(np.average(logs, weights=weights)))
    for name, e in families.items():
        if name not in mtp_points:
            e.theta = e.theta.copy()
            e.theta[ACCEPT] = shared


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- storage -------------------------------------------------------------------------------------------------
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return repr(float(f"{v:.6g}"))
    s = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def to_toml(fitted: Fitted) -> str:
    """Serialize fitted parameters (every number is sourced by the [provenance] table at the top)."""
    lines = ["# Fitted cost-model parameters, written by `agentprof devices fit`. Do not edit by hand: refit.",
             "# Every number below comes from the fit described in [provenance] (data file, its SHA-256, date,",
             "# method); units: tau_s seconds per layer per decode step, t0_s / t_req_s seconds, mbu / mfu",
             "# fractions of peak bandwidth / compute, kappa growth of the step overhead per doubling of GPUs,",
             "# q prefill-queueing factor, accept tokens per step (speculative decoding; 1 = off), handoff",
             "# decode steps of a disaggregated hand-off (an aggregated entry carries the level above's, unused),",
             "# a2a_ratio the all-to-all's fan-out constant relative to kappa (data-parallel attention).",
             "",
             "[provenance]"]
    for k, v in fitted.provenance.items():
        lines.append(f"{k} = {_toml_value(v)}")
    lines += ["", "# efficiency of prefill attention as a fraction of the BF16 peak, fitted on [agentic]", "[global]",
              f"attn_eff = {_toml_value(float(fitted.attn_eff))}", f"attn_eff_basis = {_toml_value(ATTN_EFF_BASIS)}"]
    if fitted.attn_eff_by_accelerator:
        lines += ["", "# the same, fitted on each accelerator's own [agentic] points; others take global.attn_eff (pooled)",
                  "[global.attn_eff_by_accelerator]"]
        lines += [f"{k} = {_toml_value(float(v))}" for k, v in sorted(fitted.attn_eff_by_accelerator.items())]
    for kind, table in sorted(fitted.attn_eff_by_attention.items()):
        lines += ["", f"# the same for {kind} attention kernels, fitted on [agentic] {kind}_* points; pooled: the rest",
                  f"[global.attn_eff_by_attention.{kind}]"]
        lines += [f"{k} = {_toml_value(float(v))}" for k, v in sorted(table.items())]
    for name, step in sorted(fitted.engine_steps.items()):
        lines += ["", f"# per-step overhead of {name}, fitted on its single-user [agentic] decode (no group of that "
                  "engine on that accelerator)", f'[engine_step."{name}"]']
        lines += [f"{k} = {_toml_value(v)}" for k, v in step.items()]
    if fitted.agentic:
        lines += ["", "[agentic]"]
        for k, v in fitted.agentic.items():
            lines.append(f"{k} = {_toml_value(v)}")
    for lv, errs in fitted.level_errors.items():
        lines += ["", f"# cross-validated error of predictions at calibration level {lv!r}", f"[levels.{lv}]"]
        for k, v in errs.items():
            lines.append(f"{k} = {_toml_value(v)}")
    for level in LEVELS:
        for name, e in sorted(fitted.entries[level].items()):
            lines.append("")
            lines.append(f'[{level}."{name}"]')
            for k, v in e.attrs.items():
                lines.append(f"{k} = {_toml_value(v)}")
            lines.append(f"points = {e.points}")
            lines.append(f"median_ape_tpot = {_toml_value(e.median_ape_tpot)}")
            for p, v in zip(PARAMS, e.theta, strict=True):
                lines.append(f"{p} = {_toml_value(float(v))}")
    return "\n".join(lines) + "\n"


def write_fitted(fitted: Fitted, path: str | Path | None = None) -> Path:
    """Write ``fitted`` to ``path`` (default: the user's own fit, :func:`user_fitted_path`)."""
    out = Path(path) if path is not None else user_fitted_path()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_toml(fitted), encoding="utf-8")
    _load_fitted.cache_clear()
    return out


def _parse_fitted(data: dict[str, Any], where: str) -> Fitted:
    entries: dict[str, dict[str, FitEntry]] = {lv: {} for lv in LEVELS}
    prov = data.get("provenance")
    if not isinstance(prov, dict):
        raise CatalogError(f"{where}: missing [provenance] table (data_file, data_sha256, date, method)")
    for need in ("data_file", "data_sha256", "date", "method"):
        if not isinstance(prov.get(need), str):
            raise CatalogError(f"{where}: provenance.{need}: expected a string")
    for level in LEVELS:
        for name, t in (data.get(level) or {}).items():
            if not isinstance(t, dict):
                raise CatalogError(f"{where}: {level}.{name} must be a table")
            vals = []
            for p in PARAMS:
                v = t.get(p, PRIOR_MEAN[p] if p in ("handoff", "a2a_ratio") else None)  # files from before the term
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                    raise CatalogError(f"{where}: {level}.{name}.{p}: expected a positive number, got {v!r}")
                vals.append(float(v))
            attrs = {k: str(v) for k, v in t.items() if isinstance(v, str)}
            entries[level][name] = FitEntry(level, name, np.array(vals), int(t.get("points", 0)), attrs,
                                            float(t.get("median_ape_tpot", float("nan"))))
    glob = data.get("global") or {}
    eff = glob.get("attn_eff", 1.0)
    if isinstance(eff, bool) or not isinstance(eff, (int, float)) or not eff > 0:
        raise CatalogError(f"{where}: global.attn_eff: expected a positive number, got {eff!r}")
    if "attn_eff" in glob and glob.get("attn_eff_basis") != ATTN_EFF_BASIS:
        raise CatalogError(f"{where}: global.attn_eff_basis: expected {ATTN_EFF_BASIS!r} (attn_eff as a fraction of the "
                           f"BF16 peak), got {glob.get('attn_eff_basis')!r}: the file predates that meaning; refit "
                           "with `agentprof devices fit`")
    by_acc = glob.get("attn_eff_by_accelerator") or {}
    if not isinstance(by_acc, dict):
        raise CatalogError(f"{where}: global.attn_eff_by_accelerator must be a table")
    for k, v in by_acc.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise CatalogError(f"{where}: global.attn_eff_by_accelerator.{k}: expected a positive number, got {v!r}")
    by_kind = glob.get("attn_eff_by_attention") or {}
    if not isinstance(by_kind, dict) or not all(isinstance(t, dict) for t in by_kind.values()):
        raise CatalogError(f"{where}: global.attn_eff_by_attention must hold one table per attention kind")
    for kind, table in by_kind.items():
        if "pooled" not in table:
            raise CatalogError(f"{where}: global.attn_eff_by_attention.{kind}: needs a 'pooled' value")
        for k, v in table.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise CatalogError(f"{where}: global.attn_eff_by_attention.{kind}.{k}: expected a positive number, "
                                   f"got {v!r}")
    levels = {str(k): {kk: float(vv) for kk, vv in v.items() if isinstance(vv, (int, float))}
              for k, v in (data.get("levels") or {}).items() if isinstance(v, dict)}
    steps: dict[str, dict[str, Any]] = {}
    for name, t in (data.get("engine_step") or {}).items():
        if not isinstance(t, dict):
            raise CatalogError(f"{where}: engine_step.{name} must be a table")
        for need in ("tau_s", "kappa"):
            v = t.get(need)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise CatalogError(f"{where}: engine_step.{name}.{need}: expected a positive number, got {v!r}")
        steps[str(name)] = {str(k): v for k, v in t.items() if isinstance(v, (int, float, str))}
    return Fitted(entries, dict(prov), float(eff), dict(data.get("agentic") or {}), levels,
                  {str(k): float(v) for k, v in by_acc.items()},
                  {str(kind): {str(k): float(v) for k, v in t.items()} for kind, t in by_kind.items()}, steps)


def user_fitted_path() -> Path:
    """Where ``agentprof devices fit`` writes by default: ``fitted.toml`` in the user's data folder
    (:func:`agentprof.resources.user_data_dir`), never the installed package."""
    from agentprof.resources import user_data_dir

    return user_data_dir() / "fitted.toml"


def user_fitted_in_use() -> Path | None:
    """The user's own fit (:func:`user_fitted_path`) when it exists: the device model then reads it instead of
    the shipped ``fitted.toml``."""
    p = user_fitted_path()
    return p if p.is_file() else None


def load_fitted(path: str | None = None) -> Fitted:
    """Read fitted parameters: ``path``, else the user's own fit (:func:`user_fitted_in_use`), else the shipped
    ``fitted.toml``."""
    return _load_fitted(path if path else str(user_fitted_in_use() or FITTED_PATH), bool(path))


@lru_cache(maxsize=8)
def _load_fitted(path: str, given: bool) -> Fitted:
    p = Path(path)
    if not p.exists():
        if given:
            raise CatalogError(f"{p}: no such fitted-parameters file")
        return Fitted({lv: {} for lv in LEVELS}, {})
    return _parse_fitted(read_toml(p), str(p))
