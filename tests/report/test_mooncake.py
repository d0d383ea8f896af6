"""Mooncake JSONL export: AIPerf's shape rules, time gaps, and that equal prompt prefixes give equal leading
hash_ids (checked against hashes computed in the test and against the raw kv-cache-tester hash_ids)."""

from __future__ import annotations

import json
import random

import pytest

from agentprof.errors import AgentprofError
from agentprof.report.mooncake import to_mooncake, write_mooncake
from agentprof.trace.hashing import chain_hashes, common_prefix_blocks

from .report_support import KV_FOLDER, SAMPLES, SEC, T0, make_trace, span


def _call(i: int, tokens: list[int], start_s: float, out: int | None = 50, hashed: bool = True) -> dict:
    attrs = {"gen_ai.usage.input_tokens": len(tokens)}
    if out is not None:
        attrs["gen_ai.usage.output_tokens"] = out
    if hashed:
        attrs["agentprof.prompt.block_hashes"] = chain_hashes(tokens, 64)
        attrs["agentprof.prompt.tokens"] = len(tokens)
    s = T0 + int(start_s * SEC)
    return span("s", f"m{i}", "a", "model", "chat m", s, s + SEC, **attrs)


def _check_aiperf_shape(records: list[dict], block: int = 512) -> None:
    seen = -1
    for r in records:
        assert set(r) == {"timestamp", "input_length", "output_length", "hash_ids"}
        assert isinstance(r["timestamp"], int) and r["timestamp"] >= 0
        # AIPerf: the last block holds input_length - (len(hash_ids) - 1) * block tokens, in (0, block]
        tail = r["input_length"] - (len(r["hash_ids"]) - 1) * block
        assert 0 < tail <= block
        for h in r["hash_ids"]:  # small consecutive integers, numbered in first-seen order
            assert h <= seen + 1
            seen = max(seen, h)
    assert [r["timestamp"] for r in records] == sorted(r["timestamp"] for r in records)


def test_equal_prefixes_give_equal_leading_hash_ids():
    rnd = random.Random(7)
    a = [rnd.randrange(100_000) for _ in range(5000)]
    b = a[:3000] + [rnd.randrange(100_000) for _ in range(2500)]  # shares 3000 tokens: 5 full 512-blocks
    c = a[:5000] + [rnd.randrange(100_000) for _ in range(1000)]  # extends a
    recs = [span("s", "a", None, "agent", "invoke_agent x", T0, T0 + 100 * SEC),
            _call(0, a, 0), _call(1, b, 10.5), _call(2, c, 42.25)]
    records, stats = to_mooncake(make_trace(recs))
    _check_aiperf_shape(records)
    ra, rb, rc = records
    assert [r["input_length"] for r in records] == [5000, 5500, 6000]
    assert [r["timestamp"] for r in records] == [0, 10500, 42250]  # gaps (tool time, waits) kept in ms
    assert common_prefix_blocks(ra["hash_ids"], rb["hash_ids"]) == 3000 // 512
    assert common_prefix_blocks(ra["hash_ids"], rc["hash_ids"]) == 5000 // 512  # a's partial tail is not shared
    assert len(ra["hash_ids"]) == -(-5000 // 512)
    assert stats.requests == 3 and stats.unique_blocks == max(max(r["hash_ids"]) for r in records) + 1


def test_calls_without_hashes_or_output_get_fresh_ids_and_are_counted():
    rnd = random.Random(3)
    a = [rnd.randrange(1000) for _ in range(1100)]
    recs = [span("s", "a", None, "agent", "invoke_agent x", T0, T0 + 100 * SEC),
            _call(0, a, 0), _call(1, a, 1, hashed=False), _call(2, a, 2, out=None)]
    records, stats = to_mooncake(make_trace(recs))
    _check_aiperf_shape(records)
    assert stats.calls_without_hashes == 1 and stats.calls_without_output == 1
    assert set(records[1]["hash_ids"]).isdisjoint(records[0]["hash_ids"])
    assert records[2]["hash_ids"][:2] == records[0]["hash_ids"][:2] and records[2]["output_length"] == 1


def test_block_must_be_a_multiple_of_the_trace_block_size():
    recs = [span("s", "a", None, "agent", "invoke_agent x", T0, T0 + SEC)]
    with pytest.raises(AgentprofError, match="multiple"):
        to_mooncake(make_trace(recs), block=500)


@pytest.mark.parametrize("name", ["trace_0001.json", "trace_0121.json", "trace_0393.json"])
def test_kv_cache_tester_block_structure_round_trips(name, tmp_path):
    from agentprof.importers import load_any

    raw = json.loads((KV_FOLDER / name).read_text())
    reqs = [r for r in raw["requests"] if r.get("type") != "subagent"]
    if len(reqs) != len(raw["requests"]):
        pytest.skip("file has sub-agents; this check walks one conversation")
    out = tmp_path / "mc.jsonl"
    stats = write_mooncake(load_any([KV_FOLDER / name]), out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    _check_aiperf_shape(records)
    assert stats.requests == len(records) == len(reqs)
    reqs = sorted(reqs, key=lambda r: r["t"])  # stable: equal times keep file order
    assert [r["input_length"] for r in records] == [r["in"] for r in reqs]
    assert [r["output_length"] for r in records] == [r["out"] for r in reqs]
    assert [r["timestamp"] for r in records] == [round(r["t"] * 1000) for r in reqs]
    for (p, q), (rp, rq) in zip(zip(reqs, reqs[1:], strict=False), zip(records, records[1:], strict=False), strict=True):
        fine = common_prefix_blocks(p["hash_ids"], q["hash_ids"])  # 64-token blocks shared by the raw requests
        expect = min(fine // 8, p["in"] // 512, q["in"] // 512)
        assert common_prefix_blocks(rp["hash_ids"], rq["hash_ids"]) == expect


def test_a_mixed_trace_claims_no_prefix_its_ids_do_not_show(tmp_path):
    """kv-cache-tester ids name one block each, not its prefix: read with a chained-hash trace (scheme ``mixed``),
    they are still chained before coarsening, as the analysis does (``analysis.calls.is_chained``)."""
    from agentprof.importers import load_any

    raw = json.loads((KV_FOLDER / "trace_0121.json").read_text())
    reqs = sorted(raw["requests"], key=lambda r: r["t"])
    fresh = max(h for r in reqs for h in r["hash_ids"]) + 1
    reqs[1]["hash_ids"][0] = fresh  # the second request's first block differs; its later blocks are the first's
    raw["requests"] = reqs
    (tmp_path / "trace_0121.json").write_text(json.dumps(raw))
    codex = SAMPLES / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    trace = load_any([tmp_path / "trace_0121.json", codex])
    assert trace.meta.extra["hash_scheme"] == "mixed"
    records = to_mooncake(trace)[0][:len(reqs)]  # the kv-cache-tester calls come first (its clock starts at 0)
    assert [r["input_length"] for r in records] == [r["in"] for r in reqs]
    for i in range(len(reqs)):
        for j in range(i + 1, len(reqs)):
            fine = common_prefix_blocks(reqs[i]["hash_ids"], reqs[j]["hash_ids"])
            expect = min(fine // 8, reqs[i]["in"] // 512, reqs[j]["in"] // 512)
            assert common_prefix_blocks(records[i]["hash_ids"], records[j]["hash_ids"]) == expect, (i, j)
