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
from dataclasses import dataclass

from agentprof.catalog import CatalogError, ModelSpec
from agentprof.catalog.hardware import HardwareCatalog, System
from agentprof.replay.calibration import FitEntry, Fitted, load_fitted, nearest_group, step_params
from agentprof.replay.costmodel import Deployment, StepParams, ceil_pow2
from agentprof.replay.points import PointKey


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
    """How the parameters were obtained, e.g. ``fitted b200/trt/gpt-oss-120b/fp4/none tp8-ep1 (23 points)``."""

    @property
    def host_link_bw(self) -> float:
        return self.system.link.bw.value

    @property
    def disk_bw(self) -> float:
        return self.system.disk.bw.value

    def describe(self) -> dict[str, object]:
        return {"system": self.system.key, "model": self.model.key, "precision": self.precision,
                "accelerators": self.dep.gpus, "framework": self.framework, "calibration": self.calibration,
                "t_fixed_ms": round(self.params.t_fixed_s * 1e3, 3), "mbu": round(self.params.mbu, 3),
                "mfu": round(self.params.mfu, 3)}


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


def _fitted_entry(fitted: Fitted, cat: HardwareCatalog, system: System, model: ModelSpec, precision: str,
                  gpus: int) -> tuple[FitEntry | None, str, str, int]:
    acc = system.accelerator
    hw = acc.key if any(e.attrs.get("hardware") == acc.key for e in fitted.entries["group"].values()) else (acc.proxy or acc.key)
    hw_acc = cat.accelerators.get(hw, acc)
    # the model itself, then catalog models of the same attention kind and MoE-ness (per-layer terms transfer)
    same = [m for m in cat.models.values() if m.key != model.key and m.attention == model.attention
            and bool(m.get("experts")) == bool(model.get("experts"))]
    others = [m for m in cat.models.values() if m.key != model.key and m not in same]
    for cand in (model, *same, *others):
        for fw in system.frameworks:
            grp_key = f"{hw}/{fw}/{cand.key}/{precision}/none"
            grp = fitted.entries["group"].get(grp_key)
            if grp is None:
                grp = next((e for k, e in fitted.entries["group"].items()
                            if k.startswith(f"{hw}/{fw}/{cand.key}/") and k.endswith("/none")), None)
            if grp is None:
                continue
            layouts = [e for k, e in fitted.entries["layout"].items() if k.startswith(grp.key + "/")]
            proxy = "" if cand.key == model.key else f"; {model.key} uses the per-layer terms of {cand.key}"
            where = "" if hw == acc.key else f"; {acc.key} borrows {hw}'s software overheads (estimate)"
            if layouts:
                best = min(layouts, key=lambda e: (abs(math.log2(layout_gpus(e) / gpus)), -e.points))
                g_l = layout_gpus(best)
                note = "" if g_l == gpus else f", nearest to {gpus} accelerators: its step overhead at {g_l}"
                return best, fw, f"fitted {best.key} ({best.points} points{note}{proxy}{where})", g_l
            return grp, fw, f"fitted {grp.key} ({grp.points} points{proxy}{where})", gpus
        key = PointKey(hw_acc.family, hw, system.frameworks[0], cand.key, precision, "none", f"tp{gpus}-ep1")
        near = nearest_group(fitted, key)
        if near is not None:
            proxy = "" if cand.key == model.key else f"; {model.key} uses the per-layer terms of {cand.key}"
            return (near, near.attrs.get("framework", "?"),
                    f"nearest calibrated group {near.key} ({near.points} points{proxy})", gpus)
    return None, system.frameworks[0], "uncalibrated", gpus


def resolve(system: System, model: ModelSpec, cat: HardwareCatalog, fitted: Fitted | None = None,
            accept: float | None = None) -> Resolved:
    """The deployment and parameters for ``model`` on ``system``; a clear error when it cannot run there."""
    precision = _precision(system, model)
    gpus = _gpus(system, model, precision)
    dep = Deployment(model, system.accelerator, precision, gpus)
    if not dep.fits(system.mem_util):
        raise CatalogError(f"{model.display} ({dep.weight_bytes / 1e9:.0f} GB in {precision}) does not fit on "
                           f"{system.key} ({gpus} x {system.accelerator.hbm_bytes / 1e9:.0f} GB at "
                           f"{system.mem_util:.0%} usable)")
    if system.params:
        pr = system.params
        spec_accept = pr["mtp_accept"].value if "mtp_accept" in pr else 1.0
        params = StepParams(t_fixed_s=pr["t_fixed_s"].value, mbu=pr["mbu"].value, mfu=pr["mfu"].value,
                            t0_s=pr["t0_s"].value if "t0_s" in pr else 0.0,
                            t_req_s=pr["t_req_s"].value if "t_req_s" in pr else 0.0,
                            q=pr["q"].value if "q" in pr else 1.0,
                            accept=spec_accept if accept is None else accept,
                            attn_eff=pr["attn_eff"].value if "attn_eff" in pr else
                            (fitted if fitted is not None else load_fitted()).attn_eff)
        return Resolved(system, model, precision, dep, params, system.frameworks[0],
                        f"declared estimates in systems.toml [{system.key}.params]")
    fitted = fitted if fitted is not None else load_fitted()
    entry, fw, how, g_overhead = _fitted_entry(fitted, cat, system, model, precision, gpus)
    if entry is None:
        raise CatalogError(f"no calibration for {system.key}: run `agentprof devices fit` or declare "
                           f"[systems.{system.key}.params]")
    params = step_params(entry.theta, dep.layers, g_overhead, accept=1.0 if accept is None else accept)
    params = params.with_(attn_eff=fitted.attn_eff)
    return Resolved(system, model, precision, dep, params, fw, how)
