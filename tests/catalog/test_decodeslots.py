"""The recipe's decode slots (``decode_slots.toml``): every figure sourced and decomposed as the recipe set it,
looked up only for the exact deployment it was set for, bad entries rejected with one clear error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentprof.catalog import CatalogError, decodeslots, read_toml
from agentprof.catalog.decodeslots import SLOTS_PATH, decode_slots
from agentprof.replay.points import layout_columns

PRODUCT = re.compile(r"(\d+) decode worker\(s\) x (\d+) rank\(s\) x (?:DECODE_MAX_BATCH_SIZE|batch) (\d+)")


def test_every_entry_is_the_recipes_product_for_its_layout() -> None:
    entries = read_toml(SLOTS_PATH)["decode_slots"]
    assert len(entries) >= 10
    for e in entries:
        src = e["slots"]["source"]
        assert "S55" in src and "nvidia-master.yaml" in src, src
        m = PRODUCT.search(src)
        assert m, src
        workers, ranks, batch = (int(g) for g in m.groups())
        assert e["slots"]["value"] == workers * ranks * batch
        cols = layout_columns(e["layout"])
        # the decode workers of the layout key, and one batch per attention-DP rank (tp of the worker) or per worker
        assert cols["decode_num_workers"] == workers
        assert ranks in (1, cols["decode_tp"])
        # a recipe read in its file says which value it used where the file name's batchN differs
        if "recipe value used" in src:
            assert f"sets decode max_batch_size {batch} " in src
        if "conc" in e:  # the search-space entry's own conc-list, as its source quotes it
            assert "conc-list " + e["conc"] in src


def test_one_layout_picks_its_recipe_by_concurrency_and_precision() -> None:
    # B200 Dynamo-TRT FP4 at 8k1k ran p1x4-d5x8-tp8ep8 (attention TP) with batch 1 at 6 clients and batch 8 at
    # 10-100 (S55b): the point's concurrency picks the recipe
    args = ("dynamo-trt", "deepseek-r1", "b200", "none", "p1x4-d5x8-tp8ep8", 8192, 1024, "fp4")
    assert decode_slots(*args, 6)[0] == 5 and decode_slots(*args, 50)[0] == 40
    assert "batch 8" in decode_slots(*args, 100)[1]
    assert decode_slots(*args, 7)[0] is None  # a concurrency no recipe of that layout ran: not listed
    assert decode_slots(*args[:-1], "fp8", 50)[0] is None  # nor another precision's
    # the GB200 entries of the earlier search space (S55) hold at any concurrency, for their precision only
    gb = ("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)
    assert decode_slots(*gb, "fp4", 141)[0] == 512 and decode_slots(*gb, "fp8", 141)[0] is None


def test_lookup_is_exact() -> None:
    v, src = decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)
    assert v == 512 and "DECODE_MAX_BATCH_SIZE 128" in src
    assert decode_slots("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 1024)[0] == 128
    # another sequence length, accelerator, framework or layout ran other recipes: not listed
    assert decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 8192)[0] is None
    assert decode_slots("dynamo-trt", "deepseek-r1", "b200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)[0] is None
    assert decode_slots("dynamo-sglang", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)[0] is None
    assert decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d2x8-tp8ep8", 1024, 1024)[0] is None


HEAD = ('[[decode_slots]]\nframework = "dynamo-trt"\nmodel = "deepseek-r1"\nhardware = "gb200"\nspec = "none"\n'
        'layout = "p1x4-d4x8-tp8ep8"\nisl_osl = "1024/1024"\n')


@pytest.mark.parametrize("body, match", [
    ("slots = 512\n", r"decode_slots\[0\]\.slots: expected \{ value"),  # a bare number: no source
    ('conc = "12.5"\nslots = { value = 512, source = "x" }\n',
     r"decode_slots\[0\]\.conc: expected the benchmark concurrencies"),  # not whole clients
])
def test_a_bad_entry_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, match: str) -> None:
    bad = tmp_path / "decode_slots.toml"
    bad.write_text(HEAD + body)
    monkeypatch.setattr(decodeslots, "SLOTS_PATH", bad)
    decodeslots._entries.cache_clear()
    try:
        with pytest.raises(CatalogError, match=match):
            decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)
    finally:
        decodeslots._entries.cache_clear()
