"""Many agent sessions on one serving system: a discrete-event simulation with a shared KV cache.

``sessions`` (closed loops of recorded calls), ``stepcost`` (the one adapter to the device cost model),
``cache`` (HBM + CPU + disk tiers), ``scheduler`` (continuous batching, chunked prefill, KV admission,
preemption, replicas and routing), ``pools`` (disaggregated prefill and decode pools and the KV hand-off
between them), ``dpattention`` (the attention layout and a DP rank's costs), ``kvdtype`` (the KV element type),
``sizing`` (instances of a tp=fit system), ``levers`` (what would bring a slow run to seconds), ``metrics`` (the
``serving`` object), ``simulate`` (one system),
``capacity`` (the largest concurrency that meets an SLO), ``benchpoint`` (InferenceX points as a special case).
"""

from agentprof.replay.serving.sessions import SessionPlan, build_plan
from agentprof.replay.serving.simulate import ServingConfig, ServingRun, simulate

__all__ = ["ServingConfig", "ServingRun", "SessionPlan", "build_plan", "simulate"]
