"""The terminal view of ``agentprof diff``: both sides, the method, every figure with base, new, ratio and
significance, and the cache-miss causes only NEW has. Trace text is never read as console markup."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentprof.safe_text import console as safe_console
from agentprof.safe_text import shown


def diff_table(res: Any) -> Table:
    """One row per compared figure; significant rows in bold, slower/less reuse red, faster/more green."""
    from agentprof.analysis.diff import LABELS, fmt_value

    t = Table(title="Changes (base and new: medians over runs)", title_justify="left")
    t.add_column("figure", justify="left", overflow="fold", ratio=1)
    for c in ("base", "new", "ratio", "p adj.", "sig."):
        t.add_column(c, justify="right", no_wrap=True)
    for c in res.changes:
        ratio = "–" if c.ratio is None else f"×{c.ratio:.2f}"
        style = ""
        if c.significant:
            worse = (c.slower_by() or 0) > 0 or (c.reuse_drop() or 0) > 0
            better = (c.slower_by() or 0) < 0 or (c.reuse_drop() or 0) < 0
            style = "bold red" if worse else "bold green" if better else "bold"
        sig = "yes" if c.significant else ("–" if c.p_adjusted is None else "no")
        pa = "–" if c.p_adjusted is None else f"{c.p_adjusted:.2g}"
        name = LABELS.get(c.metric, c.metric) + ("" if c.scope in ("task", "call") else f" · {shown(c.scope.partition(':')[2])}")
        if c.scope == "call":
            name += " (per call)"
        t.add_row(Text(name), Text(fmt_value(c.metric, c.base)),
                  Text(fmt_value(c.metric, c.new)), Text(ratio), Text(pa), Text(sig), style=style)
    return t


def show_diff(res: Any, failed: list[dict[str, Any]], console: Console | None = None) -> None:
    """Print the comparison."""
    con = console or safe_console()
    for side in ("base", "new"):
        s = res.sides.get(side, {})
        con.print(Text(f"{side.upper()}: {shown(s.get('label'))} — {s.get('runs')} run(s), {s.get('model_calls')} model "
                       f"calls, {s.get('files')} file(s), {s.get('misses')} cache misses"))
    m = res.method
    con.print(Text(f"test: {m['test']} across {m['across']}; {m['correction']}, alpha {m['alpha']:g}; a significant "
                   f"change also moves the figure by at least {m['min_change']:.0%}; {m['figures_tested']} figures "
                   "tested"), style="dim")
    con.print(diff_table(res))
    if res.new_miss_causes:
        con.print(Text("Cache-miss causes only in NEW", style="bold"))
        for c in res.new_miss_causes:
            con.print(Text(f"  {c['cause']}: {c['misses']} miss(es)"), style="bold")
            for e in c["examples"][:3]:
                con.print(Text(f"    {shown(e['session_id'])} call {e['call']}: {shown(e['detail'])}"))
            if c.get("fix"):
                con.print(Text(f"    fix: {c['fix']}"))
    for n in res.notes:
        con.print(Text("note: " + n, style="yellow"))
    sig = res.significant
    con.print(Text(f"{len(sig)} significant change(s)" + (": " + ", ".join(f"{c.metric} [{shown(c.scope)}]" for c in sig)
                                                          if sig else ""), style="bold"))
