"""What a trace (or a stage's result) lacks, said in plain words so the report explains an empty panel
instead of breaking or showing zeros that were never measured."""

from __future__ import annotations

from typing import Any


def trace_gaps(fig: dict[str, Any]) -> list[str]:
    """Sentences about missing timings, usage, cache reads and prompt hashes, from :func:`headline.trace_figures`."""
    out: list[str] = []
    spans, untimed = fig.get("spans", 0), fig.get("untimed_spans", 0)
    calls = fig.get("model_calls", 0)
    if spans == 0:
        return ["The trace has no spans at all."]
    if untimed == spans:
        out.append("No span has usable start and end times, so the timeline, the time split and the slowest lists "
                   "are empty; counts and tokens are still shown.")
    elif untimed:
        out.append(f"{untimed:,} of {spans:,} spans have no usable times; they are left out of the timeline and the "
                   "slowest lists.")
    if fig.get("derived_spans"):
        out.append(f"{fig['derived_spans']:,} spans have times inferred from neighbouring records (drawn faded in "
                   "the timeline), not measured.")
    if calls == 0:
        out.append("No model calls were recorded: prompt redundancy, the cache simulation and the device what-if "
                   "need them.")
        return out
    usage = fig.get("calls_with_usage", 0)
    if usage == 0:
        out.append("No model call reports provider token usage: token totals and the provider cache read share "
                   "are unknown (not zero).")
    elif usage < calls:
        out.append(f"{calls - usage:,} of {calls:,} model calls report no token usage; totals cover the other "
                   f"{usage:,}.")
    if usage and fig.get("calls_with_cache_reads", 0) == 0:
        out.append("The provider reported no cache reads for any call: the provider-cached share is unknown "
                   "(not zero).")
    hashed = fig.get("calls_with_hashes", 0)
    if hashed == 0:
        out.append("No model call carries prompt block hashes (the prompts were not recorded or not tokenized): "
                   "prefix redundancy and the cache simulation need them. Capture with agentprof, or import a "
                   "source that keeps the prompts.")
    elif hashed < calls:
        out.append(f"{calls - hashed:,} of {calls:,} model calls have no prompt block hashes and are left out "
                   "of the redundancy figures.")
    return out
