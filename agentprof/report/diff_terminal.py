"""The terminal view of ``agentprof diff``: both sides, the method, every figure with base, new, ratio and the
evidence it was tested on, and the cache-miss causes only NEW has. Every string from a trace goes through
:mod:`agentprof.safe_text` (never read as console markup, control characters shown as escapes)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentprof.safe_text import console as safe_console
from agentprof.safe_text import shown, text


def evidence(c: Any) -> str:
    """What a figure was tested across: ``3 v 3 calls``, ``8 v 8 runs``, or ``–``."""
    if c.unit is None:
        return "–"
    return f"{c.n_base} v {c.n_new}"


def load_part(c: Any) -> str:
    """How much of the change its own spans' extra wait for a CPU explains: ``100%``, ``40%``, or ``–``."""
    return "–" if c.load_share is None else f"{c.load_share:.0%}"


def _style(c: Any) -> str:
    if not c.significant:
        return ""
    worse = (c.slower_by() or 0) > 0 or (c.reuse_drop() or 0) > 0
    better = (c.slower_by() or 0) < 0 or (c.reuse_drop() or 0) < 0
    return "bold red" if worse else "bold green" if better else "bold"


def diff_table(res: Any, per_call: bool) -> Table:
    """Per-call or per-run figures, one row each (``load``: the share of the change the machine's load explains);
    significant rows in bold, slower/less reuse red, faster green."""
    from agentprof.analysis.diff import fmt_value

    title = ("Per call: the median call; tested across calls (v: base v new)" if per_call
             else "Per run: the median run; tested across runs (or calls, one run a side)")
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
              collapse_padding=True)
    t.add_column("figure", justify="left", overflow="fold", ratio=1)
    for c in ("base", "new", "ratio", "p adj.", "n", "load", "sig."):
        t.add_column(c, justify="right", no_wrap=True)
    for c in res.changes:
        if c.per_call != per_call:
            continue
        ratio = "–" if c.ratio is None else f"×{c.ratio:.2f}"
        sig = "yes" if c.significant else ("–" if c.p_adjusted is None else "no")
        pa = "–" if c.p_adjusted is None else f"{c.p_adjusted:.2g}"
        t.add_row(text(c.name, 80), Text(fmt_value(c.metric, c.base)), Text(fmt_value(c.metric, c.new)),
                  Text(ratio), Text(pa), Text(evidence(c)), Text(load_part(c)), Text(sig),
                  style=_style(c))
    return t


def show_diff(res: Any, failed: list[dict[str, Any]], console: Console | None = None) -> None:
    """Print the comparison."""
    con = console or safe_console()
    for side in ("base", "new"):
        s = res.sides.get(side, {})
        con.print(text(f"{side.upper()}: {shown(s.get('label'), 80)} — {s.get('runs')} run(s), "
                       f"{s.get('model_calls')} model calls, {s.get('misses')} cache misses"))
    m = res.method
    con.print(Text(m["summary"] + "; load: the share of a change its own spans' extra wait for a CPU explains"),
              style="dim")
    con.print(diff_table(res, per_call=True))
    con.print(diff_table(res, per_call=False))
    if res.new_miss_causes:
        con.print(Text("Cache-miss causes only in NEW", style="bold"))
        for c in res.new_miss_causes:
            con.print(text(f"  {c['cause']}: {c['misses']} miss(es)", style="bold"))
            for e in c["examples"][:3]:
                con.print(text(f"    {e['session_id']} call {e['call']}: {e['detail']}", 400))
            if c.get("fix"):
                con.print(text(f"    fix: {c['fix']}", 400))
    for n in res.notes:
        con.print(text("note: " + n, 600, style="yellow"))
    sig = res.significant
    con.print(text(f"{len(sig)} significant change(s)" + (": " + ", ".join(c.name for c in sig) if sig else ""),
                   600, style="bold"))
