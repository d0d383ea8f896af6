"""kv-cache-tester ``hash_ids`` read as deltas: the same lists as a full JSON parse, or ``None`` (full parse)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from agentprof.importers import kv_cache_tester as kvct
from agentprof.importers import load_any
from agentprof.importers.kvct_hash_ids import split_hash_ids

from .importer_helpers import SAMPLES

KVCT = SAMPLES / "kv-cache-tester"


def _lists(raws: list[bytes]) -> list[list[int] | None]:
    split = split_hash_ids(raws)
    assert split is not None
    ordinals = []
    for d in split.docs:
        for r in json.loads(d)["requests"]:
            ordinals.append(r.get("hash_ids"))
    return split.lists(pl.Series("o", ordinals, dtype=pl.Int64)).to_list()


def _expected(raws: list[bytes]) -> list[list[int] | None]:
    return [r.get("hash_ids") for raw in raws for r in json.loads(raw)["requests"]]


def _doc(*lists: object, sep: str = ",") -> bytes:
    reqs = ", ".join("{" + ("" if h is None else f'"hash_ids": {h}, ') + '"t": 0, "in": 1}' for h in lists)
    return ('{"id": "x", "requests": [' + reqs + "]}").replace(",", sep).encode()


@pytest.mark.parametrize("lists", [
    ["[1,2,3]", "[1,2,3,4,5]", "[1,2,3,4,5]", "[1,2,9]", "[7]", "[]", "[1,2,3]"],  # grow, repeat, diverge, reset
    ["[12,13]", "[12,134]", "[12,13]", "[1,2]"],  # a token that only starts like the previous one's
    ["[ 1 , 2 ,3 ]", "[ 1 , 2 ,3 , 4]", "[1,2,3,4]", "[ ]", "[ 5 ]"],  # spaces anywhere
    ["[-5,0,9223372036854775807]", "[-5,0,9223372036854775807,-9223372036854775808]"],  # the int64 range
    [None, "[1]", "null", "[1,2]"],  # a missing list and a null one stay null
])
def test_lists_equal_a_full_parse(lists):
    raws = [_doc(*lists), _doc(*reversed(lists))]  # two documents: lists never share across them
    assert _lists(raws) == _expected(raws)


def test_documents_whose_lists_need_the_full_parser():
    for bad in ("[1,true]", "[1,2.5]", '["1"]', "[1,[2]]", "[1,,2]", "[1,2,]", "[9223372036854775808]", "[01]",
                '"[1,2]"', "{}"):
        assert split_hash_ids([_doc("[1,2]", bad)]) is None, bad
    # a trailing comma after a shared prefix is no valid list either
    assert split_hash_ids([_doc("[1,2]", "[1,2,]")]) is None
    # "hash_ids" as a string value is left in place; as the end of an escaped key, the full parser decides
    assert split_hash_ids([b'{"id": "hash_ids", "requests": [{"hash_ids": [1], "t": 0, "in": 1}]}']) is not None
    assert split_hash_ids([b'{"a\\"hash_ids": [1], "requests": []}']) is None


def test_import_of_the_samples_equals_the_full_parse(monkeypatch, tmp_path):
    # the shipped samples, a JSON Lines file of two of them, a pretty-printed one (", "-spaced lists) and the
    # importer's fixtures, imported with and without the delta reader
    docs = [json.loads(p.read_text()) for p in sorted(KVCT.glob("*.json"))[:3]]
    (tmp_path / "cc-traces-2.jsonl").write_text("\n".join(json.dumps({**d, "id": d["id"] + "-l"}) for d in docs[:2]))
    (tmp_path / "pretty.json").write_text(json.dumps({**docs[2], "id": "pretty"}, indent=1))
    for p in [*KVCT.glob("*.json"), *(Path(__file__).parent / "fixtures_kvct").glob("*.json")]:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    assert split_hash_ids([p.read_bytes() for p in KVCT.glob("*.json")]) is not None  # the samples take deltas
    fast = load_any([tmp_path]).spans
    monkeypatch.setattr(kvct, "split_hash_ids", lambda raws: None)
    full = load_any([tmp_path]).spans
    assert fast.height > 1000
    assert fast.equals(full)
