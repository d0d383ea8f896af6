"""Setup scripts install from the package registries by name only: no other index, no download host."""

from __future__ import annotations

import re
from pathlib import Path

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.sh"))


def test_setup_scripts_use_only_the_registries():
    assert SCRIPTS
    for path in SCRIPTS:
        text = path.read_text(encoding="utf-8")
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"--(extra-)?index-url|-i\s+https?://|--find-links\s+https?://", code), path.name
        assert not re.search(r"https?://(?!127\.0\.0\.1|localhost)", code), path.name
