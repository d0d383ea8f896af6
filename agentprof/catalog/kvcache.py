"""Serving settings as each framework's recipe deployed them: the KV-cache element size (``kv_cache.toml``:
FP8 where the recipe set it), the decode steps a new request waits for the scheduler and the frontend's
tokenization time per prompt token (``scheduling.toml``).

The device model sizes KV (capacity, bytes streamed per decode step, bytes moved between tiers) from the
model's per-token KV elements times this element size; a framework not listed stores BF16 and waits 0 steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np

from agentprof.catalog import CATALOG_DIR, CatalogError, read_toml

KV_PATH = CATALOG_DIR / "kv_cache.toml"
T = TypeVar("T")
DEFAULT_BYTES = 2.0
DEFAULT_SOURCE = "default: BF16 KV (the frameworks' auto KV dtype), no recipe says otherwise"


def engine(framework: str) -> str:
    """``dynamo-trt`` → ``trt``, ``sglang-disagg`` → ``sglang``: the serving engine under an orchestrator."""
    f = framework.lower()
    for base in ("trt", "sglang", "vllm", "atom"):
        if base in f:
            return base
    return f


def _sourced(e: object, where: str, field: str) -> tuple[float, str]:
    """``e[field]`` as (value, source): every catalog figure is ``{ value = <number>, source = "..." }``."""
    v = e.get(field) if isinstance(e, dict) else None
    if not isinstance(v, dict) or not isinstance(v.get("value"), (int, float)) or not v.get("source"):
        raise CatalogError(f"{where}.{field}: expected {{ value = <number>, source = \"...\" }}")
    return float(v["value"]), str(v["source"])


def _rows(path: Path, table: str, field: str,
          expect: Callable[[float], str | None] = lambda v: None) -> list[tuple[dict, str, float, str]]:
    """The ``[[table]]`` entries of ``path`` as (entry, where, value of ``field``, source); ``expect(value)`` names
    what was expected when the value is out of range (a clear error naming the entry), else ``None``."""
    out = []
    for i, e in enumerate(read_toml(path).get(table, [])):
        where = f"{path}: {table}[{i}]"
        val, src = _sourced(e, where, field)
        wanted = expect(val)
        if wanted:
            raise CatalogError(f"{where}.{field}: expected {wanted}, got {val:g}")
        out.append((e, where, val, src))
    return out


Key = tuple[str, str | None, str | None, str | None, str | None]
"""What a catalog entry is for: (framework, model, hardware, precision, tensor-parallel "tp<N>"), None = any."""


def _key(e: dict, where: str) -> Key:
    """The entry's :data:`Key` (framework and precision lower-cased); a malformed ``tensor_parallel`` is one
    :class:`CatalogError` naming the entry."""
    tp = e.get("tensor_parallel")
    if tp is not None and not (isinstance(tp, str) and tp.startswith("tp") and tp[2:].isdigit()):
        raise CatalogError(f"{where}.tensor_parallel: expected \"tp<N>\" (e.g. \"tp4\"), got {tp!r}")
    return (str(e["framework"]).lower(), e.get("model"), e.get("hardware"),
            str(e["precision"]).lower() if e.get("precision") else None, tp)


def _matches(key: Key, framework: str, model: str, hardware: str | None = None, precision: str | None = None,
             tp: int = 0) -> bool:
    """Whether an entry's :data:`Key` covers a deployment: its framework is the deployment's own (a stack launched
    by its own scripts) or its engine (dynamo-trt -> trt), and every other field it names is the deployment's."""
    fw, mk, hw, pr, t = key
    return (fw in (framework.lower(), engine(framework)) and mk in (None, model) and hw in (None, hardware)
            and pr in (None, precision.lower() if precision else None) and t in (None, f"tp{tp}"))


def _keyed(path: Path, table: str, field: str,
           expect: Callable[[float], str | None] = lambda v: None) -> tuple[tuple[Key, tuple[float, str]], ...]:
    """The ``[[table]]`` entries of ``path`` as (:data:`Key`, (value of ``field``, source)) (:func:`_rows`)."""
    return tuple((_key(e, where), (val, src)) for e, where, val, src in _rows(path, table, field, expect))


def _first(entries: tuple[tuple, ...], default: T, framework: str, model: str, hardware: str | None = None,
           precision: str | None = None, tp: int = 0, when: Callable[[tuple], bool] | None = None) -> T:
    """The last field of the first of ``entries`` (each a :data:`Key` first) that covers the deployment
    (:func:`_matches`) and meets ``when`` (a recipe branch's further condition: a concurrency, a setting), else
    ``default``."""
    for e in entries:
        if _matches(e[0], framework, model, hardware, precision, tp) and (when is None or when(e)):
            return e[-1]
    return default


def _conc_min(e: dict, where: str) -> float:
    """The concurrency from which a recipe branch applies (``conc_min``, sourced; 0 when the entry names none)."""
    return _sourced(e, where, "conc_min")[0] if "conc_min" in e else 0.0


@lru_cache(maxsize=1)
def _entries() -> tuple[tuple[Key, tuple[float, str]], ...]:
    return _keyed(KV_PATH, "kv_cache", "bytes", lambda v: None if v > 0 else "a positive number")


def kv_bytes(framework: str, model: str, hardware: str | None = None,
             precision: str | None = None) -> tuple[float, str]:
    """(bytes per KV element, source) for a model served by ``framework`` on ``hardware`` in weight format
    ``precision``: the first entry that covers it (:func:`_matches`; an entry naming a precision matches only
    that format: one engine's recipes may differ by it)."""
    return _first(_entries(), (DEFAULT_BYTES, DEFAULT_SOURCE), framework, model, hardware, precision)


SCHED_PATH = CATALOG_DIR / "scheduling.toml"


@lru_cache(maxsize=1)
def _wait_entries() -> tuple[tuple[Key, float, tuple[float, str]], ...]:
    return tuple((_key(e, where), _conc_min(e, where), (val, src))
                 for e, where, val, src in _rows(SCHED_PATH, "wait_steps", "steps"))


def wait_steps(framework: str, model: str, hardware: str | None = None, conc: float = 1.0,
               precision: str | None = None, tp: int = 0) -> tuple[float, str]:
    """(decode steps a new request waits for the scheduler on average, source) for ``framework`` at ``conc``; an
    entry naming a weight format or tensor-parallel size ("tp4") matches only that one (a recipe's branches)."""
    return _first(_wait_entries(), (0.0, "default: no scheduling interval in the recipe"), framework, model,
                  hardware, precision, tp, when=lambda e: conc >= e[1])


@lru_cache(maxsize=1)
def _ahead_entries() -> tuple[tuple[Key, tuple[float, str]], ...]:
    return _keyed(SCHED_PATH, "ahead", "steps", lambda v: None if v >= 0 else "a number of steps >= 0")


def ahead_steps(framework: str, model: str) -> tuple[float, str]:
    """(steps the engine's scheduler runs ahead of the accelerator, source): with an overlap or asynchronous
    scheduler the next step is already launched when a request arrives, so while others decode a new request
    waits for that step as well as the running one (``scheduling.toml [ahead]``; 0 where not listed)."""
    return _first(_ahead_entries(), (0.0, "default: the scheduler waits for each step (no overlap or asynchronous "
                                      "scheduling listed)"), framework, model)


@lru_cache(maxsize=1)
def _alone_entries() -> tuple[tuple[Key, tuple[float, str]], ...]:
    return _keyed(SCHED_PATH, "prefill_alone", "alone", lambda v: None if v in (0, 1) else "0 or 1")


def prefill_alone(framework: str, model: str) -> tuple[bool, str]:
    """(whether the engine runs prefill in its own forward pass while the running sequences wait, source):
    ``scheduling.toml [prefill_alone]``; unlisted engines mix prompt chunks into decode steps."""
    val, src = _first(_alone_entries(), (0.0, "default: chunked prefill rides the decode steps (mixed batches)"),
                      framework, model)
    return bool(val), src


class Budget(NamedTuple):
    """A recipe's prefill token budgets: ``tokens`` one step may hold (a long prompt is chunked to it), its
    ``source``, and ``batch``, the prompt tokens past which a pass takes no further waiting prompt (SGLang's
    ``--max-prefill-tokens`` [S77]; ``tokens`` unless the entry says otherwise). A disaggregated prefill server's
    ``--max-running-requests`` caps the prompts it holds at once: ``requests`` without data-parallel attention,
    ``requests_dp`` with it (SGLang divides it among the ranks); None where the recipe sets none."""

    tokens: float
    source: str
    batch: float
    requests: float | None = None
    requests_dp: float | None = None

    def prompts_per_rank(self, ranks: float, dp_attention: bool) -> float:
        """Prompts one scheduler of a prefill server holds at once (infinite where the recipe sets no cap): the
        server's cap over its data-parallel attention ranks, at least one."""
        cap = self.requests_dp if dp_attention else self.requests
        return math.inf if cap is None else max(math.floor(cap / max(ranks, 1.0)), 1.0)


@lru_cache(maxsize=1)
def _budget_entries() -> tuple[tuple[Key, str | None, float, Budget], ...]:
    out = []
    for e, where, val, src in _rows(SCHED_PATH, "budget", "tokens", lambda v: None if v >= 1 else "at least 1 token"):
        io = e.get("isl_osl")
        if io is not None and not (isinstance(io, str) and len(io.split("/")) == 2
                                   and all(x.isdigit() for x in io.split("/"))):
            raise CatalogError(f"{where}.isl_osl: expected \"<ISL>/<OSL>\" (e.g. \"8192/1024\"), got {io!r}")
        batch = _sourced(e, where, "batch")[0] if "batch" in e else val
        if not 1 <= batch <= val:
            raise CatalogError(f"{where}.batch: expected 1 to {val:g} tokens (at most the step's), got {batch:g}")
        caps = [_sourced(e, where, f)[0] if f in e else None for f in ("requests", "requests_dp")]
        for f, c in zip(("requests", "requests_dp"), caps, strict=True):
            if c is not None and c < 1:
                raise CatalogError(f"{where}.{f}: expected at least 1 request, got {c:g}")
        out.append((_key(e, where), io, _conc_min(e, where), Budget(val, src, batch, *caps)))
    return tuple(out)


def prefill_budget(framework: str, model: str, hardware: str | None = None, precision: str | None = None,
                   tp: int = 0, isl: float = 0.0, osl: float = 0.0, conc: float = 1.0) -> Budget | None:
    """The prefill token budgets the calibration runs' recipe set (``scheduling.toml [budget]``; an entry naming
    ``isl_osl`` or ``conc_min`` is that recipe branch); None where no recipe says, and the engine's estimate
    applies (:meth:`agentprof.catalog.serving.ServingCatalog.budget_tokens`)."""
    setting = f"{int(isl)}/{int(osl)}"
    return _first(_budget_entries(), None, framework, model, hardware, precision, tp,
                  when=lambda e: e[1] in (None, setting) and conc >= e[2])


@lru_cache(maxsize=1)
def _tokenize_entries() -> tuple[tuple[str | None, str | None, str | None, float, str, str | None], ...]:
    return tuple((str(e["framework"]).lower() if e.get("framework") else None,
                  str(e["model"]) if e.get("model") else None, e.get("hardware"),
                  val, src, str(e["host"]) if e.get("host") else None)
                 for e, _, val, src in _rows(SCHED_PATH, "tokenize", "s_per_token",
                                             lambda v: None if v >= 0 else "a non-negative number"))


def _tokenize_match(framework: str, model: str, hardware: str | None) -> tuple | None:
    eng = engine(framework)
    for fw, mk, hw, val, src, host in _tokenize_entries():
        if fw in (None, eng) and mk in (None, model) and (hw is None or hw == hardware):
            return val, src, host
    return None


def tokenize_s_per_token(framework: str, model: str, hardware: str | None = None) -> tuple[float, str]:
    """(seconds the serving frontend spends per prompt token before the scheduler sees the request, source):
    tokenizing the whole prompt, cached prefix included, on the host CPU; the first entry whose framework, model
    and hardware (each where given) match (as for the other tables here); 0 where the catalog lists none at all."""
    got = _tokenize_match(framework, model, hardware)
    if got is None:
        return 0.0, "default: no [[tokenize]] entry matches: the frontend's time is not charged"
    return got[0], got[1]


def tokenize_host(framework: str, model: str, hardware: str | None = None) -> str | None:
    """The host CPU (``hosts.toml`` key) the matching ``[[tokenize]]`` figure was measured on; ``None`` where the
    entry names none (then it counts as measured on the reference host, single-thread speed 1)."""
    got = _tokenize_match(framework, model, hardware)
    return got[2] if got else None


@lru_cache(maxsize=1)
def _collective_entries() -> tuple[tuple[str, str, str | None, float, str], ...]:
    return tuple((str(e["framework"]).lower(), str(e["model"]), e.get("hardware"), val, src)
                 for e, _, val, src in _rows(SCHED_PATH, "prefill_collectives", "exposed",
                                             lambda v: None if v in (0.0, 1.0) else "0 or 1"))


def prefill_collectives_exposed(framework: str, model: str, hardware: str | None = None) -> tuple[bool, str]:
    """(whether a disaggregated prefill worker's per-prompt collectives add to its time per prompt, source): true
    where the recipe runs its MoE all-to-all without overlapping it with other prompts' compute
    (``scheduling.toml [prefill_collectives]``); unlisted deployments keep them hidden (docs/DEVICE_MODEL.md §2.2)."""
    for fw, mk, hw, val, src in _collective_entries():
        if fw == framework.lower() and mk == model and (hw is None or hw == hardware):
            return bool(val), src
    return False, "default: the batched prompts' collectives overlap other prompts' compute"


@lru_cache(maxsize=1)
def _gemm_entries() -> tuple[tuple[Key, tuple[float, str]], ...]:
    return _keyed(SCHED_PATH, "prefill_gemm", "time_ratio", lambda v: None if v > 0 else "a ratio > 0")


def prefill_gemm_ratio(framework: str, model: str, hardware: str, precision: str) -> tuple[float, str]:
    """(how many times longer the recipe's non-expert prefill GEMMs take than with the reference block-scale kernel,
    source): ``scheduling.toml [[prefill_gemm]]``, matched on the point's own framework only; 1 where unlisted."""
    for key, got in _gemm_entries():
        if key[0] == framework.lower() and _matches(key, framework, model, hardware, precision):
            return got
    return 1.0, "default: the recipe's non-expert GEMMs run a reference-class block-scale kernel"


@lru_cache(maxsize=1)
def _block_host_entries() -> tuple[tuple[str, str, str, float, float, str], ...]:
    out = []
    for e, where, blk, bsrc in _rows(SCHED_PATH, "block_host", "block_tokens"):
        val, src = _sourced(e, where, "s_per_block")
        if blk < 1 or val < 0:
            raise CatalogError(f"{where}: expected block_tokens >= 1 and s_per_block >= 0, got {blk:g} and {val:g}")
        out.append((str(e["framework"]).lower(), str(e["model"]), str(e["hardware"]).lower(), val / blk,
                    f"{val:g} s per block / {blk:g} token(s) per block; {src}; block size: {bsrc}"))
    return tuple(out)


def block_host_s_per_token(framework: str, model: str, hardware: str) -> tuple[float, str]:
    """(seconds of engine host time per prompt token, source): the KV-cache manager's per-block work (prefix lookup,
    allocation) over a prompt's blocks, where the recipe runs small blocks; 0 where nothing is listed."""
    eng = engine(framework)
    for fw, mk, hw, val, src in _block_host_entries():
        if fw in (framework.lower(), eng) and mk == model and hw == hardware:
            return val, src
    return 0.0, "default: no per-block host time listed (blocks of 16-64 tokens: negligible)"


@lru_cache(maxsize=1)
def _graph_entries() -> tuple[tuple[str, tuple[int, ...], str], ...]:
    out = []
    for i, e in enumerate(read_toml(SCHED_PATH).get("cuda_graphs", [])):
        where = f"{SCHED_PATH}: cuda_graphs[{i}]"
        v = e.get("sizes") if isinstance(e, dict) else None
        sizes = v.get("value") if isinstance(v, dict) else None
        if (not isinstance(sizes, list) or not sizes or not all(isinstance(x, int) and x > 0 for x in sizes)
                or sizes != sorted(set(sizes)) or not v.get("source")):
            raise CatalogError(f"{where}.sizes: expected {{ value = [increasing positive integers], source = \"...\" }}")
        out.append((str(e.get("framework", "")).lower(), tuple(sizes), str(v["source"])))
    return tuple(out)


def graph_sizes(framework: str) -> tuple[tuple[int, ...], str]:
    """(decode batch sizes the engine captures CUDA graphs at by default, source) from ``scheduling.toml
    [[cuda_graphs]]``; empty where none is listed (no padding modelled)."""
    eng = engine(framework)
    for fw, sizes, src in _graph_entries():
        if fw in (framework.lower(), eng):
            return sizes, src
    return (), "default: no captured batch sizes listed (a step runs at its own batch)"


def graph_batch(framework: str, batch: object) -> np.ndarray:
    """The batch a decode step's kernels run at: the engine's next captured CUDA-graph size at or above ``batch``
    (a batch between two captured sizes is padded up to the larger); a batch above the largest, or an engine with
    none listed, runs at its own size."""
    b = np.asarray(batch, dtype=float)
    sizes = np.asarray(graph_sizes(framework)[0], dtype=float)
    if not sizes.size:
        return b
    i = np.searchsorted(sizes, np.ceil(b - 1e-9), side="left")
    padded = sizes[np.minimum(i, sizes.size - 1)]
    return np.where((b > 0) & (i < sizes.size), np.maximum(padded, b), b)


MEMORY_PATH = CATALOG_DIR / "memory.toml"
MEMORY_BASES = ("total", "free")


@lru_cache(maxsize=1)
def _memory_entries() -> tuple[tuple[Key, tuple[float, str, str]], ...]:
    out = []
    for e, where, val, src in _rows(MEMORY_PATH, "memory", "fraction",
                                    lambda v: None if 0 < v <= 1 else "a fraction in (0, 1]"):
        basis = e.get("basis", "total")
        if basis not in MEMORY_BASES:
            raise CatalogError(f"{where}.basis: expected one of {', '.join(MEMORY_BASES)}, got {basis!r}")
        out.append((_key(e, where), (val, str(basis), src)))
    return tuple(out)


def memory_fraction(framework: str, model: str, hardware: str, precision: str = "", tp: int = 0
                    ) -> tuple[float, str, str]:
    """(fraction, basis, source): the share of the accelerator's memory the engine gives weights and KV as the
    recipe set it (``memory.toml``): basis ``total`` (KV = fraction x HBM - weights) or ``free`` (KV = fraction x
    (HBM - weights))."""
    return _first(_memory_entries(), (0.9, "total", "default: 0.9 of HBM (vLLM's long-standing "
                                            "gpu_memory_utilization), no engine entry"),
                  framework, model, hardware, precision, tp)


def usable_fraction(framework: str, model: str, hardware: str, hbm_bytes: float, weights_per_gpu: float,
                    precision: str = "", tp: int = 0) -> tuple[float, str]:
    """(mem_util, source): :func:`memory_fraction` as the share of HBM weights plus KV may take, whatever the basis
    (a ``free`` fraction f of what the weights leave is (f·(HBM − weights) + weights) / HBM of the whole)."""
    f, basis, src = memory_fraction(framework, model, hardware, precision, tp)
    if basis == "free" and hbm_bytes > 0:
        return (f * max(hbm_bytes - weights_per_gpu, 0.0) + weights_per_gpu) / hbm_bytes, f"{f:g} of free; {src}"
    return f, src
