"""The hardware and model catalog: data files (TOML) where every number names its source or derivation.

``models.toml`` is read here (analysis needs KV bytes per token; replay needs the rest). Users can add their
own files with the same layout; a number without a source is an error.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentprof.errors import AgentprofError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CATALOG_DIR = Path(__file__).parent


@dataclass(frozen=True)
class Sourced:
    """A catalog number with where it comes from."""

    value: float
    source: str


class CatalogError(AgentprofError):
    pass


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a catalog TOML file; syntax errors name the file and line."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise CatalogError(f"{p}: cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise CatalogError(f"{p}: invalid TOML: {e}") from None


def sourced_fields(table: dict[str, Any], where: str) -> dict[str, Sourced]:
    """Collect ``{value, source}`` entries of a table; a bare number (no source) is an error."""
    out: dict[str, Sourced] = {}
    for key, v in table.items():
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            raise CatalogError(f"{where}.{key} = {v}: every number needs a source; write {{ value = {v}, source = \"...\" }}")
        if isinstance(v, dict) and "value" in v:
            src = v.get("source")
            if not isinstance(src, str) or not src.strip():
                raise CatalogError(f"{where}.{key}: missing 'source' (name a source, or say 'estimate: ...' with the derivation)")
            val = v["value"]
            if not isinstance(val, (int, float)) or isinstance(val, bool):
                raise CatalogError(f"{where}.{key}: 'value' must be a number, got {type(val).__name__}")
            out[key] = Sourced(float(val), src)
    return out


@dataclass
class ModelSpec:
    """An open model's architecture, as needed for KV sizing and the device cost model."""

    key: str
    display: str
    attention: str  # "gqa" or "mla"
    fields: dict[str, Sourced]
    aliases: list[str] = field(default_factory=list)
    native_precision: str = ""
    formats: dict[str, dict[str, Sourced]] = field(default_factory=dict)
    """Weight formats by precision name (``fp4``, ``fp8``, ``int4``, ``bf16``): ``expert_bits`` (routed experts),
    ``dense_bits`` (every other weight), optionally ``kv_bytes`` (bytes per KV element)."""

    def get(self, name: str, default: float = 0.0) -> float:
        f = self.fields.get(name)
        return f.value if f else default

    def kv_elements_per_layer(self) -> float:
        """KV elements stored per token per attention layer (K and V for GQA; one latent for MLA)."""
        if self.attention == "mla":
            return self.get("kv_lora_rank") + self.get("rope_dim")
        return 2 * self.get("kv_heads") * self.get("head_dim")

    def kv_bytes_per_token(self, dtype_bytes: float = 2.0, context: int | None = None) -> float:
        """Bytes of KV cache per token. With ``context`` set, sliding-window layers count only while the
        context is within their window (averaged per token); without it, the marginal (long-context) value."""
        layers = self.get("layers")
        sliding = self.get("sliding_layers")
        window = self.get("sliding_window")
        per_layer = self.kv_elements_per_layer() * dtype_bytes
        full = (layers - sliding) * per_layer
        if not sliding:
            return full
        if context is None or context <= 0:
            return full
        return full + sliding * per_layer * min(1.0, window / context)

    def kv_bytes_per_token_all_layers(self, dtype_bytes: float = 2.0) -> float:
        """Bytes per token if every layer keeps full KV (what a per-layer chunk store such as LMCache holds)."""
        return self.get("layers") * self.kv_elements_per_layer() * dtype_bytes

    def lmcache_chunk_bytes(self, chunk_size: int = 256, tp: int = 1, dtype_bytes: float = 2.0) -> int:
        """LMCache's bytes per full chunk per TP rank: kv(2, or 1 for MLA) x layers x chunk x heads/rank x
        head_dim x dtype. MLA latents are replicated on every rank (not divided by TP)."""
        layers = self.get("layers")
        if self.attention == "mla":
            return int(layers * chunk_size * (self.get("kv_lora_rank") + self.get("rope_dim")) * dtype_bytes)
        heads_per_rank = max(1.0, self.get("kv_heads") / tp)
        return int(2 * layers * chunk_size * heads_per_rank * self.get("head_dim") * dtype_bytes)


@dataclass(frozen=True)
class Standin:
    pattern: str
    model: str
    source: str


def _parse_models(data: dict[str, Any], where: str) -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for key, t in (data.get("models") or {}).items():
        if not isinstance(t, dict):
            raise CatalogError(f"{where}: models.{key} must be a table")
        att = t.get("attention")
        if att not in ("gqa", "mla"):
            raise CatalogError(f"{where}: models.{key}.attention must be 'gqa' or 'mla', got {att!r}")
        fields = sourced_fields(t, f"{where}: models.{key}")
        for need in ("layers", "params_total", "params_active"):
            if need not in fields:
                raise CatalogError(f"{where}: models.{key} needs {need!r}")
        need_kv = ("kv_lora_rank", "rope_dim") if att == "mla" else ("kv_heads", "head_dim")
        for need in need_kv:
            if need not in fields:
                raise CatalogError(f"{where}: models.{key} ({att}) needs {need!r}")
        formats: dict[str, dict[str, Sourced]] = {}
        for prec, ft in (t.get("formats") or {}).items():
            if not isinstance(ft, dict):
                raise CatalogError(f"{where}: models.{key}.formats.{prec} must be a table")
            formats[str(prec)] = sourced_fields(ft, f"{where}: models.{key}.formats.{prec}")
        out[key] = ModelSpec(key, str(t.get("display", key)), att, fields, [str(a) for a in t.get("aliases", [])],
                             str(t.get("native_precision", "")), formats)
    return out


@lru_cache(maxsize=16)
def _load(extra: tuple[str, ...]) -> tuple[dict[str, ModelSpec], tuple[Standin, ...]]:
    models: dict[str, ModelSpec] = {}
    standins: list[Standin] = []
    # user files come first for stand-ins (they override the shipped rules) and last for models
    for path in (*map(Path, reversed(extra)), CATALOG_DIR / "models.toml"):
        data = read_toml(path)
        for key, spec in _parse_models(data, str(path)).items():
            models.setdefault(key, spec)
        for s in data.get("standins", []) or []:
            if not all(isinstance(s.get(k), str) for k in ("pattern", "model", "source")):
                raise CatalogError(f"{path}: each [[standins]] needs string pattern, model and source")
            standins.append(Standin(s["pattern"], s["model"], s["source"]))
    return models, tuple(standins)


def models(extra_files: tuple[str, ...] = ()) -> dict[str, ModelSpec]:
    """All catalog models by key (shipped file plus ``extra_files``)."""
    return _load(tuple(extra_files))[0]


def find_model(name: str, extra_files: tuple[str, ...] = ()) -> ModelSpec | None:
    """Look a model up by key or alias (case-insensitive); ``None`` when it is not in the catalog."""
    n = name.strip().lower()
    for m in models(extra_files).values():
        if n == m.key.lower() or n in (a.lower() for a in m.aliases):
            return m
    return None


def resolve_model(name: str | None, extra_files: tuple[str, ...] = (), strict: bool = False
                  ) -> tuple[ModelSpec, str | None]:
    """The catalog model to use for ``name``: itself when open and known, else its stand-in.

    Returns ``(model, note)`` where ``note`` explains a stand-in (``None`` when the model is in the catalog).
    With ``strict`` (a name the user typed), a name only the catch-all rule matches is an error, not a guess.
    """
    if name:
        m = find_model(name, extra_files)
        if m:
            return m, None
    mods, standins = _load(tuple(extra_files))
    low = (name or "").lower()
    for s in standins:
        if re.search(s.pattern, low):
            if strict and s.pattern in (".", ".*", ""):
                near = did_you_mean(name or "", [k for m in mods.values() for k in (m.key, *m.aliases)])
                raise CatalogError(f"unknown model {name!r}{near}: not in the catalog ({', '.join(sorted(mods))}) "
                                   "and not a known closed-model family (claude, gpt, gemini, ...)")
            if s.model not in mods:
                raise CatalogError(f"stand-in for {name!r} names unknown model {s.model!r}")
            return mods[s.model], f"{name or 'unknown model'} replayed as {mods[s.model].display} ({s.source})"
    raise CatalogError(f"no catalog model or stand-in for {name!r}")


def replayed_model(name: str | None, override: str | None, extra_files: tuple[str, ...] = ()
                   ) -> tuple[ModelSpec, str | None]:
    """The catalog model a call of ``name`` is replayed as, and the note that says so: ``override`` (``--model``)
    when given (a clear error when unknown), else :func:`resolve_model` (an unnamed model takes the catalog's
    catch-all stand-in, which says so)."""
    if override:
        m = find_model(override, extra_files)
        if m is None:
            raise CatalogError(f"unknown model {override!r} (catalog models: {', '.join(sorted(models(extra_files)))})")
        same = name and find_model(name, extra_files) is m
        return m, None if same else f"{name or 'unknown model'} replayed as {m.display} (--model)"
    return resolve_model(name or "unknown model", extra_files)

