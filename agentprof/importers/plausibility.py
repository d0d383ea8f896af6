"""How long a model call whose start an importer derived can plausibly have taken, and what to do with the rest.

A derived start is the log's last record before the response (a tool result, a user message, the previous
call's end). When nothing was logged for a while before the response (the user away, an approval pending, a
machine asleep), that record is far older than the request and the call would swallow the gap. The rule
(``docs/IMPORTING.md``, "Plausibility of derived durations"): a derived call lasts at most
:func:`plausible_max_s` of its output tokens, and never across a silence of ``IDLE_GAP_S`` between the records
inside it; the time cut off its start becomes an ``idle`` wait when it reaches ``IDLE_GAP_S`` (nothing shows
what filled it), else an ``orchestration`` span marked unattributed, each with its evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentprof.trace import waits

MIN_DECODE_TOKENS_PER_S = 5.0
"""The slowest decode a call is credited with: well under the slowest served rates measured for hosted
models (roughly 20-30 tokens/s for large reasoning models under load), so only gross excess is cut."""
MAX_TTFT_S = 120.0
"""The longest queueing plus prefill credited to one call (a cold 200K-token prompt on a busy endpoint)."""
MAX_UNKNOWN_OUTPUT_S = 2 * waits.IDLE_GAP_S
"""A derived call whose output token count the log does not give lasts at most this long (600 s)."""


def plausible_max_s(output_tokens: int | None) -> float:
    """The longest a call producing ``output_tokens`` (None: unknown) plausibly took."""
    if output_tokens is None or output_tokens < 0:
        return MAX_UNKNOWN_OUTPUT_S
    return MAX_TTFT_S + output_tokens / MIN_DECODE_TOKENS_PER_S


@dataclass(frozen=True)
class Clip:
    """A derived call's start moved later: ``new_start_ns``, and why (``rule``, the evidence in ``detail``)."""

    new_start_ns: int
    rule: str
    detail: str


def clip(start_ns: int, end_ns: int, output_tokens: int | None,
         inner_ns: Sequence[int] = ()) -> Clip | None:
    """Where a derived call ``[start_ns, end_ns]`` plausibly started, if later than ``start_ns``.

    ``inner_ns`` are the times of the call's own records (its output items): a silence of at least
    ``IDLE_GAP_S`` between the start and them, or between them, means the request went out after it.
    """
    if not -(1 << 62) < end_ns - start_ns < 1 << 62:  # ends out of any range: the span builder reports them
        return None
    cut: Clip | None = None
    idle_ns = int(waits.IDLE_GAP_S * 1e9)
    prev = start_ns
    for t in sorted(x for x in inner_ns if start_ns <= x <= end_ns):
        if t - prev >= idle_ns:
            cut = Clip(t, "idle_gap", f"no record for {(t - prev) / 1e9:.0f} s before the response's output item "
                       f"at +{(t - start_ns) / 1e9:.0f} s (idle gap threshold {waits.IDLE_GAP_S:g} s)")
        prev = t
    begin = cut.new_start_ns if cut is not None else start_ns
    limit = plausible_max_s(output_tokens)
    if (end_ns - begin) / 1e9 > limit:
        tokens = "an unknown number of" if output_tokens is None else f"{output_tokens:,}"
        cut = Clip(end_ns - int(limit * 1e9), "too_long",
                   f"{(end_ns - start_ns) / 1e9:.0f} s derived for {tokens} output tokens; at most {limit:.0f} s "
                   f"is plausible (TTFT {MAX_TTFT_S:g} s + {MIN_DECODE_TOKENS_PER_S:g} tokens/s)")
    if cut is not None and cut.new_start_ns <= start_ns:
        return None
    return cut
