"""kv-cache-tester's per-conversation hit rate: exactly that tool's definition, on its own traces and on
hand-made cases that separate it from a positional or token-based rate."""

from __future__ import annotations

import json

import pytest

from agentprof.analysis import analyze

from .analysis_helpers import SAMPLES, TraceBuilder


def kvct_rate(doc: dict) -> tuple[int, int]:
    """(hits, counted blocks) over parent requests, written from kv-cache-tester's documented rule."""
    parents = [r for r in doc["requests"] if r.get("type") != "subagent"]
    hits = counted = 0
    for i, r in enumerate(parents):
        ids = r.get("hash_ids", [])
        if i == 0:
            counted += len(ids)
            continue
        if not ids:
            continue
        prev = set(parents[i - 1].get("hash_ids", []))
        for h in ids:
            counted += 1
            if h not in prev:
                break
            hits += 1
    return hits, counted


def test_kv_cache_tester_samples_match_the_tools_definition(kvct_analysis):
    files = sorted((SAMPLES / "kv-cache-tester").glob("*.json"))
    assert len(files) == 19
    conv = {r["conversation_id"]: r for r in kvct_analysis.conversations.to_dicts()}
    assert len(conv) == 19
    rates = []
    for f in files:
        doc = json.loads(f.read_text())
        hits, counted = kvct_rate(doc)
        row = conv[doc["id"]]
        assert (row["hit_blocks"], row["counted_blocks"]) == (hits, counted), doc["id"]
        assert row["session_hit_rate"] == hits / counted
        all_blocks = sum(len(r["hash_ids"]) for r in doc["requests"] if r.get("type") != "subagent")
        assert row["strict_share"] == hits / all_blocks
        assert row["strict_share"] <= row["session_hit_rate"]
        rates.append(hits / counted)
    d = kvct_analysis.to_dict()
    s = d["redundancy"]["session_hit_rate"]
    assert d["conversations"] == 19
    assert s["n"] == 19
    assert s["mean"] == pytest.approx(sum(rates) / len(rates))
    srt = sorted(rates)
    assert s["median"] == pytest.approx(srt[9])


def _trace(requests: list[list[int]], scheme: str = "kv-cache-tester", sub: list[list[int]] | None = None):
    b = TraceBuilder(hash_scheme=scheme)
    b.session("conv", 0, 1000)
    for i, ids in enumerate(requests):
        b.model("conv", i * 10, i * 10 + 1, hashes=ids, prompt_tokens=64 * len(ids))
    if sub:
        b.session("sub", 0, 1000, parent_session="conv", role="subagent")
        for i, ids in enumerate(sub):
            b.model("sub", i * 10 + 5, i * 10 + 6, hashes=ids, prompt_tokens=64 * len(ids))
    return b.trace()


def _conv(trace):
    rows = analyze(trace).conversations.to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_first_request_counts_all_blocks_and_walk_stops_at_first_miss():
    # request 2: blocks 1,2 hit, 9 misses (counted once), 4 and 5 are present in request 1 but not counted
    r = _conv(_trace([[1, 2, 3, 4, 5], [1, 2, 9, 4, 5, 6]]))
    assert (r["hit_blocks"], r["counted_blocks"], r["prompt_blocks"]) == (2, 5 + 3, 11)
    assert r["session_hit_rate"] == 2 / 8
    assert r["strict_share"] == 2 / 11


def test_membership_is_by_set_not_position():
    # ids in a different order are still "present in the previous request" for kv-cache-tester
    r = _conv(_trace([[1, 2, 3, 4], [1, 3, 2, 5, 6]]))
    assert (r["hit_blocks"], r["counted_blocks"]) == (3, 4 + 4)


def test_empty_request_adds_nothing_and_the_next_one_misses_at_once():
    r = _conv(_trace([[1, 2], [], [1, 2, 3]]))
    assert (r["hit_blocks"], r["counted_blocks"]) == (0, 2 + 0 + 1)


def test_subagent_requests_are_excluded_and_do_not_count_as_conversations():
    a = analyze(_trace([[1, 2, 3], [1, 2, 3, 4]], sub=[[7, 8], [7, 8, 9]]))
    assert a.to_dict()["conversations"] == 1
    r = a.conversations.to_dicts()[0]
    assert (r["hit_blocks"], r["counted_blocks"]) == (3, 3 + 4)


def test_compaction_segment_continues_the_conversation():
    b = TraceBuilder(hash_scheme="kv-cache-tester")
    b.session("main", 0, 100)
    b.model("main", 0, 1, hashes=[1, 2, 3], prompt_tokens=192)
    b.model("main", 10, 11, hashes=[1, 2, 3, 4], prompt_tokens=256)
    b.session("main/compact-1", 20, 100, parent_session="main", role="compaction")
    b.model("main/compact-1", 20, 21, hashes=[1, 9], prompt_tokens=128)
    b.model("main/compact-1", 30, 31, hashes=[1, 9, 10], prompt_tokens=192)
    a = analyze(b.trace())
    rows = a.conversations.to_dicts()
    assert a.to_dict()["conversations"] == 1 and rows[0]["conversation_id"] == "main"
    # 3 (first) + [1,2,3 hit, 4 miss] + [1 hit, 9 miss] + [1, 9 hit, 10 miss]
    assert (rows[0]["hit_blocks"], rows[0]["counted_blocks"]) == (3 + 1 + 2, 3 + 4 + 2 + 3)


def test_conversation_without_hashes_has_no_rate():
    b = TraceBuilder()
    b.session("c", 0, 10)
    b.model("c", 0, 1, input_tokens=100)
    b.model("c", 2, 3, input_tokens=120)
    r = _conv(b.trace())
    assert r["session_hit_rate"] is None and r["strict_share"] is None


def test_requests_are_walked_in_file_order_like_the_tool(tmp_path):
    """kv-cache-tester walks ``requests`` as listed. Two parallel requests logged out of ``t`` order (the
    second written first) keep their file order for the previous-request comparison."""
    from agentprof.importers import load_any

    a, b = list(range(1, 11)), list(range(1, 6)) + list(range(50, 55))
    doc = {"id": "order", "block_size": 64, "hash_id_scope": "local", "requests": [
        {"t": 0.0, "type": "s", "in": 640, "out": 1, "hash_ids": a},
        {"t": 5.0, "type": "s", "in": 640, "out": 1, "hash_ids": a + [11]},
        {"t": 4.9, "type": "s", "in": 640, "out": 1, "hash_ids": b},
        {"t": 6.0, "type": "s", "in": 640, "out": 1, "hash_ids": b + [55]}]}
    p = tmp_path / "order.json"
    p.write_text(json.dumps(doc))
    r = analyze(load_any(p)).conversations.to_dicts()[0]
    assert (r["hit_blocks"], r["counted_blocks"]) == kvct_rate(doc)


FIXTURES = __import__("pathlib").Path(__file__).parents[1] / "importers" / "fixtures_kvct"


@pytest.mark.parametrize("name", ["subagent_spec.json", "parallel_models.json"])
def test_synthetic_layouts_match_the_tools_definition(name):
    """Sub-agent entries (excluded from the walk) and parallel requests of two models listed at the same
    ``t`` (walked as listed): the tool's rate recomputed from the raw file."""
    from agentprof.importers import load_any

    doc = json.loads((FIXTURES / name).read_text())
    hits, counted = kvct_rate(doc)
    assert 0 < hits < counted
    r = _conv(load_any(FIXTURES / name))
    assert r["conversation_id"] == doc["id"]
    assert (r["hit_blocks"], r["counted_blocks"]) == (hits, counted)
    assert r["session_hit_rate"] == hits / counted


def test_documents_sharing_an_id_each_get_their_own_rate(tmp_path):
    """Two trace sets with the same file names: each document is its own conversation, walked alone."""
    from agentprof.importers import load_any

    doc = json.loads((FIXTURES / "parallel_models.json").read_text())
    short = dict(doc, requests=doc["requests"][:3])
    for sub, d in (("a", doc), ("b", short)):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "t.json").write_text(json.dumps(d))
    rows = analyze(load_any(tmp_path)).conversations.to_dicts()
    assert len(rows) == 2
    got = sorted((r["hit_blocks"], r["counted_blocks"]) for r in rows)
    assert got == sorted([kvct_rate(doc), kvct_rate(short)])
