"""Disaggregated serving: a prefill pool, a decode pool and the link the prompt's KV crosses between them.

Prefill workers (``n_prefill`` instances of the prefill deployment) batch prompts under the framework's token
budget; a finished prompt's KV moves to a decode worker (``n_decode`` instances of the decode deployment) over
the link the layout implies, each receiving accelerator taking its share of the sequence's KV at the link's
bandwidth: the scale-up link (NVLink) when a prefill and a decode instance fit in one scale-up domain together
(GB200 NVL72), else the scale-out NIC per accelerator (two 8-GPU nodes). Both are catalog figures
(``accelerators.toml`` ``scaleup_bw``, ``scaleup_domain``, ``scaleout_bw``).

The per-prefill overhead ``t_req`` (fitted) is paid once per request at the hand-off, pipelined with the pool's
GPU work rather than holding a prefill worker: the serving equations count it in a disaggregated request's
TTFT but size the prefill pool's throughput by its prompts' compute or KV traffic alone
(:func:`agentprof.replay.equations.times`, ``W``); the prefill workers' steps are priced without it. For the same reason a prefill step that batches several
prompts exposes one prompt's share of the collectives, the rest overlapping the other prompts' compute (as
two-batch overlap does); a prompt alone pays all of them, as in the equations' single-request TTFT.

A decode worker runs at most its recipe's decode slots at once (``decode_slots.toml``, the engine's max batch
size x attention ranks: :func:`agentprof.catalog.decodeslots.decode_slots`), as the serving equations bound its
running batch (docs/DEVICE_MODEL.md §2.2): handed-off requests beyond them wait in the worker's queue, their
first token with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentprof.replay.costmodel import Deployment
from agentprof.replay.serving.stepcost import StepCost


def transfer_link(pre: Deployment, dec: Deployment) -> tuple[str, float]:
    """(link name, bytes/s per accelerator) the prompt's KV crosses from a prefill to a decode instance."""
    if pre.gpus + dec.gpus <= dec.scaleup_domain:
        return "scale-up", dec.scaleup_bw
    return "scale-out", min(dec.scaleout_bw, pre.scaleout_bw)


def transfer_bytes_per_gpu(dec: Deployment, tokens: float) -> float:
    """Bytes one receiving accelerator takes for a sequence of ``tokens``: its shard of the KV (GQA heads split
    over the ranks; an MLA latent goes to every TP rank); with data-parallel attention the whole sequence lives
    on one attention rank, which takes all of it."""
    div = 1.0 if dec.dp_attention else dec.kv_divisor
    return float(dec.kv_seq_bytes(tokens)) / div


@dataclass
class Pools:
    """The prefill side of a disaggregated deployment and the hand-off to its decode side (whose step costs
    are the engine's own ``cost``)."""

    prefill: StepCost
    n_prefill: int
    n_decode: int
    decode_dep: Deployment
    link: str
    link_bw: float
    t_req_s: float = 0.0
    max_running: float = math.inf
    """Requests one decode worker runs at once (admitted, first token pending or decoding), in simulated
    requests: the recipe's decode slots over the workers and the copies each request stands for."""

    @classmethod
    def of(cls, prefill: StepCost, decode: StepCost, n_prefill: int, n_decode: int,
           link_bw: float | None = None, decode_slots: float | None = None, overlap_comm: bool = True) -> Pools:
        """Pools over the link the layout implies (:func:`transfer_link`), or ``link_bw`` bytes/s when given.
        ``prefill``'s per-prefill overhead moves to the hand-off (its steps are priced without it).
        ``decode_slots``: sequences all decode workers run at once (None: bounded by their KV pool only).
        ``overlap_comm``: a prefill step batching several prompts hides all but one prompt's collectives behind
        the others' compute; False where the recipe runs its all-to-all without such overlap, so each prompt pays
        its own (``scheduling.toml [prefill_collectives]``, as the equations' pool work ``W``)."""
        name, bw = transfer_link(prefill.dep, decode.dep)
        if link_bw is not None:
            name, bw = "given", link_bw
        t_req = float(prefill.p.t_req_s)
        steps = StepCost(prefill.dep, prefill.p.with_(t_req_s=0.0), 1.0, prefill.host_link_bw, prefill.disk_bw,
                         prefill.copies)
        steps.pool_tokens = prefill.pool_tokens
        steps.overlap_comm = overlap_comm
        n_dec = max(int(n_decode), 1)
        most = math.inf if decode_slots is None else max(float(decode_slots) / n_dec / decode.copies, 1.0)
        return cls(steps, max(int(n_prefill), 1), n_dec, decode.dep, name, bw, t_req, most)

    def handoff_s(self, tokens: float) -> float:
        """From a finished prefill to the decode pool: the per-prefill overhead and the KV transfer."""
        return self.t_req_s + self.transfer_s(tokens)

    def transfer_s(self, tokens: float) -> float:
        """Seconds to move a sequence's KV of ``tokens`` from the prefill to the decode pool."""
        return transfer_bytes_per_gpu(self.decode_dep, tokens) / self.link_bw
