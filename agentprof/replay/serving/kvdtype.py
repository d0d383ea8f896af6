"""The KV-cache element type a serving simulation stores: as deployed (``auto``), BF16 or FP8.

``auto`` keeps the catalog's as-deployed figure (``kv_cache.toml``: FP8 where a recipe or a logged run set
``--kv-cache-dtype fp8``, else BF16, the engines' own ``auto`` for BF16 activations). ``fp8`` is the deployment
lever an operator flips for long agent contexts: one byte per latent element halves the tokens' bytes in HBM, in
each decode step's KV reads and over the host link. Supported for MLA on NVIDIA Hopper and Blackwell [S-KV8a,
S-KV8b] and run by the AgentX Kimi K2.5 vLLM servers on B200 and MI355X [S47]; Jalapeño's software is undisclosed
(estimate: as the others). Attention FLOPs stay priced as before (prefill attention at the fitted efficiency of the
BF16 peak): the lever moves bytes, not the compute. Docs: docs/DEVICE_MODEL.md §10.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agentprof.errors import AgentprofError
from agentprof.replay.serving.config import KV_DTYPES, check_choice

if TYPE_CHECKING:
    from agentprof.replay.systems import Resolved

_BYTES = {"bf16": 2.0, "fp8": 1.0}
_FP8_SOURCE = {
    "nvidia": "FP8 KV for MLA on Hopper and Blackwell: vLLM's FLASHMLA backend (kv-cache dtypes auto/fp8/fp8_e4m3, "
              "compute capability 9 and 10) [S-KV8a]; TensorRT-LLM DeepSeek-V3 'FP8 KV Cache and MLA' on Hopper "
              "and Blackwell, GSM8k within 1 % [S-KV8b]",
    "amd": "FP8 KV as the AgentX Kimi K2.5 vLLM runs on MI355X set it (--kv-cache-dtype fp8) [S47]",
}


def fp8_source(vendor: str) -> str:
    """Why FP8 KV is a real option on this vendor's accelerators (or that it is an estimate)."""
    return _FP8_SOURCE.get(vendor, f"estimate: FP8 KV on {vendor} hardware assumed as on NVIDIA and AMD "
                                   "(the serving software is undisclosed)")


def with_kv_dtype(r: Resolved, name: str) -> Resolved:
    """``r`` storing its KV as ``name`` (``auto``: as resolved, the catalog's as-deployed figure)."""
    check_choice("KV dtype", name, KV_DTYPES)
    if name == "auto":
        return r
    b = _BYTES[name]
    if b == r.dep.kv_dtype_bytes:
        return replace(r, kv_source=f"{name} as asked (--kv-dtype {name}), the same as deployed: {r.kv_source}")
    dep = replace(r.dep, kv_dtype_bytes=b)
    if dep.kv_dtype_bytes != b:  # the weight format pins its own KV element size
        raise AgentprofError(f"--kv-dtype {name}: {r.model.display} in {r.precision} stores its KV as "
                             f"{dep.kv_dtype_bytes:g} B per element")
    src = fp8_source(r.system.accelerator.vendor) if name == "fp8" else "BF16: the engines' default KV dtype"
    return replace(r, dep=dep, kv_source=f"{name} as asked (--kv-dtype {name}; deployed: {r.kv_source}); {src}")


def carry_kv(new: Resolved, old: Resolved) -> Resolved:
    """``new`` (a re-resolution of ``old``'s model in another layout) storing ``old``'s KV element size."""
    if new.dep.kv_dtype_bytes == old.dep.kv_dtype_bytes:
        return new
    return replace(new, dep=replace(new.dep, kv_dtype_bytes=old.dep.kv_dtype_bytes), kv_source=old.kv_source)


def kv_dtype_name(r: Resolved) -> str:
    """``fp8`` / ``bf16`` (or the element size) of the KV ``r`` stores."""
    return {1.0: "fp8", 2.0: "bf16"}.get(float(r.dep.kv_dtype_bytes), f"{r.dep.kv_dtype_bytes:g} B")
