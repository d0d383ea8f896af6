"""The demo model's behaviour: what a coding model would answer at each step of the bundled bug fix.

The loopback server calls :func:`next_turn` with the request's messages; the step is read from the
conversation itself (how many assistant turns it holds), so the same agent code drives it as it would a
real model. Text is written to look like a real model's reasoning, with realistic lengths.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentprof.demo.sample_repo import FILES

_BUGGY = "    return ordered[mid]  # BUG (planted for the demo): even-length input needs the mean of the two middles\n"
_FIXED = ("    if len(ordered) % 2:\n"
          "        return ordered[mid]\n"
          "    return (ordered[mid - 1] + ordered[mid]) / 2\n")
assert _BUGGY in FILES["calc/stats.py"]


@dataclass
class Turn:
    """One model response: assistant text and zero or more tool calls ``(name, arguments)``."""

    text: str
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def tool_calls_json(self) -> list[tuple[str, str]]:
        return [(name, json.dumps(args)) for name, args in self.tool_calls]


PLAN: list[Turn] = [
    Turn("I'll start by looking at the repository layout and the existing tests, so I know what the expected "
         "behaviour is before touching any code.",
         [("list_files", {}), ("read_file", {"path": "tests/test_stats.py"})]),
    Turn("There are five tests covering mean, median, percentile and the JSON summary. Let me run them to see "
         "which ones fail and how.",
         [("run_tests", {})]),
    Turn("Two tests fail: `test_median_even` and `test_summary_is_json`, both on even-length input where the "
         "expected median is 2.5 but we return 3. The summary test fails only because it calls `median`. Let me "
         "read the implementation and check whether anything else calls `median`.",
         [("read_file", {"path": "calc/stats.py"}), ("search", {"pattern": r"median\("})]),
    Turn("The bug is clear: for an even number of values `median` returns the upper of the two middle elements "
         "instead of their mean. `summarize` and the package export are the only other users, so fixing "
         "`median` fixes both failures. I'll make the minimal change.",
         [("edit_file", {"path": "calc/stats.py", "old": _BUGGY, "new": _FIXED})]),
    Turn("Now I'll run the whole test suite again to confirm the fix and check for regressions.",
         [("run_tests", {})]),
    Turn("All five tests pass.\n\nSummary of the change in `calc/stats.py`: `median` returned `ordered[mid]` for "
         "every input, which is the upper middle element when the list has an even length. It now returns the "
         "mean of the two middle elements for even lengths and the middle element for odd lengths. This fixes "
         "`test_median_even` and `test_summary_is_json` (which depends on `median`); no other code needed to "
         "change."),
]


def step_of(messages: Sequence[dict[str, Any]]) -> int:
    """How many assistant turns the conversation already holds: the index of the next turn."""
    return sum(1 for m in messages if m.get("role") == "assistant")


def next_turn(messages: Sequence[dict[str, Any]]) -> Turn:
    """The model's next response for a conversation with the demo agent."""
    i = step_of(messages)
    return PLAN[min(i, len(PLAN) - 1)]
