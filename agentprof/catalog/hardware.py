"""The hardware catalog: accelerators, host CPUs, host links, disks and serving systems, read from TOML.

Shipped files live next to this module (``accelerators.toml``, ``hosts.toml``, ``systems.toml``); users add
their own with ``--catalog FILE`` (same layout; an entry with a shipped key replaces it). Every number is
``{ value, source }`` and may carry ``low``/``high`` bounds; anything else is a one-line :class:`CatalogError`
naming the file, the key and what was expected.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentprof.catalog import CATALOG_DIR, CatalogError, ModelSpec, Sourced, models, read_toml
from agentprof.errors import did_you_mean

SHIPPED_FILES = ("accelerators.toml", "hosts.toml", "systems.toml")
TABLES = ("accelerators", "hosts", "links", "disks", "systems", "models", "standins")
PRECISIONS = ("fp4", "int4", "fp8", "bf16")


EVIDENCE = ("measured", "vendor", "seed", "estimate")
"""Evidence classes of a catalog number: ``measured`` (a measurement: benchmarks, driver readings, our fits),
``vendor`` (a vendor's published figure), ``seed`` (the project's seed statements about unreleased hardware, and
the announcements they restate), ``estimate`` (a derivation from the others, stated in its source)."""


@dataclass(frozen=True)
class Bounded:
    """A sourced catalog number with its optional stated range (estimates) and evidence class."""

    value: float
    source: str
    low: float | None = None
    high: float | None = None
    evidence: str | None = None  # one of EVIDENCE when the catalog states it

    @property
    def is_estimate(self) -> bool:
        """Not a measurement nor a vendor's figure: an estimate, or a seed statement about unreleased hardware."""
        return self.evidence_class in ("estimate", "seed")

    @property
    def evidence_class(self) -> str:
        """The stated evidence class, else the one the source implies (an estimate, a seed claim, a vendor's
        or a measurement's figure)."""
        if self.evidence:
            return self.evidence
        src = self.source.lower()
        if src.startswith("estimate"):
            return "estimate"
        if src.startswith("seed"):
            return "seed"
        if src.startswith(("measured", "fitted", "fit")):
            return "measured"
        return "vendor"


def iter_numbers(node: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """Yield ``(key path, number, sourced)`` for every number in a parsed TOML tree.

    A number is sourced when it is the ``value`` (or ``low``/``high``), or an element of a ``value`` list, of a
    table whose ``source`` is a non-empty string. Used by the loader and by the test that every catalog number
    names its source.
    """
    if isinstance(node, dict):
        has_source = "value" in node and isinstance(node.get("source"), str) and bool(node["source"].strip())
        for k, v in node.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                yield sub, v, has_source and k in ("value", "low", "high")
            elif k == "value" and has_source and isinstance(v, list):
                for i, x in enumerate(v):
                    yield f"{sub}[{i}]", x, isinstance(x, (int, float)) and not isinstance(x, bool)
            else:
                yield from iter_numbers(v, sub)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            sub = f"{path}[{i}]"
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                yield sub, v, False
            else:
                yield from iter_numbers(v, sub)


def _bounded(table: dict[str, Any], key: str, where: str, required: bool = True) -> Bounded | None:
    v = table.get(key)
    if v is None:
        if required:
            raise CatalogError(f"{where}.{key}: missing; expected {{ value = <number>, source = \"...\" }}")
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, dict)):
        raise CatalogError(f"{where}.{key}: expected {{ value = <number>, source = \"...\" }}, got {v!r}")
    if not isinstance(v, dict):
        raise CatalogError(f"{where}.{key} = {v}: every number needs a source; write {{ value = {v}, source = \"...\" }}")
    val, src = v.get("value"), v.get("source")
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        raise CatalogError(f"{where}.{key}.value: expected a number, got {val!r}")
    if not isinstance(src, str) or not src.strip():
        raise CatalogError(f"{where}.{key}: missing 'source' (name a source, or write 'estimate: <derivation>')")
    lo, hi = v.get("low"), v.get("high")
    for name, b in (("low", lo), ("high", hi)):
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))):
            raise CatalogError(f"{where}.{key}.{name}: expected a number, got {b!r}")
    if (lo is not None and lo > val) or (hi is not None and hi < val):
        raise CatalogError(f"{where}.{key}: value {val} lies outside its range [{lo}, {hi}]")
    extra = set(v) - {"value", "source", "low", "high", "evidence"}
    if extra:
        raise CatalogError(f"{where}.{key}: unexpected field(s) {', '.join(sorted(extra))} "
                           "(expected value, source, low, high, evidence)")
    ev = v.get("evidence")
    if ev is not None and ev not in EVIDENCE:
        raise CatalogError(f"{where}.{key}.evidence: expected one of {', '.join(EVIDENCE)}, got {ev!r}")
    return Bounded(float(val), src.strip(), None if lo is None else float(lo), None if hi is None else float(hi), ev)


def _positive(b: Bounded | None, where: str) -> Bounded | None:
    if b is not None and b.value <= 0:
        raise CatalogError(f"{where}: expected a positive number, got {b.value}")
    return b


def _text(table: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    v = table.get(key, default)
    if not isinstance(v, str) or (default is None and not v.strip()):
        raise CatalogError(f"{where}.{key}: expected a string, got {v!r}")
    return v


def _numbers(table: dict[str, Any], where: str, required: tuple[str, ...], optional: tuple[str, ...],
             text_keys: tuple[str, ...] = ()) -> dict[str, Bounded]:
    known = set(required) | set(optional) | set(text_keys)
    unknown = sorted(set(table) - known)
    if unknown:
        raise CatalogError(f"{where}: unknown key(s) {', '.join(unknown)} (expected {', '.join(sorted(known))})")
    out: dict[str, Bounded] = {}
    for k in (*required, *optional):  # every number present first, so a bare number is named before a gap
        if k in table:
            out[k] = _positive(_bounded(table, k, where), f"{where}.{k}")  # type: ignore[assignment]
    for k in required:
        if k not in out:
            _bounded(table, k, where)
    return out


@dataclass(frozen=True)
class Accelerator:
    """One accelerator chip: memory, bandwidth, dense peaks by precision, power."""

    key: str
    display: str
    vendor: str
    family: str
    proxy: str | None
    fields: dict[str, Bounded]

    def num(self, name: str) -> float:
        return self.fields[name].value

    @property
    def hbm_bytes(self) -> float:
        return self.num("hbm_bytes")

    @property
    def hbm_bw(self) -> float:
        return self.num("hbm_bw")

    @property
    def attn_fwd_eff(self) -> float | None:
        """The published forward efficiency (fraction of the BF16 peak) of the attention kernel the chip's engines
        run on fresh prompts, where the catalog sources one; None elsewhere (the fitted pooled value applies)."""
        f = self.fields.get("attn_fwd_eff")
        return None if f is None else f.value

    @property
    def mla_decode_eff(self) -> float | None:
        """The published compute-bound efficiency (fraction of the BF16 peak) of the MLA decode attention kernel the
        chip's engines run, where the catalog sources one; None elsewhere (the decode step's fitted ``mfu``)."""
        f = self.fields.get("mla_decode_eff")
        return None if f is None else f.value

    @property
    def gemm_fp8_eff(self) -> float | None:
        """The fraction of the FP8 dense peak the chip's block-scale FP8 GEMM library reaches at DeepSeek-V3 prefill
        shapes, where the catalog sources one; None elsewhere."""
        f = self.fields.get("gemm_fp8_eff")
        return None if f is None else f.value

    def peak_flops(self, precision: str) -> float:
        """Dense peak for a weight format: its own tensor-core rate if the chip has one, else BF16 (the weights
        are dequantized, as GPT-OSS MXFP4 on Hopper; hardware.md §5.1). INT4 weights compute in BF16/FP8."""
        name = {"fp4": "fp4_flops", "fp8": "fp8_flops", "int4": "fp8_flops"}.get(precision, "bf16_flops")
        f = self.fields.get(name) or self.fields["bf16_flops"]
        return f.value


@dataclass(frozen=True)
class Host:
    """A host CPU: core count, memory bandwidth and single-thread speed relative to the reference host."""

    key: str
    display: str
    arch: str
    fields: dict[str, Bounded]

    @property
    def st_speed(self) -> float:
        return self.fields["st_speed"].value

    @property
    def mt_speed(self) -> float:
        """Whole-host multi-thread throughput relative to the reference host (single-thread speed when the
        catalog gives none)."""
        f = self.fields.get("mt_speed")
        return f.value if f is not None else self.st_speed


@dataclass(frozen=True)
class Link:
    """A data path with one bandwidth per accelerator and direction (host link or disk tier)."""

    key: str
    display: str
    bw: Bounded


@dataclass(frozen=True)
class System:
    """A serving system: accelerators x count, host, host link, disk tier and the serving software."""

    key: str
    display: str
    accelerator: Accelerator
    count: int
    host: Host
    link: Link
    disk: Link
    frameworks: tuple[str, ...]
    precisions: tuple[str, ...]
    tp: str
    mem_util: float
    weights_fraction: float
    params: dict[str, Bounded] = field(default_factory=dict)
    """Declared per-step terms (systems no measurement covers): t_layer_s (fixed step overhead per layer) with
    fanout_kappa (its growth per doubling of chips) or a flat t_fixed_s, mbu, mfu, mfu_pf, t0_s, t_req_s, q,
    mtp_accept, attn_eff."""
    corner: str | None = None
    """``fast`` or ``slow`` when every ranged estimate is at that end (:func:`agentprof.replay.bands.corner_system`):
    estimates read outside the catalog (the agentic deployment's CPU tier) take the same end."""


@dataclass
class HardwareCatalog:
    """Everything replay needs to know about hardware, plus the models from :mod:`agentprof.catalog`."""

    accelerators: dict[str, Accelerator]
    hosts: dict[str, Host]
    links: dict[str, Link]
    disks: dict[str, Link]
    systems: dict[str, System]
    models: dict[str, ModelSpec]
    files: tuple[str, ...]

    def gemm_ratio(self, hardware: str) -> float:
        """The chip's prefill GEMM efficiency relative to the reference chip's (:data:`GEMM_REFERENCE`), both
        measured at DeepSeek-V3 shapes; 1 where either is unpublished. Scales the prefill-efficiency prior."""
        acc, ref = self.accelerators.get(hardware), self.accelerators.get(GEMM_REFERENCE)
        if acc is None or ref is None or not acc.gemm_fp8_eff or not ref.gemm_fp8_eff:
            return 1.0
        return acc.gemm_fp8_eff / ref.gemm_fp8_eff

    def system(self, name: str) -> System:
        s = self.systems.get(name) or self.systems.get(name.lower())
        if s is None:
            raise CatalogError(f"unknown system {name!r}{did_you_mean(name, self.systems)} "
                               f"(known: {', '.join(sorted(self.systems))}; see 'agentprof devices list')")
        return s


_SYSTEM_TEXT = ("display", "accelerator", "host", "link", "disk", "frameworks", "precisions", "tp", "params")
_PARAM_KEYS = ("t_fixed_s", "t_layer_s", "fanout_kappa", "mbu", "mfu", "mfu_pf", "t0_s", "t_req_s", "q", "mtp_accept",
               "attn_eff")


def _parse_system(key: str, t: dict[str, Any], where: str, acc: dict[str, Accelerator], hosts: dict[str, Host],
                  links: dict[str, Link], disks: dict[str, Link]) -> System:
    nums = _numbers(t, where, ("count", "mem_util"), ("weights_fraction",), _SYSTEM_TEXT)

    def ref(name: str, pool: dict[str, Any], what: str) -> Any:
        k = _text(t, name, where)
        if k not in pool:
            raise CatalogError(f"{where}.{name}: unknown {what} {k!r} (known: {', '.join(sorted(pool))})")
        return pool[k]

    def strlist(name: str) -> tuple[str, ...]:
        v = t.get(name)
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            raise CatalogError(f"{where}.{name}: expected a non-empty list of strings, got {v!r}")
        return tuple(v)

    count = nums["count"].value
    if count != int(count) or count < 1:
        raise CatalogError(f"{where}.count: expected a whole number >= 1, got {count}")
    tp = t.get("tp", "max")
    if tp not in ("max", "fit"):
        raise CatalogError(f"{where}.tp: expected \"max\" or \"fit\", got {tp!r}")
    precisions = strlist("precisions")
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad:
        raise CatalogError(f"{where}.precisions: unknown precision {bad[0]!r} (expected {', '.join(PRECISIONS)})")
    for frac in ("mem_util", "weights_fraction"):
        if frac in nums and not 0 < nums[frac].value <= 1:
            raise CatalogError(f"{where}.{frac}: expected a fraction in (0, 1], got {nums[frac].value}")
    params: dict[str, Bounded] = {}
    raw = t.get("params")
    if raw is not None:
        if not isinstance(raw, dict):
            raise CatalogError(f"{where}.params: expected a table")
        params = _numbers(raw, f"{where}.params", (), _PARAM_KEYS)
        missing = [k for k in ("mbu", "mfu") if k not in params]
        if "t_fixed_s" not in params and "t_layer_s" not in params:
            missing.insert(0, "t_layer_s (or t_fixed_s)")
        if missing:
            raise CatalogError(f"{where}.params: missing {', '.join(missing)} (declared systems need at least "
                               "t_layer_s or t_fixed_s, mbu and mfu)")
    return System(
        key=key, display=_text(t, "display", where, key), accelerator=ref("accelerator", acc, "accelerator"),
        count=int(count), host=ref("host", hosts, "host"), link=ref("link", links, "link"),
        disk=ref("disk", disks, "disk"), frameworks=strlist("frameworks"), precisions=precisions, tp=tp,
        mem_util=nums["mem_util"].value,
        weights_fraction=nums["weights_fraction"].value if "weights_fraction" in nums else 0.85, params=params)


def _parse_link(key: str, t: Any, where: str) -> Link:
    if not isinstance(t, dict):
        raise CatalogError(f"{where}: expected a table")
    nums = _numbers(t, where, ("bw",), (), ("display",))
    return Link(key, _text(t, "display", where, key), nums["bw"])


GEMM_REFERENCE = "h100"
"""The chip the prefill-efficiency prior describes (``calibration.PRIOR_MEAN["mfu_pf"]``): Hopper."""
_ACC_NUMS = ("hbm_bytes", "hbm_bw", "bf16_flops")
_ACC_OPT = ("fp8_flops", "fp4_flops", "tdp_w", "allin_kw", "scaleup_bw", "scaleup_domain", "scaleout_bw",
            "overhead_scale", "attn_fwd_eff", "mla_decode_eff", "gemm_fp8_eff")
_HOST_NUMS = ("cores", "st_speed")
_HOST_OPT = ("mem_bw", "vendor_claim", "mt_speed")


@lru_cache(maxsize=16)
def load_catalog(extra_files: tuple[str, ...] = ()) -> HardwareCatalog:
    """Load the shipped catalog plus user files (later files override earlier entries with the same key)."""
    raw: dict[str, dict[str, tuple[Any, str]]] = {t: {} for t in TABLES if t != "standins"}
    for p in extra_files:
        if not Path(p).is_file():
            raise CatalogError(f"{p}: no such catalog file")
    paths = [CATALOG_DIR / f for f in SHIPPED_FILES] + [Path(p) for p in extra_files]
    for path in paths:
        data = read_toml(path)
        for table, entries in data.items():
            if table not in TABLES:
                raise CatalogError(f"{path}: unknown table [{table}] (expected one of {', '.join(TABLES)})")
            if table == "standins":
                continue
            if not isinstance(entries, dict):
                raise CatalogError(f"{path}: [{table}] must hold named tables, e.g. [{table}.my-entry]")
            for key, t in entries.items():
                if not isinstance(t, dict):
                    raise CatalogError(f"{path}: {table}.{key} must be a table")
                raw[table][key] = (t, f"{path}: {table}.{key}")
    acc: dict[str, Accelerator] = {}
    for key, (t, where) in raw["accelerators"].items():
        nums = _numbers(t, where, _ACC_NUMS, _ACC_OPT, ("display", "vendor", "family", "proxy"))
        proxy = t.get("proxy")
        if proxy is not None and not isinstance(proxy, str):
            raise CatalogError(f"{where}.proxy: expected an accelerator name, got {proxy!r}")
        acc[key] = Accelerator(key, _text(t, "display", where, key), _text(t, "vendor", where, ""),
                               _text(t, "family", where, key), proxy, nums)
    for a in acc.values():
        if a.proxy is not None and a.proxy not in acc:
            raise CatalogError(f"accelerators.{a.key}.proxy: unknown accelerator {a.proxy!r}")
    hosts: dict[str, Host] = {}
    for key, (t, where) in raw["hosts"].items():
        nums = _numbers(t, where, _HOST_NUMS, _HOST_OPT, ("display", "arch"))
        hosts[key] = Host(key, _text(t, "display", where, key), _text(t, "arch", where, ""), nums)
    links = {k: _parse_link(k, t, w) for k, (t, w) in raw["links"].items()}
    disks = {k: _parse_link(k, t, w) for k, (t, w) in raw["disks"].items()}
    systems = {k: _parse_system(k, t, w, acc, hosts, links, disks) for k, (t, w) in raw["systems"].items()}
    user_model_files = tuple(str(p) for p in extra_files if "models" in read_toml(p))
    for p in user_model_files:
        for key, t in read_toml(p)["models"].items():
            for k, v in (t.items() if isinstance(t, dict) else ()):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    raise CatalogError(f"{p}: models.{key}.{k} = {v}: every number needs a source; "
                                       f"write {{ value = {v}, source = \"...\" }}")
    mods = models(user_model_files)
    return HardwareCatalog(acc, hosts, links, disks, systems, dict(mods), tuple(str(p) for p in paths))


def check_sources(path: str | Path) -> list[str]:
    """Key paths of numbers in a catalog file that name no source (empty when every number is sourced)."""
    return [p for p, _, ok in iter_numbers(read_toml(path)) if not ok]


def weight_format(model: ModelSpec, precision: str) -> dict[str, Sourced]:
    """The model's weight format for a precision; a clear error when the model does not ship in it."""
    f = model.formats.get(precision)
    if f is None:
        raise CatalogError(f"model {model.key} has no {precision!r} format (known: {', '.join(model.formats) or 'none'})")
    return f
