"""Jupyter fragments: static, escaped HTML for traces and results; Analysis shows itself through them."""

from __future__ import annotations

import re

import agentprof.report  # noqa: F401  (registers the renderer)
from agentprof.report.notebook import html_for
from agentprof.report.stages import run_stages

from .report_support import synthetic_session
from .test_html import evil_trace


def test_analysis_and_replay_show_themselves(big_session):
    res = run_stages(big_session, systems=["jalapeno"], model="gpt-oss-120b", serving_bands=False)
    a_html = res.analysis._repr_html_()
    d = res.analysis.to_dict()
    assert "<svg" in a_html and "<script" not in a_html
    assert f"{100 * d['time']['model_s'] / d['time']['wall_s']:.1f} %" in a_html
    r_html = html_for(res.replay)
    assert "jalapeno" in r_html and "recorded" in r_html and "<script" not in r_html
    sweep = res.cache[0][1]
    s_html = html_for(sweep)
    assert "capacity sweep" in s_html and f"{100 * sweep.unlimited_hit_rate:.1f} %" in s_html


def test_trace_fragment_is_escaped():
    out = html_for(evil_trace())
    assert "<script" not in out and "&lt;evil&gt;" in out
    counts = html_for(synthetic_session(turns=5, subagent=False))
    assert re.search(r">5<", counts)  # five model calls


def test_every_result_object_has_a_notebook_display(big_session):
    """Trace, Analysis, ReplayResult, CacheSimResult and SweepResult all define ``_repr_html_``."""
    from agentprof.analysis.cachesim import Tier, simulate

    res = run_stages(big_session, systems=["h200+x86"], model="gpt-oss-120b")
    sim = simulate(big_session, "gpt-oss-120b", [Tier("hbm", None)])
    for obj in (big_session, res.analysis, res.replay, res.cache[0][1], sim):
        out = obj._repr_html_()
        assert out.startswith("<div") and "<script" not in out, type(obj).__name__


def test_no_row_of_dashes_in_the_analysis_view(big_session):
    """Only summaries become redundancy rows (the token totals used to make an empty "tokens — — — —" row);
    the per-call read share is named apart from the report's token-weighted figure."""
    from agentprof.analysis import analyze

    out = html_for(analyze(big_session))
    rows = re.findall(r"<tr>(.*?)</tr>", out)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    assert cells and not [c for c in cells if len(c) > 2 and all(x in ("—", "") for x in c[1:])]
    assert not [c for c in cells if c and c[0] == "tokens"]
    assert any(c and c[0] == "provider cache read share, per call" for c in cells)


def test_a_notebook_shows_results_before_the_report_stage_is_imported(tmp_path):
    """In a real IPython shell, an analysis displays through the report stage's fragment although nothing below
    the report stage imports it: the root package registers the drawing by type name, and the report modules
    load only when the result is displayed."""
    import subprocess
    import sys
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "traces" / "samples" / "codex"
    script = f"""
import sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
from agentprof.importers import load_any
from agentprof.analysis import analyze
from agentprof.replay import replay
a = analyze(load_any({str(sample)!r}))
before = sorted(m for m in sys.modules if m.startswith("agentprof.report"))
data, _ = shell.display_formatter.format(a)
print("BEFORE", before)
print("HTML", "<svg" in data.get("text/html", "") and "Amdahl" in data.get("text/html", ""))
print("AFTER", any(m.startswith("agentprof.report") for m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "BEFORE []" in out.stdout  # trace, importers, analysis and replay loaded no report module
    assert "HTML True" in out.stdout and "AFTER True" in out.stdout
