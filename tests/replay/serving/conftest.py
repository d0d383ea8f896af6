"""Shared inputs: the shipped kv-cache-tester sessions, their plan, and Kimi K2.5 (Claude's stand-in) resolved
on a few systems."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprof.catalog import resolve_model
from agentprof.catalog.hardware import load_catalog
from agentprof.importers import load_any
from agentprof.replay.serving import build_plan
from agentprof.replay.systems import resolve

ROOT = Path(__file__).resolve().parents[3]
KVCT = ROOT / "traces" / "samples" / "kv-cache-tester"


@pytest.fixture(scope="session")
def kvct():
    return load_any(str(KVCT))


@pytest.fixture(scope="session")
def plan(kvct):
    return build_plan(kvct)


@pytest.fixture(scope="session")
def resolved():
    cat = load_catalog()
    model, _ = resolve_model("claude-opus-4-1")

    def get(system: str, link: str | None = None):
        s = cat.system(system)
        if link is not None:
            from dataclasses import replace

            s = replace(s, link=cat.links[link])
        return resolve(s, model, cat)

    return get
