"""Serving benchmark points (InferenceX-style CSV rows) and the model's prediction of their latencies.

A point is one (hardware, framework, model, precision, speculation, parallel layout, ISL/OSL, concurrency)
measurement with median TTFT, TPOT and end-to-end latency. :func:`point_features` turns rows into the
parameter-independent quantities of the cost model (bytes and FLOPs per step, per prefill); :func:`predict`
combines them with fitted parameters. Both are vectorized over all points.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from agentprof.catalog import CatalogError, ModelSpec, find_model
from agentprof.catalog.adpbalance import adp_balance
from agentprof.catalog.decodeslots import decode_slots
from agentprof.catalog.draftdepth import draft_depth
from agentprof.catalog.hardware import Accelerator, HardwareCatalog
from agentprof.catalog.kvcache import (
    ahead_steps,
    engine,
    kv_bytes,
    prefill_alone,
    prefill_budget,
    prefill_collectives_exposed,
    tokenize_s_per_token,
    usable_fraction,
    wait_steps,
)
from agentprof.catalog.serving import load_serving
from agentprof.errors import AgentprofError, TraceFormatError
from agentprof.replay.adpwait import adp_hold_iters, adp_released_with
from agentprof.replay.costmodel import (
    ArrayLike,
    Deployment,
    pass_prompts,
    prefill_bytes_per_gpu,
    prefill_chunks,
)
from agentprof.replay.equations import Times, Work, times
from agentprof.replay.resultjson import FLAGS, POOL_FLAGS, points_from_json

REQUIRED = ("hardware", "precision", "isl", "osl", "conc")
MEASURED = ("median_ttft_s", "median_tpot_s", "median_e2el_s")
# InferenceX draws each length uniformly in [0.8 L, L] (RANDOM_RANGE_RATIO 0.8): mean 0.9 L [S1-wf, S1-bench]
LENGTH_MEAN_FRACTION = 0.9
LENGTH_CV2 = (0.2 / 12 ** 0.5 / LENGTH_MEAN_FRACTION) ** 2
"""Squared coefficient of variation of those lengths (0.0041): a prompt's prefill time varies about as its
length, so the benchmark's prefill queue is nearly deterministic (:attr:`agentprof.replay.equations.Work.svc_cv2`)."""
MEM_UTIL = 0.95
"""The share of HBM weights plus KV took before the engine's own memory fraction was counted per recipe
(``catalog/memory.toml``, :func:`agentprof.catalog.kvcache.usable_fraction`); kept for before/after measurements."""
PER_ENGINE_MEMORY = True
"""Size each point's KV pool from the recipe's memory fraction (``memory.toml``) of the driver-reported HBM;
False applies :data:`MEM_UTIL` to every point (the model before, for before/after measurements)."""
# fixed-width parameter vector of a configuration, natural units
PARAMS = ("tau_s", "kappa", "mbu", "mfu", "t0_s", "q", "t_req_s", "accept", "mfu_pf", "handoff", "a2a_ratio")


def load_points(path: str | Path) -> pl.DataFrame:
    """Read a points CSV, or InferenceX results JSON (:mod:`agentprof.replay.resultjson`); missing columns or
    non-numeric values are one-line errors naming file and line (JSON: entry)."""
    p = str(path)
    try:
        df = points_from_json(p) if p.lower().endswith(".json") else pl.read_csv(p, infer_schema_length=10000)
    except FileNotFoundError:
        raise AgentprofError(f"{p}: no such file") from None
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError, OSError) as e:
        raise TraceFormatError(p, None, f"not a readable CSV ({str(e).splitlines()[0]})") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if "model" not in df.columns and "model_prefix" not in df.columns:
        missing.append("model or model_prefix")
    if "tp" not in df.columns and "num_gpus" not in df.columns:
        missing.append("tp or num_gpus")
    if missing:
        raise TraceFormatError(p, 1, f"missing column(s): {', '.join(missing)}")
    for c in ("isl", "osl", "conc", "tp", "ep", "num_gpus", "num_prefill_gpu", "num_decode_gpu", "prefill_tp",
              "prefill_num_workers", "decode_tp", "decode_ep", "decode_num_workers", *MEASURED):
        if c in df.columns and not df.schema[c].is_numeric():
            bad = df.with_row_index("_i").filter(pl.col(c).is_not_null()
                                                & pl.col(c).cast(pl.Float64, strict=False).is_null())
            if bad.height:
                line = int(bad["_i"][0]) + 2
                raise TraceFormatError(p, line, f"column {c!r}: expected a number, got {bad[c][0]!r}")
            df = df.with_columns(pl.col(c).cast(pl.Float64, strict=False))
    for c in FLAGS:
        if c in df.columns and df.schema[c] != pl.Boolean:
            df = _flag_column(df, c, p)
    for c in ("isl", "osl", "conc"):
        bad = df.with_row_index("_i").filter(pl.col(c).is_null() | (pl.col(c) <= 0))
        if bad.height:
            raise TraceFormatError(p, int(bad["_i"][0]) + 2, f"column {c!r}: expected a positive number")
    if "quality_flag" in df.columns:
        df = df.filter(pl.col("quality_flag").is_null() | (pl.col("quality_flag") == "ok"))
    return df


ARTIFACT_PROVENANCE = "official InferenceMAX run artifact"
"""How ``calibration_points.csv`` begins the ``provenance`` of the 33 run artifacts' rows; its other rows are the
InferenceX API's points of other runs (``scripts/merge_api_points.py``, data/inferencex/README.md)."""


def from_run_artifacts(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``df`` that came from the run artifacts (:data:`ARTIFACT_PROVENANCE`): the runs the 8k1k sweep
    anchors and issue 13's targets were taken on. A table without a ``provenance`` column is returned whole."""
    if "provenance" not in df.columns:
        return df
    return df.filter(pl.col("provenance").str.starts_with(ARTIFACT_PROVENANCE))


PRECISION_ALIASES = {"mxfp4": "fp4", "nvfp4": "fp4", "bfloat16": "bf16", "fp8_e4m3": "fp8", "e4m3": "fp8"}
"""Names a points file may give a weight format by its encoding; the catalog's formats are fp4, fp8, bf16, int4."""
_TRUE, _FALSE = {"true", "t", "yes", "y", "1", "1.0"}, {"false", "f", "no", "n", "0", "0.0", ""}


def _flag_column(df: pl.DataFrame, c: str, path: str) -> pl.DataFrame:
    """``c`` as booleans: true/false, yes/no, 1/0 in any case (empty = false; for a pool's flag, not given);
    anything else is an error naming the line. Without this a column polars reads as text makes every non-empty
    value, even "False", true."""
    text = df[c].cast(pl.String).str.strip_chars().str.to_lowercase().to_list()
    if c in POOL_FLAGS:
        text = [v or None for v in text]
    bad = [i for i, v in enumerate(text) if v is not None and v not in _TRUE | _FALSE]
    if bad:
        raise TraceFormatError(path, bad[0] + 2, f"column {c!r}: expected true/false (or yes/no, 1/0), "
                                                 f"got {df[c][bad[0]]!r}")
    return df.with_columns(pl.Series(c, [None if v is None else v in _TRUE for v in text], dtype=pl.Boolean))


def _col(df: pl.DataFrame, name: str, default: object = None) -> list:
    return df[name].to_list() if name in df.columns else [default] * df.height


@dataclass
class PointKey:
    """Identity of a point's configuration at each calibration level."""

    family: str
    hardware: str
    framework: str
    model: str
    precision: str
    spec: str
    layout: str

    @property
    def group(self) -> str:
        return f"{self.hardware}/{self.framework}/{self.model}/{self.precision}/{self.spec}"

    @property
    def config(self) -> str:
        return f"{self.group}/{self.layout}"


@dataclass
class Features:
    """Parameter-independent per-point quantities (numpy arrays), plus identity and coverage."""

    keys: list[PointKey | None]
    covered: np.ndarray      # catalog knows the hardware, model and precision
    why: list[str]           # reason a point is not covered ("" when covered)
    layers: np.ndarray
    g_dec: np.ndarray        # accelerators per decode instance
    g_pf: np.ndarray         # accelerators per prefill instance
    dpa_dec: np.ndarray      # bool: the decode instance runs attention data-parallel (its collectives are all-to-alls)
    dpa_pf: np.ndarray       # bool: the same for the prefill instance
    work: Work               # the serving equations' parameter-free work (:mod:`agentprof.replay.equations`)
    mtp: np.ndarray
    kv_bytes: np.ndarray     # bytes per KV element as deployed (kv_cache.toml)
    ttft: np.ndarray         # measured (NaN when absent)
    tpot: np.ndarray
    e2e: np.ndarray
    draft: np.ndarray        # MTP tokens drafted per sequence and step (draft_depth.toml; 0 unlisted)
    slots: np.ndarray        # the recipe's decode slots, all decode workers (decode_slots.toml; NaN unlisted)
    in_domain: np.ndarray    # bool: the decode instance fits its accelerator's scale-up domain
    cross_dec: np.ndarray    # s per decode step of all-reduces over the scale-out network (Deployment.crossing_s)
    cross_pf: np.ndarray     # the same per prefill step
    mem_util: np.ndarray     # share of HBM the decode instance's engine gives weights + KV (memory.toml)
    kv_cap: np.ndarray       # sequences at the mean context one decode instance holds (KV pool; decode slots)
    n_decode: np.ndarray     # decode instances (disaggregated decode workers; 1 aggregated)
    attn_eff: np.ndarray     # prefill attention's efficiency, the kernel's sourced figure (NaN: the fitted global)
    dec_attn_eff: np.ndarray  # decode attention's, the kernel's sourced figure (NaN: the fitted mfu)
    budget: np.ndarray       # tokens one prefill step may hold: the recipe's (scheduling.toml [budget]), else the engine's
    batch: np.ndarray        # prompt tokens past which a pass takes no further waiting prompt (Budget.batch)
    requests: np.ndarray     # prompts a disaggregated prefill worker holds at once, all its ranks (inf: no cap)

    def subset(self, sel: np.ndarray) -> Features:
        """The points selected by a boolean mask or an index array."""
        idx = np.flatnonzero(sel) if sel.dtype == bool else sel
        out: dict = {}
        for k, v in self.__dict__.items():
            if isinstance(v, list):
                out[k] = [v[i] for i in idx]
            elif isinstance(v, Work):
                out[k] = Work(**{kk: None if vv is None else vv[idx] for kk, vv in v.__dict__.items()})
            else:
                out[k] = v[idx]
        return Features(**out)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def conc(self) -> np.ndarray:
        return self.work.conc

    @property
    def disagg(self) -> np.ndarray:
        return self.work.disagg


UNSIZED = "a disaggregated point with 0 prefill or decode workers: its pools cannot be sized"


def unsized_pools(row: dict) -> bool:
    """Whether a point (a row as :func:`load_points` reads it) is disaggregated with 0 prefill or decode workers
    given (:data:`UNSIZED`; a count not given is one worker)."""
    return bool(row.get("disagg") or False) and 0 in (row.get("prefill_num_workers"), row.get("decode_num_workers"))


def _layout(row: dict, disagg: bool) -> tuple[str, int, int, int, int, bool, bool, int, int]:
    """(layout key, g_prefill, n_prefill, g_decode, n_decode, dpa_prefill, dpa_decode, tp, ep)."""
    def i(v: object, d: int) -> int:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return d
        return int(v)

    def flag(name: str) -> bool | None:
        v = row.get(name)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else bool(v)

    if disagg:
        npw = max(i(row.get("prefill_num_workers"), 1), 1)
        ndw = max(i(row.get("decode_num_workers"), 1), 1)
        gp = max(i(row.get("num_prefill_gpu"), npw) // npw, 1)
        gd = max(i(row.get("num_decode_gpu"), ndw) // ndw, 1)
        dtp, dep = i(row.get("decode_tp"), gd), i(row.get("decode_ep"), 1)
        ptp = i(row.get("prefill_tp"), gp)
        key = f"p{npw}x{gp}-d{ndw}x{gd}-tp{dtp}ep{dep}"
        pep = i(row.get("prefill_ep"), 1)
        # the recipe's own flags where the file has them; else a pool whose attention TP is below its GPUs runs
        # attention data-parallel, and so do TensorRT-LLM's wide-EP pools (the columns say tp = ep = GPUs): its
        # prefill workers, and its decode workers at 64+ clients each (InferenceX's flags: 366 of 418 such prefill
        # workers and 209 of 218 such decode workers run attention data-parallel, docs/DEVICE_MODEL.md §2)
        trt = engine(str(row.get("framework") or "")) == "trt"
        dpa_p, dpa_d = flag("prefill_dp_attention"), flag("decode_dp_attention")
        if dpa_p is None:
            dpa_p = ptp < gp or (trt and pep > 1 and ptp == pep == gp)
        if dpa_d is None:
            dpa_d = dtp < gd or (trt and dep > 1 and dtp == dep == gd and float(row.get("conc") or 0) / ndw >= 64)
        return key, gp, npw, gd, ndw, dpa_p, dpa_d, dtp, dep
    tp = max(i(row.get("tp"), i(row.get("num_gpus"), 1)), 1)
    ep = i(row.get("ep"), 1)
    dpa = flag("dp_attention")
    if dpa is None:
        dpa = bool(flag("prefill_dp_attention") or False)
    key = f"tp{tp}-ep{ep}" + ("-dpa" if dpa else "")
    return key, tp, 1, tp, 1, dpa, dpa, tp, ep


def layout_columns(layout: str) -> dict[str, object]:
    """CSV columns of a layout key (the inverse of the keys :func:`point_features` builds):
    ``tp8-ep1[-dpa]`` or ``p{workers}x{gpus}-d{workers}x{gpus}-tp{tp}ep{ep}``."""
    m = re.fullmatch(r"tp(\d+)-ep(\d+)(-dpa)?", layout)
    if m:
        tp, ep = int(m.group(1)), int(m.group(2))
        return {"tp": tp, "ep": ep, "dp_attention": bool(m.group(3)), "disagg": False, "num_gpus": tp}
    m = re.fullmatch(r"p(\d+)x(\d+)-d(\d+)x(\d+)-tp(\d+)ep(\d+)", layout)
    if not m:
        raise AgentprofError(f"cannot read layout {layout!r}: expected tp8-ep1 or p1x4-d4x8-tp8ep8")
    npw, gp, ndw, gd, tp, ep = (int(x) for x in m.groups())
    return {"disagg": True, "prefill_num_workers": npw, "num_prefill_gpu": npw * gp, "prefill_tp": gp,
            "decode_num_workers": ndw, "num_decode_gpu": ndw * gd, "decode_tp": tp, "decode_ep": ep,
            "num_gpus": npw * gp + ndw * gd}


def point_features(df: pl.DataFrame, cat: HardwareCatalog) -> Features:
    """Build the cost model's per-point quantities for every row of a points table."""
    n = df.height
    z = np.zeros(n)
    wk = {k: z.copy() for k in ("b_run", "over", "osl", "n_chunks", "comm_s", "comm_pf_s", "bw_s", "cmp_s",
                                "pf_gemm_s", "pf_attn_s", "pf_mem_s", "pf_kv_s", "conc", "n_prefill", "xfer_s", "load_s",
                                "wait_steps", "bw_seq_s", "cmp_seq_s", "comm_seq_s", "pf_serial_s", "front_s",
                                "ahead", "pf_alone", "pf_batch", "pf_ranks", "svc_cv2", "bw_kv_s", "cmp_attn_s",
                                "cmp_attn_seq_s", "bw_kv_seq_s", "attn_pad", "pf_with", "pf_gemm_rank_s")}
    wk["n_prefill"][:] = 1.0
    wk["osl"][:] = 1.0
    wk["n_chunks"][:] = 1.0
    wk["pf_batch"][:] = 1.0
    wk["pf_ranks"][:] = 1.0
    layers, g_dec, g_pf, kvb = z.copy(), z.copy() + 1, z.copy() + 1, z.copy() + 2
    dpa_dec, dpa_pf = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    disagg_a = np.zeros(n, dtype=bool)
    mtp_a = np.zeros(n, dtype=bool)
    draft_a = np.zeros(n)
    slots_a = np.full(n, np.nan)
    in_dom = np.ones(n, dtype=bool)
    cross_dec, cross_pf = z.copy(), z.copy()
    mem_a = np.full(n, MEM_UTIL)
    cap_a = np.full(n, np.nan)
    ndec_a = np.ones(n)
    attn_a = np.full(n, np.nan)
    dattn_a = np.full(n, np.nan)
    budget_a = np.full(n, np.nan)
    batch_a = np.full(n, np.nan)
    req_a = np.full(n, np.inf)
    covered = np.zeros(n, dtype=bool)
    keys: list[PointKey | None] = []
    why: list[str] = []
    rows = df.select([c for c in df.columns if c not in ("notes", "source_file", "provenance")]).to_dicts()
    dep_cache: dict[tuple, Deployment] = {}
    budgets = load_serving()
    for j, row in enumerate(rows):
        hw = str(row.get("hardware") or "").strip().lower()
        acc = cat.accelerators.get(hw)
        mname = row.get("model_prefix") or row.get("model")
        model = find_model(str(mname), cat_files(cat)) if mname else None
        if model is None and row.get("model"):
            model = find_model(str(row["model"]), cat_files(cat))
        prec = str(row.get("precision") or "").strip().lower()
        prec = PRECISION_ALIASES.get(prec, prec)
        reason = ""
        disagg = bool(row.get("disagg") or False)
        if acc is None:
            reason = f"hardware {hw!r} not in the catalog"
        elif model is None:
            reason = f"model {mname!r} not in the catalog"
        elif prec not in model.formats:
            reason = f"{model.key} has no {prec!r} format in the catalog"
        elif unsized_pools(row):
            reason = UNSIZED
        if reason:
            keys.append(None)
            why.append(reason)
            continue
        assert acc is not None and model is not None
        layout, gp, npw, gd, ndw, dpa_p, dpa_d, _tp, _ep = _layout(row, disagg)
        fw = str(row.get("framework") or "unknown").lower()
        spec = str(row.get("spec_decoding") or "none").lower()
        kv_b, _ = kv_bytes(fw, model.key, hw, prec)
        keys.append(PointKey(acc.family, hw, fw, model.key, prec, spec, layout))
        why.append("")
        covered[j] = True
        try:
            ep_d = expert_ranks(_ep, gd)
            dec = point_deployment(dep_cache, model, acc, prec, gd, dpa_d, kv_b, ep_d, fw)
            pre = point_deployment(dep_cache, model, acc, prec, gp, dpa_p, kv_b, 1, fw)
        except CatalogError as e:
            keys[-1] = None
            why[-1] = str(e)
            covered[j] = False
            continue
        isl_m = LENGTH_MEAN_FRACTION * float(row["isl"])
        osl_m = LENGTH_MEAN_FRACTION * float(row["osl"])
        conc = float(row["conc"])
        b = conc / ndw
        ctx = isl_m + osl_m / 2.0
        # a batch drains (sequences finish and free their KV): capacity at the mean context
        mu = MEM_UTIL
        if PER_ENGINE_MEMORY:  # the recipe's memory fraction of the driver-reported HBM (memory.toml)
            mu = usable_fraction(fw, model.key, hw, acc.hbm_bytes, dec.weight_bytes_per_gpu, prec, gd)[0]
        mem_a[j] = mu
        cap = max(float(dec.max_batch(ctx, mu)), 1.0)
        if disagg:  # the recipe's decode slots (max batch size x ranks x workers), where the catalog lists them
            slots, _ = decode_slots(fw, model.key, hw, spec, layout, float(row["isl"]), float(row["osl"]), prec,
                                    conc)
            if slots is not None:
                slots_a[j] = slots
                cap = min(cap, max(slots / ndw, 1.0))
        b_run = max(min(b, cap), 1.0)
        cap_a[j] = cap
        ndec_a[j] = ndw
        layers[j] = dec.layers
        in_dom[j] = gd <= dec.scaleup_domain
        cross_dec[j], cross_pf[j] = dec.crossing_s, pre.crossing_s
        g_dec[j] = gd
        g_pf[j] = gp
        dpa_dec[j], dpa_pf[j] = dpa_d, dpa_p
        kvb[j] = kv_b
        wk["conc"][j] = conc
        wk["wait_steps"][j] = wait_steps(fw, model.key, hw, b, prec, _tp)[0]
        wk["ahead"][j] = ahead_steps(fw, model.key)[0]
        wk["pf_alone"][j] = float(prefill_alone(fw, model.key)[0] and not disagg)
        if not disagg and dpa_d and ADP_BALANCE:
            hold, wk["pf_with"][j] = adp_wait(fw, model.key, hw, gd, conc, osl_m)
            wk["wait_steps"][j] += hold
        wk["b_run"][j] = b_run
        wk["over"][j] = max(b / cap - 1.0, 0.0)
        wk["osl"][j] = osl_m
        # the recipe's token budget per prefill step, else the engine's estimate
        recipe = prefill_budget(fw, model.key, hw, prec, _tp, float(row["isl"]), float(row["osl"]), conc)
        budget_a[j] = recipe.tokens if recipe else budgets.budget_tokens(fw)[0]
        batch_a[j] = recipe.batch if recipe else budget_a[j]
        chunks = float(prefill_chunks(isl_m, budget_a[j]))
        wk["n_chunks"][j] = chunks
        # prompts one pass holds: a prefill worker's or a prefill-alone pass's whole budget, else what the running
        # batch's decode tokens leave of it
        wk["pf_batch"][j] = float(pass_prompts(batch_a[j], 0.0 if disagg or wk["pf_alone"][j] else b_run, isl_m))
        wk["pf_ranks"][j] = gp if dpa_p else 1.0  # SGLang: a scheduler per data-parallel attention rank
        if disagg and recipe:  # ... at most the prompts the prefill server's scheduler holds at once
            per_rank = recipe.prompts_per_rank(wk["pf_ranks"][j], dpa_p)
            wk["pf_batch"][j] = min(wk["pf_batch"][j], per_rank)
            req_a[j] = per_rank * wk["pf_ranks"][j]
        wk["svc_cv2"][j] = LENGTH_CV2
        # MTP: the step verifies each sequence's drafted tokens too (the recipe's depth, where the catalog lists it)
        depth = draft_depth(fw, model.key, hw, spec, layout, float(row["isl"]), float(row["osl"]), prec, conc)[0]
        draft_a[j] = depth
        wk["comm_s"][j] = float(dec.comm_s(b_run * (1.0 + depth)))
        wk["comm_pf_s"][j] = float(pre.comm_s(isl_m)) / chunks
        wk["bw_s"][j] = float(dec.decode_bytes_per_gpu(b_run, ctx)) / acc.hbm_bw
        wk["bw_kv_s"][j] = float(dec.decode_kv_bytes_per_gpu(b_run, ctx)) / acc.hbm_bw
        wk["cmp_s"][j] = float(dec.decode_peak_s(b_run * (1.0 + depth), ctx))
        wk["cmp_attn_s"][j] = float(dec.decode_attn_peak_s(b_run * (1.0 + depth), ctx))
        if disagg:  # the step per sequence, for the decode batch the clients queued for prefill leave (Work)
            (wk["bw_seq_s"][j], wk["cmp_seq_s"][j], wk["comm_seq_s"][j], wk["bw_kv_seq_s"][j],
             wk["cmp_attn_seq_s"][j]) = _per_sequence(dec, b_run, ctx, 1.0 + depth)
        wk["attn_pad"][j] = dec.decode_attn_pad(1.0 + depth)
        # the frontend tokenizes the prompt's text before the engine sees it (scheduling.toml [tokenize], as listed:
        # the benchmark's servers are the hosts the figure names, or the reference host)
        wk["front_s"][j] = tokenize_s_per_token(fw, model.key, hw)[0] * isl_m
        wk["pf_gemm_s"][j] = pre.prefill_gemm_peak_s_per_token * isl_m / gp
        wk["pf_gemm_rank_s"][j] = pre.prefill_rank_gemm_peak_s_per_token * isl_m / gp
        wk["pf_attn_s"][j] = float(pre.prefill_peak_s(isl_m, 0.0)) - wk["pf_gemm_s"][j]
        # a fresh prompt's attention runs at its kernel's published forward efficiency where the catalog has one
        attn_a[j] = acc.attn_fwd_eff or np.nan
        dattn_a[j] = dec.decode_attn_eff or np.nan
        wk["pf_mem_s"][j] = float(prefill_bytes_per_gpu(pre, isl_m, 0.0)) / acc.hbm_bw
        wk["pf_kv_s"][j] = float(pre.kv_seq_bytes(isl_m)) / pre.kv_divisor / acc.hbm_bw
        wk["n_prefill"][j] = npw
        if disagg and prefill_collectives_exposed(fw, model.key, hw)[0]:  # the pool's prompts pay their all-to-all
            wk["pf_serial_s"][j] = float(pre.comm_s(isl_m))
        # disaggregated: the prompt's KV moves from a prefill to a decode worker over the scale-up link
        wk["xfer_s"][j] = float(dec.kv_seq_bytes(isl_m)) / dec.kv_divisor / dec.scaleup_bw if disagg else 0.0
        disagg_a[j] = disagg
        mtp_a[j] = spec not in ("none", "", "null")

    def meas(c: str) -> np.ndarray:
        if c not in df.columns:
            return np.full(n, np.nan)
        return df[c].cast(pl.Float64, strict=False).fill_null(float("nan")).to_numpy().astype(float)

    work = Work(disagg=disagg_a, **wk)
    return Features(keys=keys, covered=covered, why=why, layers=layers, g_dec=g_dec, g_pf=g_pf,
                    dpa_dec=dpa_dec, dpa_pf=dpa_pf, work=work,
                    mtp=mtp_a, draft=draft_a, slots=slots_a, in_domain=in_dom, cross_dec=cross_dec,
                    cross_pf=cross_pf, mem_util=mem_a, kv_cap=cap_a,
                    n_decode=ndec_a, attn_eff=attn_a, dec_attn_eff=dattn_a, budget=budget_a, batch=batch_a, requests=req_a, kv_bytes=kvb,
                    ttft=meas("median_ttft_s"), tpot=meas("median_tpot_s"),
                    e2e=meas("median_e2el_s"))


def resident_batch(f: Features) -> np.ndarray:
    """Sequences each measured point held in a decode instance by Little's law: of ``conc`` closed-loop clients,
    the share of each request's time spent decoding, (E2E − TTFT) / E2E, over the decode instances. The KV pool
    the model sizes (:attr:`Features.kv_cap`) must hold at least this many, or the measurement could not have run
    (NaN where a time is missing)."""
    return f.conc / f.n_decode * (f.e2e - f.ttft) / f.e2e


ADP_BALANCE = True
"""Count TensorRT-LLM's attention-DP balance (:func:`adp_wait`) in an aggregated attention-DP point's first token;
False reproduces the model before it (for before/after measurements)."""


def adp_wait(framework: str, model: str, hardware: str, ranks: int, conc: float, osl: float) -> tuple[float, float]:
    """(decode steps a new request of an aggregated attention-DP deployment waits for the recipe's attention-DP
    balance, other prompts scheduled in its context iteration) (:mod:`agentprof.catalog.adpbalance`; (0, 0) where
    the recipe does not set it): the closed loop's ``conc`` clients each start a request every ``osl`` steps plus
    the wait itself, so ``conc / (osl + wait)`` arrive per step (one fixed-point pass from ``conc / osl``;
    :mod:`agentprof.replay.adpwait`)."""
    bal = adp_balance(framework, model, hardware)
    if bal is None or ranks < 2:
        return 0.0, 0.0
    hold = 0.0
    for _ in range(2):
        hold = adp_hold_iters(ranks, conc / max(osl + hold, 1.0), bal.timeout_iters, bal.batching_wait_iters)
    lam = conc / max(osl + hold, 1.0)
    return hold, adp_released_with(ranks, lam, bal.timeout_iters, bal.batching_wait_iters)


def _per_sequence(dec: Deployment, b_run: float, ctx: float, tokens: float = 1.0) -> tuple[float, ...]:
    """What one sequence adds to a decode step near ``b_run``: bytes / HBM bandwidth (its KV, and the MoE experts
    a larger batch touches: the secant over the lower half of the batch), FLOPs / peak and collectives (both
    proportional to the batch; ``tokens`` per sequence when the step verifies MTP drafts, bytes read once); then
    the KV's and the attention's parts of the bytes and FLOPs."""
    kv = float(dec.kv_seq_bytes(ctx)) / dec.kv_divisor
    bw, lo = kv, max(b_run / 2.0, 1.0)
    if b_run > lo:
        bw = float(dec.decode_bytes_per_gpu(b_run, ctx) - dec.decode_bytes_per_gpu(lo, ctx)) / (b_run - lo)
    return (bw / dec.accel.hbm_bw, float(dec.decode_peak_s(tokens, ctx)), float(dec.comm_s(b_run * tokens)) / b_run,
            kv / dec.accel.hbm_bw, float(dec.decode_attn_peak_s(tokens, ctx)))


def cat_files(cat: HardwareCatalog) -> tuple[str, ...]:
    """User catalog files among the catalog's sources (where user models may live)."""
    from agentprof.catalog import CATALOG_DIR

    return tuple(p for p in cat.files if Path(p).parent != CATALOG_DIR)


def fixed_overhead(layers: ArrayLike, tau: ArrayLike, kappa: ArrayLike, gpus: ArrayLike, dpa: ArrayLike = False,
                   a2a_ratio: ArrayLike = 1.0) -> np.ndarray:
    """Fixed per-step overhead ``layers·tau·(1 + kappa·fanout(g))``: per-layer launches and scheduling, plus the
    collectives' latency, which grows with the accelerators they span as the collective's kind says
    (:func:`fanout`: all-reduce under tensor parallelism, all-to-all under data-parallel attention). The
    all-to-all's latency per unit of fan-out is ``a2a_ratio`` times the all-reduce's (``kappa``): two collectives,
    two constants (docs/DEVICE_MODEL.md §2.2)."""
    dpa_a = np.asarray(dpa, dtype=bool)
    k = np.asarray(kappa, dtype=float) * np.where(dpa_a, np.asarray(a2a_ratio, dtype=float), 1.0)
    return np.asarray(layers, dtype=float) * np.asarray(tau, dtype=float) * (1.0 + k * fanout(gpus, dpa_a))


TP_FANOUT_GROWTH = 0.2
"""Growth of a tensor-parallel step's collective latency per doubling of its accelerators, relative to the latency
it has at all (estimate, docs/DEVICE_MODEL.md §2.2): decode-sized all-reduces run one-shot inside the scale-up
domain (every rank reads its peers' partial sums at once through the switch), so the cost is a synchronisation
that appears once there are peers, growing slowly with their number (the 8-GPU collective 1.33x the 2-GPU one).
Chosen on the group-level in-sample fit (one set of terms for every layout of a group: median TPOT error 4.0 %
at 0.15-0.25, 5.0 % with the first model's pure log2 g), not on a held-out check."""


def fanout(gpus: ArrayLike, dpa: ArrayLike = False) -> np.ndarray:
    """How a step's collective latency grows with the accelerators ``gpus`` one instance spans, in units of the
    fan-out term ``kappa`` (docs/DEVICE_MODEL.md §2.2). Tensor parallel (two all-reduces per layer, one-shot):
    nothing on one GPU, then ``1 + c·log2 g`` (:data:`TP_FANOUT_GROWTH`). Data-parallel attention with expert
    parallel MoE (an all-to-all dispatch and combine per MoE layer that waits for the slowest of ``g`` ranks):
    ``log2 g``."""
    g = np.maximum(np.asarray(gpus, dtype=float), 1.0)
    tp = np.where(g > 1.0, 1.0 + TP_FANOUT_GROWTH * np.log2(g), 0.0)
    return np.where(np.asarray(dpa, dtype=bool), np.log2(g), tp)


def point_deployment(cache: dict[tuple, Deployment], model: ModelSpec, acc: Accelerator, precision: str, gpus: int,
                     dpa: bool, kv_b: float, ep: int, framework: str) -> Deployment:
    """The deployment of one pool of a benchmark point as its recipe ran it (:meth:`Deployment.as_deployed`), built
    once per ``cache``."""
    k = (acc.key, model.key, precision, gpus, dpa, kv_b, ep, framework.lower())
    got = cache.get(k)
    if got is None:
        got = cache[k] = Deployment.as_deployed(model, acc, precision, gpus, framework, dpa, kv_b, ep)
    return got


def expert_ranks(ep: int, gpus: int) -> int:
    """Ranks the routed experts are split over as whole experts: the layout's EP degree when it divides the
    instance's GPUs, else 1 (every GPU holds a slice of each expert)."""
    e = max(min(int(ep), int(gpus)), 1)
    return e if gpus % e == 0 else 1


def point_attn_eff(f: Features, attn_eff: float | np.ndarray) -> np.ndarray:
    """Each point's prefill attention efficiency: its kernel's sourced figure (``Features.attn_eff``), else the
    fitted ``attn_eff`` (one global value, or one per point)."""
    return np.where(np.isnan(f.attn_eff), attn_eff, f.attn_eff)


def predict_times(f: Features, theta: np.ndarray, attn_eff: float | np.ndarray = 1.0, median: bool = True) -> Times:
    """The serving equations (:func:`agentprof.replay.equations.times`) for each point with per-point
    parameters ``theta`` (n × len(PARAMS), natural units) and the attention efficiency (:func:`point_attn_eff`).
    ``median``: first token and end-to-end time as the benchmark's medians (its queue wait the median arrival's);
    False: their means, as Little's law counts them."""
    tau, kappa, mbu, mfu, t0, q, treq, acc, mfu_pf, handoff, a2a = (theta[:, i] for i in range(len(PARAMS)))
    acc = np.where(f.mtp, acc, 1.0)
    return times(f.work, fixed_overhead(f.layers, tau, kappa, f.g_dec, f.dpa_dec, a2a) + f.cross_dec,
                 fixed_overhead(f.layers, tau, kappa, f.g_pf, f.dpa_pf, a2a) + f.cross_pf,
                 mbu, mfu, t0, q, treq, acc, point_attn_eff(f, attn_eff), mfu_pf, handoff, median=median,
                 dec_attn_eff=f.dec_attn_eff)


def predict(f: Features, theta: np.ndarray, attn_eff: float | np.ndarray = 1.0
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median TTFT, TPOT and end-to-end latency for each point (:func:`predict_times`). Equations in
    docs/DEVICE_MODEL.md §2."""
    t = predict_times(f, theta, attn_eff)
    return t.ttft, t.tpot, t.e2e
