"""Many agent sessions on one serving system: a discrete-event simulation with a shared KV cache.

``sessions`` (closed loops of recorded calls), ``stepcost`` (the one adapter to the device cost model),
``cache`` (HBM + CPU + disk tiers), ``scheduler`` (continuous batching, chunked prefill, KV admission,
preemption, replicas and routing), ``pools`` (disaggregated prefill and decode pools and the KV hand-off
between them), ``dpattention`` (the attention layout and a DP rank's costs), ``kvdtype`` (the KV element type),
``sizing`` (instances of a tp=fit system), ``config`` (the settings); ``simulate`` drives one system's
configuration through the steps ``overflow``, ``deployment``, ``layout``, ``run``, ``metrics`` (the ``serving``
object), ``why``, and ``levers`` (what would bring a slow run to seconds); ``capacity`` (the largest concurrency
that meets an SLO), ``sweep`` (the report's panel), ``benchpoint`` (InferenceX points as a special case).
"""

from agentprof.replay.serving.sessions import SessionPlan, build_plan
from agentprof.replay.serving.simulate import ServingConfig, ServingRun, simulate

__all__ = ["ServingConfig", "ServingRun", "SessionPlan", "build_plan", "simulate"]
