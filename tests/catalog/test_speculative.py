"""The speculative-decoding catalog (catalog/speculative.toml): sourced figures with their ranges, and a clear
error for a malformed entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.catalog import CatalogError
from agentprof.catalog.speculative import load_speculative


def test_kimi_eagle3_is_catalogued_with_sources_and_ranges() -> None:
    d = load_speculative()[("kimi-k2.5", "eagle3")]
    assert d.draft_tokens.value == 3 and "S61" in d.draft_tokens.source
    # the acceptance band holds the recipe's SpeedBench figure (2.49) and stays below 1 + draft tokens
    assert d.accept.low <= 2.49 <= d.accept.high <= 1 + d.draft_tokens.value
    assert d.accept.low <= d.accept.value <= d.accept.high and "SWE-bench" in d.accept.source
    assert d.drafter_params.low < d.drafter_params.value and "derived" in d.drafter_params.source
    assert "estimate" in d.pass_layers.source


GOOD = """[m.eagle3]
model = "kimi-k2.5"
method = "eagle3"
source = "x"
draft_tokens = { value = 3, source = "x" }
accept = { value = 2.5, source = "x" }
drafter_params = { value = 1e9, source = "x" }
pass_layers = { value = 2, source = "x" }
"""


@pytest.mark.parametrize("edit, needle", [
    (('value = 2.5', 'value = 4.5'), "accept must be between 1 and 1 + draft_tokens"),
    (('method = "eagle3"', 'method = "medusa"'), "method must be one of eagle3"),
    (('pass_layers = { value = 2, source = "x" }\n', ''), "pass_layers"),
    (('source = "x"\ndraft', 'src = "x"\ndraft'), "unknown key(s) src"),
])
def test_a_malformed_entry_is_one_line_naming_it(tmp_path: Path, edit: tuple[str, str], needle: str) -> None:
    f = tmp_path / "speculative.toml"
    f.write_text(GOOD.replace(*edit, 1))
    with pytest.raises(CatalogError) as e:
        load_speculative(f)
    assert str(e.value).startswith(f"{f}: m.eagle3") and needle in str(e.value)
    f2 = tmp_path / "ok.toml"
    f2.write_text(GOOD)
    assert load_speculative(f2)[("kimi-k2.5", "eagle3")].accept.value == 2.5
