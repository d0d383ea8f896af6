"""The package's import plan (scripts/import_plan.py): imports run down the pipeline, never back up a floor,
and no modules import each other round a circle."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "import_plan.py"


def _plan_module():
    spec = importlib.util.spec_from_file_location("import_plan", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_import_runs_back_up_a_floor():
    plan = _plan_module().plan()
    assert plan["upward"] == []


def test_no_circle_among_modules():
    plan = _plan_module().plan()
    assert plan["circles"] == []


def test_the_plan_sees_a_planted_circle_and_an_upward_import(tmp_path, monkeypatch):
    """The script finds what it claims to find: a fake package with a trace module importing report, and two
    analysis modules importing each other."""
    mod = _plan_module()
    pkg = tmp_path / "agentprof"
    for rel, text in {"__init__.py": "", "trace/__init__.py": "", "trace/a.py": "from agentprof.report import b\n",
                      "report/__init__.py": "", "report/b.py": "",
                      "analysis/__init__.py": "", "analysis/c.py": "from agentprof.analysis import d\n",
                      "analysis/d.py": "def f():\n    from . import c\n"}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(mod, "PACKAGE", pkg)
    plan = mod.plan()
    assert plan["circles"] == [["agentprof.analysis.c", "agentprof.analysis.d"]]
    assert [(u["from"], u["to"]) for u in plan["upward"]] == [("agentprof.trace.a", "agentprof.report.b")]
