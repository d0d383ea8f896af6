"""Placing intervals on rows: flat rows for the Gantt, properly nested lanes for trace-event threads.

Both are greedy and linear-logarithmic, so a corpus of hundreds of thousands of spans lays out in well under a
second.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def pack_rows(start: Sequence[float], end: Sequence[float], max_rows: int | None = None) -> list[int]:
    """Row of each interval such that no two intervals on one row overlap (interval partitioning).

    Uses the fewest rows possible for the set (the maximum number of intervals open at once); an interval
    goes to the free row with the lowest number, so the first row holds most of a sequential session. With
    ``max_rows``, an interval that finds every allowed row busy shares the row that frees up first (rows may
    then overlap; readers must not assume otherwise).
    """
    n = len(start)
    order = sorted(range(n), key=lambda i: (start[i], -end[i]))
    rows = [0] * n
    busy: list[tuple[float, int]] = []  # (end, row) of rows in use
    free: list[int] = []  # free rows, smallest first
    n_rows = 0
    for i in order:
        s = start[i]
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            r = heapq.heappop(free)
        elif max_rows is not None and n_rows >= max_rows:
            r_end, r = heapq.heappop(busy)
            rows[i] = r
            heapq.heappush(busy, (max(end[i], s, r_end), r))
            continue
        else:
            r = n_rows
            n_rows += 1
        rows[i] = r
        heapq.heappush(busy, (max(end[i], s), r))
    return rows


def pack_nested_lanes(start: Sequence[float], end: Sequence[float], depth: Sequence[int] | None = None) -> list[int]:
    """Lane of each interval such that, within a lane, any two intervals are disjoint or one contains the other.

    This is what the Chrome trace-event format needs for complete ("X") events on one thread: a slice that
    starts inside another must also end inside it. ``depth`` (nesting level, parents first) breaks ties
    between intervals that start at the same instant.
    """
    n = len(start)
    dep = depth if depth is not None else [0] * n
    order = sorted(range(n), key=lambda i: (start[i], -end[i], dep[i]))
    lanes = [0] * n
    stacks: list[list[float]] = []  # per lane: ends of the intervals still open, innermost last
    for i in order:
        s, e = start[i], max(end[i], start[i])
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or e <= stack[-1]:
                stack.append(e)
                lanes[i] = lane
                break
        else:
            stacks.append([e])
            lanes[i] = len(stacks) - 1
    return lanes
