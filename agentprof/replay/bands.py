"""Low/high bands for what-ifs on hardware without public measurements (Jalapeño, Rubin, Vera, ...).

Every estimated catalog number may carry a stated range (``low``/``high``). A band evaluates the model twice
more: with every range at its optimistic end (the *fast* corner: more bandwidth and compute, less overhead,
higher efficiencies) and at its pessimistic end (*slow*). The figures at the two corners bound the what-if under
the catalog's own ranges; which numbers moved is listed with the band.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Literal

from agentprof.catalog.hardware import Bounded, System

FAST_HIGH = frozenset({"hbm_bw", "hbm_bytes", "bf16_flops", "fp8_flops", "fp4_flops", "scaleup_bw", "st_speed", "bw",
                       "mbu", "mfu", "mfu_pf", "mtp_accept", "attn_eff", "attn_fwd_eff",
                       "mla_decode_eff"})
"""Numbers whose higher end makes a system faster."""
FAST_LOW = frozenset({"t_layer_s", "t_fixed_s", "fanout_kappa", "t0_s", "t_req_s", "overhead_scale", "q"})
"""Numbers whose lower end makes a system faster."""
Corner = Literal["fast", "slow"]


def at_end(b: Bounded, corner: str | None, faster_high: bool) -> float:
    """``b`` at a band corner's end of its range (``fast``/``slow``; its value without a corner or a range):
    ``faster_high`` when the higher end makes the what-if faster. Estimates read outside the catalog's systems (the
    agentic deployment's CPU tier, a drafter's figures) take their ends here too."""
    if corner is None:
        return b.value
    hi = b.high if b.high is not None else b.value
    lo = b.low if b.low is not None else b.value
    return (hi if faster_high else lo) if corner == "fast" else (lo if faster_high else hi)


def _pick(name: str, b: Bounded, corner: Corner) -> Bounded:
    if (b.low is None and b.high is None) or name not in FAST_HIGH | FAST_LOW:
        return b
    return Bounded(at_end(b, corner, name in FAST_HIGH), b.source, b.low, b.high, b.evidence)


def _fields(fields: dict[str, Bounded], corner: Corner, moved: list[str], where: str) -> dict[str, Bounded]:
    out = {}
    for k, b in fields.items():
        out[k] = _pick(k, b, corner)
        if out[k].value != b.value:
            moved.append(f"{where}.{k}")
    return out


ESTIMATED_TIER = "agentic.default.cpu_tier_gib_per_instance"
"""The band's name for the agentic deployment's estimated CPU tier (systems no recipe covers), which a corner
takes at the estimate's range end (HBM only … 2,500 GiB per instance; catalog/agentic.toml)."""


def banded(system: System, estimated_tier: bool = False) -> list[str]:
    """What a band of ``system`` moves: its ranged catalog numbers, and the estimated CPU tier when the run takes it
    (empty: no band)."""
    return ranged(system) + ([ESTIMATED_TIER] if estimated_tier else [])


def ranged(system: System) -> list[str]:
    """The catalog numbers of ``system`` that carry a range and move a what-if (empty: no band)."""
    moved: list[str] = []
    corner_system(system, "fast", moved)
    corner_system(system, "slow", moved)
    return sorted(set(moved))


def evidence(system: System, names: list[str]) -> dict[str, str]:
    """The evidence class (:data:`agentprof.catalog.hardware.EVIDENCE`) of each catalog number a band moves,
    by its band name (``jalapeno.hbm_bw``); the agentic deployment's estimated tier is an estimate."""
    where = {system.accelerator.key: system.accelerator.fields, system.host.key: system.host.fields,
             f"{system.key}.params": system.params}
    out = {}
    for name in names:
        owner, _, key = name.rpartition(".")
        if name == ESTIMATED_TIER:
            out[name] = "estimate"
        elif name == f"{system.link.key}.bw":
            out[name] = system.link.bw.evidence_class
        elif owner in where and key in where[owner]:
            out[name] = where[owner][key].evidence_class
    return out


def ranged_count(band: dict) -> str:
    """How many numbers a band moved, by evidence class: ``17 ranged figures: 9 estimate, 6 seed, 2 vendor``."""
    ev = band.get("evidence") or {}
    names = band.get("ranged") or []
    by = Counter(ev.get(n, "unlabelled") for n in names)
    classes = ", ".join(f"{count} {cls}" for cls, count in by.most_common())
    return f"{len(names)} ranged figure{'' if len(names) == 1 else 's'}" + (f": {classes}" if classes else "")


def corner_system(system: System, corner: Corner, moved: list[str] | None = None) -> System:
    """``system`` with every ranged number at its ``fast`` or ``slow`` end (``moved`` collects their names)."""
    mv: list[str] = [] if moved is None else moved
    acc = replace(system.accelerator, fields=_fields(system.accelerator.fields, corner, mv, system.accelerator.key))
    host = replace(system.host, fields=_fields(system.host.fields, corner, mv, system.host.key))
    link = replace(system.link, bw=_pick("bw", system.link.bw, corner))
    if link.bw.value != system.link.bw.value:
        mv.append(f"{system.link.key}.bw")
    params = _fields(system.params, corner, mv, f"{system.key}.params")
    return replace(system, accelerator=acc, host=host, link=link, params=params, corner=corner)
