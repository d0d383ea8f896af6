"""Compose a serving system and a model into a replayable deployment with its calibrated parameters.

The system fixes the accelerator, its count and the serving software; the model's weight format is the
first of the system's precisions the model ships in; the tensor-parallel degree is all accelerators
(``tp = "max"``) or the fewest that hold the weights (``tp = "fit"``). Parameters come from the system's
declared estimates, else from ``fitted.toml``: the system's accelerator (or its proxy), the first of its
frameworks calibrated for this model, its layout when fitted, else the nearest calibrated sibling — and the
result says which.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from agentprof.catalog import CatalogError, ModelSpec
from agentprof.catalog.hardware import Accelerator, HardwareCatalog, System
from agentprof.catalog.kvcache import (
    ahead_steps,
    kv_bytes,
    prefill_alone,
    tokenize_host,
    tokenize_s_per_token,
    wait_steps,
)
from agentprof.replay.calibration import FitEntry, Fitted, deployment_params, is_disaggregated, load_fitted
from agentprof.replay.costmodel import Deployment, StepParams, ceil_pow2


@dataclass
class Resolved:
    """A model on a serving system, ready to replay."""

    system: System
    model: ModelSpec
    precision: str
    dep: Deployment
    params: StepParams
    framework: str
    calibration: str
    """How the parameters were obtained, e.g. ``fitted b200/trt/gpt-oss-120b/fp4/none/tp8-ep1 (23 points)``."""
    level: str = "unseen"
    """Calibration level: ``fitted`` (this layout measured), ``group`` (this hardware, framework and model in
    other layouts), ``unseen`` (borrowed from another accelerator or model, or declared estimates)."""
    level_error: dict[str, float] = field(default_factory=dict)
    """The error measured for that level by cross-validation (median APE per metric, fitted.toml [levels])."""
    kv_source: str = ""
    frontend_source: str = ""
    """Where the frontend's time per prompt token (``params.t_tok_s``) comes from, and its host scaling."""
    fitted: Fitted | None = field(default=None, repr=False, compare=False)

    @property
    def instances(self) -> int:
        """Serving instances the system holds at this deployment's accelerators per instance (at least one)."""
        return max(self.system.count // max(self.dep.gpus, 1), 1)

    @property
    def host_link_bw(self) -> float:
        return self.system.link.bw.value

    @property
    def disk_bw(self) -> float:
        return self.system.disk.bw.value

    def describe(self) -> dict[str, object]:
        return {"system": self.system.key, "model": self.model.key, "precision": self.precision,
                "accelerators": self.dep.gpus, "dp_attention": self.dep.dp_attention, "framework": self.framework, "calibration": self.calibration,
                "calibration_level": self.level, "level_error": self.level_error,
                "kv_bytes_per_element": self.dep.kv_dtype_bytes, "kv_source": self.kv_source,
                "t_fixed_ms": round(self.params.t_fixed_s * 1e3, 3), "mbu": round(self.params.mbu, 3),
                "mfu": round(self.params.mfu, 3), "frontend_us_per_token": round(self.params.t_tok_s * 1e6, 3),
                "frontend_source": self.frontend_source,
                # prefill attention's share of the BF16 peak: over earlier tokens, and each chunk's own tokens;
                # decode attention's (null: the GEMMs' mfu) and the query rows its kernel's tiles compute per real one
                "attn_eff": round(self.params.attn_eff, 4), "attn_eff_fresh": round(self.params.fresh_eff, 4),
                "attn_eff_decode": round(self.params.dec_attn_eff, 4) or None,
                "decode_attn_tile_factor": round(self.dep.decode_attn_pad(1.0 + self.params.draft_tokens), 3)}


def _kernel_figures(acc: Accelerator, p: StepParams, dep: Deployment) -> str:
    """The attention kernels' own figures a resolution takes (fresh prompts' forward, MLA decode over its 64-row
    query tiles), one clause; empty where the chip has none."""
    parts, est = [], False
    for name, value, what in (("attn_fwd_eff", p.attn_fresh_eff, "fresh prompts {:.3f}"),
                              ("mla_decode_eff", p.dec_attn_eff, "decode {:.3f}")):
        if value:
            parts.append(what.format(value))
            est |= acc.fields[name].source.startswith("estimate")
    if p.dec_attn_eff:
        parts[-1] += f" ({dep.decode_attn_pad(1.0 + p.draft_tokens):.0f}× rows in 64-row tiles)"
    return f"; attention kernels' {'estimated' if est else 'published'} figures: {', '.join(parts)}" if parts else ""


def _recipe_terms(dep: Deployment) -> str:
    """The deployment's sourced terms beyond the fit, one clause (empty where none applies): its recipe's slower
    prefill GEMM library, its all-reduces over the scale-out network."""
    parts = []
    if dep.nonexpert_gemm_ratio != 1.0:
        parts.append(f"non-expert prefill GEMMs x{dep.nonexpert_gemm_ratio:.2f} (the recipe's GEMM library, "
                     f"scheduling.toml [prefill_gemm])")
    if dep.crossing_s:
        parts.append(f"{dep.crossing_s * 1e3:.2f} ms a step of all-reduces over the scale-out network")
    return "".join(f"; {p}" for p in parts)


def layout_gpus(e: FitEntry) -> int:
    """Accelerators per (decode) instance of a fitted layout: ``tp8-ep1`` → 8, ``p1x4-d4x8-tp8ep8`` → 8."""
    lay = e.attrs.get("layout", "")
    m = re.search(r"-d\d+x(\d+)", lay) or re.match(r"tp(\d+)", lay)
    return int(m.group(1)) if m else 1


def _precision(system: System, model: ModelSpec) -> str:
    for p in system.precisions:
        if p in model.formats:
            return p
    raise CatalogError(f"{model.key} ships in {', '.join(model.formats) or 'no format'}; system {system.key} "
                       f"serves {', '.join(system.precisions)}")


def _gpus(system: System, model: ModelSpec, precision: str) -> int:
    acc = system.accelerator
    probe = Deployment(model, acc, precision, 1)
    if system.tp == "fit":
        need = probe.weight_bytes / (system.weights_fraction * acc.hbm_bytes)
        g = ceil_pow2(need)
        if g > system.count:
            raise CatalogError(f"{model.display} ({probe.weight_bytes / 1e9:.0f} GB in {precision}) does not fit on "
                               f"{system.key} ({system.count} x {acc.hbm_bytes / 1e9:.0f} GB)")
        return g
    return system.count


def _vendor_hardware(fitted: Fitted, cat: HardwareCatalog, acc_key: str) -> list[str]:
    """Calibrated hardware of the same vendor as ``acc_key``, the same family first, then by HBM bandwidth."""
    acc = cat.accelerators[acc_key]
    hws = {e.attrs.get("hardware", "") for e in fitted.entries["group"].values()}
    same = [cat.accelerators[h] for h in hws if h in cat.accelerators and h != acc_key
            and cat.accelerators[h].vendor == acc.vendor]
    same.sort(key=lambda a: (a.family != acc.family, abs(math.log(a.hbm_bw / acc.hbm_bw))))
    return [a.key for a in same]


def _fitted_entry(fitted: Fitted, cat: HardwareCatalog, system: System, model: ModelSpec, precision: str,
                  gpus: int, dpa: bool = False) -> tuple[FitEntry | None, str, str, str]:
    """(entry, framework, description, level): the calibration a model on a system uses. Level ``fitted``: the
    exact layout was measured; ``group``: the same hardware, framework and model in other layouts (the step
    overhead and collectives are carried to this layout by the equations); ``unseen``: borrowed from another
    accelerator (a proxy or a same-vendor sibling) or another model of the same kind."""
    acc = system.accelerator
    own = acc.key if any(e.attrs.get("hardware") == acc.key for e in fitted.entries["group"].values()) else None
    hw_list = ([own] if own else ([acc.proxy] if acc.proxy else [])) + [
        h for h in _vendor_hardware(fitted, cat, acc.key) if h != acc.proxy]
    same = [m for m in cat.models.values() if m.key != model.key and m.attention == model.attention
            and bool(m.get("experts")) == bool(model.get("experts"))]
    others = [m for m in cat.models.values() if m.key != model.key and m not in same]
    # the model itself on its own hardware, then on same-vendor hardware; then models of the same kind
    order = [(model, hw) for hw in hw_list] + [(m, hw) for m in (*same, *others) for hw in hw_list]
    for cand, hw in order:
        # the system's frameworks first; on another accelerator, whatever framework measured the model there
        fws = list(system.frameworks)
        if hw != acc.key:
            fws += sorted({e.attrs.get("framework", "") for e in fitted.entries["group"].values()
                           if e.attrs.get("hardware") == hw and e.attrs.get("model") == cand.key} - set(fws))
        for fw in fws:
            grp = fitted.entries["group"].get(f"{hw}/{fw}/{cand.key}/{precision}/none") or next(
                (e for k, e in fitted.entries["group"].items()
                 if k.startswith(f"{hw}/{fw}/{cand.key}/") and k.endswith("/none")), None)
            if grp is None:
                continue
            notes = []
            if cand.key != model.key:
                notes.append(f"{model.key} uses the per-layer terms of {cand.key}")
            if hw != acc.key:
                notes.append(f"{acc.key} borrows {hw}'s fitted software overheads (estimate)")
            tail = "; ".join(notes)
            suffix = "-dpa" if dpa else ""
            same_tp = [e for k, e in fitted.entries["layout"].items()
                       if re.fullmatch(re.escape(grp.key) + rf"/tp{gpus}-ep\d+{suffix}", k)]
            exact = max(same_tp, key=lambda e: e.points) if same_tp else None
            if exact is not None and cand.key == model.key:
                if not notes:
                    return exact, fw, f"fitted {exact.key} ({exact.points} points)", "fitted"
                return exact, fw, f"fitted {exact.key} ({exact.points} points); {tail}", "unseen"
            level = "group" if not notes else "unseen"
            what = "data-parallel attention on " if dpa else ""
            return (grp, fw, f"fitted {grp.key} ({grp.points} points), carried to {what}{gpus} accelerators by the "
                    f"per-layer overhead and collectives" + (f"; {tail}" if tail else ""), level)
    return None, system.frameworks[0], "uncalibrated", "unseen"


def resolve(system: System, model: ModelSpec, cat: HardwareCatalog, fitted: Fitted | None = None,
            accept: float | None = None, gpus: int | None = None, dp_attention: bool = False) -> Resolved:
    """The deployment and parameters for ``model`` on ``system`` (on ``gpus`` accelerators instead of the
    system's choice when given; with ``dp_attention`` the attention data-parallel over them, its weights replicated
    on every rank and the step overhead's fan-out that of the all-to-all); a clear error when it cannot run there."""
    precision = _precision(system, model)
    gpus = gpus if gpus is not None else _gpus(system, model, precision)
    fitted = fitted if fitted is not None else load_fitted()
    if system.params:
        entry, fw, how, level = None, system.frameworks[0], f"declared estimates in systems.toml [{system.key}.params]", "unseen"
    else:
        entry, fw, how, level = _fitted_entry(fitted, cat, system, model, precision, gpus, dp_attention)
        if entry is None:
            raise CatalogError(f"no calibration for {system.key}: run `agentprof devices fit` or declare "
                               f"[systems.{system.key}.params]")
    kvb, kv_src = kv_bytes(fw, model.key, system.accelerator.key, precision)
    dep = Deployment.as_deployed(model, system.accelerator, precision, gpus, fw, dp_attention, kvb)
    if not dep.fits(system.mem_util):
        what = " with its attention weights on every rank (data-parallel attention)" if dp_attention else ""
        raise CatalogError(f"{model.display} ({dep.weight_bytes / 1e9:.0f} GB in {precision}) does not fit on "
                           f"{system.key}{what} ({gpus} x {system.accelerator.hbm_bytes / 1e9:.0f} GB at "
                           f"{system.mem_util:.0%} usable)")
    scale = system.accelerator.fields.get("overhead_scale")
    acc_key = system.accelerator.key  # attention at this accelerator's own fitted efficiency, else the pooled one
    kind = dep.model.attention  # of this attention kind (MLA's where the fit has none for it)
    if system.params:
        pr = system.params

        def val(k: str, d: float) -> float:
            return pr[k].value if k in pr else d

        if "t_layer_s" in pr:
            t_fixed = dep.layers * pr["t_layer_s"].value * (1.0 + val("fanout_kappa", 0.0) * math.log2(max(gpus, 1)))
        else:
            t_fixed = pr["t_fixed_s"].value
        params = StepParams(t_fixed_s=t_fixed + dep.crossing_s, mbu=pr["mbu"].value, mfu=pr["mfu"].value,
                            t0_s=val("t0_s", 0.0), t_req_s=val("t_req_s", 0.0), q=val("q", 1.0),
                            accept=val("mtp_accept", 1.0) if accept is None else accept,
                            attn_eff=val("attn_eff", fitted.attn_eff_for(acc_key, kind)),
                            mfu_pf=pr["mfu_pf"].value if "mfu_pf" in pr else None)
    else:
        assert entry is not None
        params = deployment_params(entry.theta, dep, accept=1.0 if accept is None else accept)
        params = params.with_(attn_eff=fitted.attn_eff_for(acc_key, kind))
        how += (f"; prefill attention at {params.attn_eff:.3f} of the BF16 peak over a cached prefix, "
                f"{fitted.attn_eff_basis(acc_key, kind)}")
    if scale is not None:
        params = params.with_(t_fixed_s=params.t_fixed_s * scale.value)
    if not system.params:
        params = params.with_(wait_steps=wait_steps(fw, entry.attrs.get("model", model.key) if entry else model.key,
                                                    entry.attrs.get("hardware") if entry else None,
                                                    precision=precision, tp=gpus)[0],
                              ahead_steps=ahead_steps(fw, model.key)[0],
                              prefill_alone=prefill_alone(fw, model.key)[0] and not is_disaggregated(fw))
    params, tok_src = _with_frontend(params, cat, system, model, fw)
    # a fresh prompt's own attention at the chip's published kernel figure, as the fixed-sequence points price it
    params = params.with_(attn_fresh_eff=system.accelerator.attn_fwd_eff or 0.0,
                          dec_attn_eff=dep.decode_attn_eff or 0.0)
    if not system.params:
        how += _kernel_figures(system.accelerator, params, dep)
    how += _recipe_terms(dep)
    # the calibration it came from travels along: a re-resolution in another layout uses the same
    return Resolved(system, model, precision, dep, params, fw, how, level, fitted.level_errors.get(level, {}), kv_src,
                    frontend_source=tok_src, fitted=fitted)


def _with_frontend(params: StepParams, cat: HardwareCatalog, system: System, model: ModelSpec,
                   fw: str) -> tuple[StepParams, str]:
    """``params`` charging the serving frontend's time per prompt token (``scheduling.toml [tokenize]`` for the
    framework the deployment resolved to): single-threaded host work, so the figure measured on one host CPU runs
    at that host's single-thread speed over this system's (an entry naming no host counts as the reference host)."""
    tok, src = tokenize_s_per_token(fw, model.key, system.accelerator.key)
    if not tok:
        return params, src
    measured = tokenize_host(fw, model.key, system.accelerator.key)
    if measured is not None and measured not in cat.hosts:
        raise CatalogError(f"scheduling.toml [tokenize] {fw}/{model.key}: host {measured!r} is not in hosts.toml")
    st = cat.hosts[measured].st_speed if measured is not None else 1.0
    ratio = st / system.host.st_speed
    note = f"measured on {measured}" if measured else "host not named: taken as the reference host"
    return params.with_(t_tok_s=tok * ratio), f"{src}; {note}, x{ratio:.2f} for {system.host.key}"
