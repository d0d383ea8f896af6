"""Latencies for the loopback model server drawn from the replay stage's calibrated device cost model.

The demo's "model" answers from a script, but how long it takes is what a serving system from the catalog
would take for the same request: time to first token from the prompt's uncached tokens (prefill attending to
the cached prefix, which the server's simulated prompt cache reports), then one decode step per further
output token, at the chosen concurrency. The same model and system the replay stage uses, so replaying the
captured run on the serving system should give back roughly the recorded model time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentprof.demo.model_server import Latency, ModelRequest

DEFAULT_SYSTEM = "h200+x86"
"""A GPU + x86 host system, the common deployment today."""
DEFAULT_MODEL = "gpt-oss-120b"
"""An open model that serves coding agents and is calibrated on every GPU family in the catalog."""


@dataclass
class DeviceLatency:
    """``ModelServer`` latency model: ``(request, prompt, cached, output tokens) -> Latency`` on one system.

    Raises :class:`agentprof.catalog.CatalogError` (an ``AgentprofError``) when the system or model is unknown
    or the model does not fit there.
    """

    system: str = DEFAULT_SYSTEM
    model: str = DEFAULT_MODEL
    concurrency: int = 1
    scale: float = 1.0
    """Multiplies every latency (below 1: quicker repeat runs, e.g. for ``agentprof diff`` tests)."""

    def __post_init__(self) -> None:
        from agentprof.catalog import CatalogError, find_model
        from agentprof.catalog.hardware import load_catalog
        from agentprof.replay.systems import resolve

        cat = load_catalog()
        spec = find_model(self.model)
        if spec is None:
            raise CatalogError(f"unknown model {self.model!r} (catalog models: {', '.join(sorted(cat.models))})")
        if self.concurrency < 1:
            raise CatalogError(f"concurrency must be at least 1, got {self.concurrency}")
        if not self.scale > 0:
            raise CatalogError(f"latency scale must be positive, got {self.scale}")
        self._resolved = resolve(cat.system(self.system), spec, cat)

    @property
    def display(self) -> str:
        """A few words: model, system and its deployment (where the parameters come from: :attr:`calibration`)."""
        r = self._resolved
        return (f"{r.model.display} on {r.system.key} ({r.dep.gpus} accelerators, {r.precision}, {r.framework})"
                + (f", latencies scaled by {self.scale:g}" if self.scale != 1 else ""))

    @property
    def short(self) -> str:
        """``GPT-OSS 120B with h200+x86 latencies``."""
        return f"{self._resolved.model.display} with {self._resolved.system.key} latencies"

    @property
    def calibration(self) -> str:
        return self._resolved.calibration

    def times(self, prompt_tokens: int, cached_tokens: int, output_tokens: int) -> tuple[float, float]:
        """(time to first token, time per further output token) in seconds."""
        from agentprof.replay.costmodel import call_times

        r = self._resolved
        out = max(int(output_tokens), 1)
        t = call_times(r.dep, r.params, np.array([float(max(prompt_tokens, 1))]),
                       np.array([float(min(cached_tokens, prompt_tokens))]), np.array([float(out)]),
                       self.concurrency, 0.0, r.system.mem_util)
        ttft = float(t.ttft_s[0])
        per_token = float(t.decode_s[0]) / (out - 1) if out > 1 else 0.0
        return ttft * self.scale, per_token * self.scale

    def __call__(self, req: ModelRequest, prompt_tokens: int, cached_tokens: int, output_tokens: int) -> Latency:
        ttft, per_token = self.times(prompt_tokens, cached_tokens, output_tokens)
        return Latency(ttft_s=ttft, per_token_s=per_token)
