"""The recipe's MTP draft depth (``draft_depth.toml``): sourced per entry, looked up only for the exact MTP
deployment it was set for, bad entries rejected with one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.catalog import CatalogError, draftdepth, read_toml
from agentprof.catalog.decodeslots import decode_slots
from agentprof.catalog.draftdepth import DEPTH_PATH, draft_depth


def test_every_entry_is_a_sourced_mtp_deployment_with_listed_slots() -> None:
    entries = read_toml(DEPTH_PATH)["draft_depth"]
    assert len(entries) >= 5
    for e in entries:
        src = e["depth"]["source"]
        d = e["depth"]["value"]
        assert "S55" in src and "nvidia-master.yaml" in src, src
        assert src.endswith(f"DECODE_MTP_SIZE {d}")
        assert e["spec"] == "mtp" and d in (1, 3)
        # the same recipe configuration as a decode_slots.toml entry (one search-space row of S55 / S55b)
        isl, osl = (int(x) for x in e["isl_osl"].split("/"))
        for c in (e["conc"].split(", ") if "conc" in e else [None]):
            assert decode_slots(e["framework"], e["model"], e["hardware"], e["spec"], e["layout"], isl, osl,
                                e.get("precision", ""), None if c is None else int(c))[0]


def test_lookup_is_exact() -> None:
    v, src = draft_depth("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 1024)
    assert v == 3 and "tep8" in src
    assert draft_depth("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d1x8-tp8ep8", 1024, 1024)[0] == 1
    # without MTP, on other lengths, hardware or engines: not listed, one token per sequence
    assert draft_depth("dynamo-trt", "deepseek-r1", "gb200", "none", "p1x4-d4x8-tp8ep8", 1024, 1024)[0] == 0
    assert draft_depth("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 8192)[0] == 0
    assert draft_depth("sglang-disagg", "deepseek-r1", "mi355x", "mtp", "p1x8-d1x8-tp8ep8", 1024, 1024)[0] == 0
    # the entries name their precision: another precision's recipe is not this one's
    assert draft_depth("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 1024, "fp8", 8)[0] == 0
    assert draft_depth("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 1024, "fp4", 8)[0] == 3


def test_a_fractional_depth_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "draft_depth.toml"
    bad.write_text('[[draft_depth]]\nframework = "dynamo-trt"\nmodel = "deepseek-r1"\nhardware = "gb200"\n'
                   'spec = "mtp"\nlayout = "p1x4-d4x8-tp8ep8"\nisl_osl = "1024/1024"\n'
                   'depth = { value = 1.5, source = "estimate" }\n')
    monkeypatch.setattr(draftdepth, "DEPTH_PATH", bad)
    draftdepth._entries.cache_clear()
    try:
        with pytest.raises(CatalogError, match=r"draft_depth\[0\]\.depth: expected a whole number"):
            draft_depth("dynamo-trt", "deepseek-r1", "gb200", "mtp", "p1x4-d4x8-tp8ep8", 1024, 1024)
    finally:
        draftdepth._entries.cache_clear()
