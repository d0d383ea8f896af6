"""``agentprof diff --format markdown``: the comparison as GitHub-flavoured Markdown for a pull-request comment or
a job's step summary: a verdict line, a table of the significant and failing figures, and every figure in a
folded table.

Every string from a trace goes through :func:`agentprof.safe_text.shown` and then has its Markdown
punctuation backslash-escaped (``|`` would end a table cell, a backtick open code, ``[x](url)`` make a link,
``<img>`` an image), so a tool name can only ever show as text.
"""

from __future__ import annotations

import re
from typing import Any

from agentprof.report.diff_terminal import load_part
from agentprof.safe_text import shown

_PUNCT = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&$:@=\"'])")


def md(value: Any, limit: int | None = 120) -> str:
    """Trace text safe in Markdown and in a table cell: :func:`shown`, then ASCII punctuation escaped."""
    return _PUNCT.sub(r"\\\1", shown(value, limit))


def _row(c: Any) -> str:
    from agentprof.analysis.diff import fmt_value

    ratio = "–" if c.ratio is None else f"×{c.ratio:.2f}"
    pa = "–" if c.p_adjusted is None else f"{c.p_adjusted:.2g}"
    if c.threshold_only:
        ev = f"{c.n_base} vs {c.n_new} {c.unit}: too few to test"
    elif c.unit is None:
        ev = "not tested"
    else:
        ev = f"{c.n_base} vs {c.n_new} {c.unit}"
        if c.per_call:
            ev += f" ({c.runs_base} vs {c.runs_new} runs)"
    name = md(c.name)
    if c.significant:
        name = f"**{name}**"
    return (f"| {name} | {fmt_value(c.metric, c.base)} | {fmt_value(c.metric, c.new)} | {ratio} | {pa} | "
            f"{load_part(c)} | {ev} |")


_HEAD = ("| figure | base | new | ratio | p (adj.) | load explains | tested on |\n"
         "|---|--:|--:|--:|--:|--:|---|")


def render_markdown(res: Any, failed: list[dict[str, Any]]) -> str:
    """The Markdown text (ends with a newline)."""
    b, n = res.sides.get("base", {}), res.sides.get("new", {})
    failing = {(f["metric"], f["scope"]) for f in failed}
    sig = [c for c in res.changes if c.significant or c.key in failing]
    if failed:
        verdict = f"❌ {len(failed)} failing figure(s)"
    elif res.significant:
        verdict = f"⚠️ {len(res.significant)} significant change(s), none past the thresholds"
    else:
        verdict = "✅ no significant change"
    out = [f"### agentprof diff: {verdict}", "",
           f"BASE {md(b.get('label'))} ({b.get('runs')} run(s), {b.get('model_calls')} model calls) → NEW "
           f"{md(n.get('label'))} ({n.get('runs')} run(s), {n.get('model_calls')} model calls)", ""]
    if sig:
        out += [_HEAD, *(_row(c) for c in sig), ""]
    else:
        out += [f"No figure changed significantly ({res.method['figures_tested']} tested).", ""]
    if failed:
        out += ["**Failing:**", "", *(f"- {md(f['line'], 400)}" for f in failed), ""]
    for c in res.new_miss_causes:
        out.append(f"- cache-miss cause only in NEW: {md(c['cause'])}, {c['misses']} miss(es)"
                   + (f"; fix: {md(c['fix'], 300)}" if c.get("fix") else ""))
    out += [*(f"- note: {md(x, 600)}" for x in res.notes), "",
            f"<details><summary>All {len(res.changes)} figures</summary>", "", _HEAD,
            *(_row(c) for c in res.changes), "", "</details>", ""]
    m = res.method
    out.append(f"<sub>per call: {m['per_call']}; per run: {m['per_run']}; {m['correction']}, α = {m['alpha']:g}, "
               f"minimum change {m['min_change']:.0%} and {m['min_abs_s'] * 1e3:g} ms. Definitions: "
               "docs/DIFF.md</sub>")
    return "\n".join(out) + "\n"
