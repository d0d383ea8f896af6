"""The recipe's decode slots (``decode_slots.toml``): every figure sourced and decomposed as the recipe set it,
looked up only for the exact deployment it was set for, bad entries rejected with one clear error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentprof.catalog import CatalogError, decodeslots, read_toml
from agentprof.catalog.decodeslots import SLOTS_PATH, decode_slots
from agentprof.replay.points import layout_columns

PRODUCT = re.compile(r"(\d+) decode worker\(s\) x (\d+) rank\(s\) x DECODE_MAX_BATCH_SIZE (\d+)")


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


def test_lookup_is_exact() -> None:
    v, src = decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)
    assert v == 512 and "DECODE_MAX_BATCH_SIZE 128" in src
    assert decode_slots("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 1024)[0] == 128
    # another sequence length, accelerator, framework or layout ran other recipes: not listed
    assert decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 8192)[0] is None
    assert decode_slots("dynamo-trt", "deepseek-r1", "b200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)[0] is None
    assert decode_slots("dynamo-sglang", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)[0] is None
    assert decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d2x8-tp8ep8", 1024, 1024)[0] is None


def test_an_unsourced_entry_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "decode_slots.toml"
    bad.write_text('[[decode_slots]]\nframework = "dynamo-trt"\nmodel = "deepseek-r1"\nhardware = "gb200"\n'
                   'spec = "none"\nlayout = "p1x4-d4x8-tp8ep8"\nisl_osl = "1024/1024"\nslots = 512\n')
    monkeypatch.setattr(decodeslots, "SLOTS_PATH", bad)
    decodeslots._entries.cache_clear()
    try:
        with pytest.raises(CatalogError, match=r"decode_slots\[0\]\.slots: expected \{ value"):
            decode_slots("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)
    finally:
        decodeslots._entries.cache_clear()
