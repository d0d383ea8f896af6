"""Row and lane placement: no overlaps on a Gantt row, proper nesting on a trace-event thread."""

from __future__ import annotations

import random

from agentprof.report.lanes import pack_nested_lanes, pack_rows


def _random_intervals(n: int, seed: int) -> tuple[list[int], list[int]]:
    rnd = random.Random(seed)
    starts = [rnd.randrange(0, 10_000) for _ in range(n)]
    ends = [s + rnd.randrange(0, 800) for s in starts]
    return starts, ends


def _max_open(starts: list[int], ends: list[int]) -> int:
    events = sorted([(s, 1) for s, e in zip(starts, ends, strict=True) if e > s]
                    + [(e, -1) for s, e in zip(starts, ends, strict=True) if e > s])
    best = cur = 0
    for _, d in events:  # ends sort before starts at the same instant (-1 < 1): touching is not overlapping
        cur += d
        best = max(best, cur)
    return best


def test_pack_rows_never_overlaps_and_uses_the_fewest_rows():
    for seed in range(5):
        s, e = _random_intervals(400, seed)
        rows = pack_rows(s, e)
        by_row: dict[int, list[tuple[int, int]]] = {}
        for i, r in enumerate(rows):
            by_row.setdefault(r, []).append((s[i], e[i]))
        for ivs in by_row.values():
            ivs.sort()
            for (_, e1), (s2, _) in zip(ivs, ivs[1:], strict=False):
                assert s2 >= e1
        # interval partitioning is optimal: as many rows as intervals open at once (zero-length ones aside)
        assert len(by_row) <= max(1, _max_open(s, e)) + 1


def test_pack_rows_sequential_spans_share_the_first_row():
    s = [0, 10, 20, 30]
    e = [10, 20, 30, 40]
    assert pack_rows(s, e) == [0, 0, 0, 0]
    assert pack_rows([0, 5], [10, 8]) == [0, 1]


def test_pack_rows_cap_shares_the_row_that_frees_first():
    s = [0, 1, 2, 3]
    e = [100, 50, 70, 80]
    rows = pack_rows(s, e, max_rows=2)
    assert max(rows) == 1
    assert rows[:2] == [0, 1]
    assert rows[2] == 1  # row 1 (ends at 50) frees before row 0 (ends at 100)


def test_pack_nested_lanes_gives_proper_nesting_per_lane():
    for seed in range(5):
        s, e = _random_intervals(500, seed)
        lanes = pack_nested_lanes(s, e)
        by_lane: dict[int, list[tuple[int, int]]] = {}
        for i, lane in enumerate(lanes):
            by_lane.setdefault(lane, []).append((s[i], e[i]))
        for ivs in by_lane.values():
            for a in range(len(ivs)):
                for b in range(a + 1, len(ivs)):
                    (s1, e1), (s2, e2) = ivs[a], ivs[b]
                    disjoint = e1 <= s2 or e2 <= s1
                    nested = (s1 <= s2 and e2 <= e1) or (s2 <= s1 and e1 <= e2)
                    assert disjoint or nested, (ivs[a], ivs[b])


def test_pack_nested_lanes_keeps_children_with_their_parent():
    # a root, two sequential children and one child overlapping the second: that one needs its own lane
    s = [0, 10, 50, 60]
    e = [100, 40, 90, 95]
    lanes = pack_nested_lanes(s, e, depth=[0, 1, 1, 1])
    assert lanes[0] == lanes[1] == lanes[2] == 0
    assert lanes[3] == 1
