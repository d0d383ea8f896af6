"""The ``agentprof diff`` page: BASE and NEW side by side (time buckets as paired bars, each tool, calls, tokens,
reuse, TTFT, output rate), the tested changes, the failing figures and the cache-miss causes only NEW has.

One self-contained file with the same safety rules as the report (:mod:`agentprof.report.html`): the data is
escaped JSON in a ``<script type="application/json">``, the page script inserts every text as a text node, and
a Content-Security-Policy allows only that one script (by hash) and no network access.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from agentprof import __version__
from agentprof.report.html import asset, fill_page


def diff_payload(res: Any, failed: list[dict[str, Any]], title: str | None = None) -> dict[str, Any]:
    """The page's data: the diff's JSON document (``changes``, ``failed``, …) plus title and version."""
    d = res.to_dict(failed)
    b, n = d["base"].get("label", "base"), d["new"].get("label", "new")
    return {"version": __version__,
            "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "title": title or f"agentprof diff: {b} → {n}", "diff": d}


def render_diff_page(res: Any, failed: list[dict[str, Any]], title: str | None = None) -> str:
    """The HTML text of the diff page."""
    payload = diff_payload(res, failed, title)
    css = asset("report.css") + "\n" + asset("diff.css")
    js = asset("figures.js").strip("\n") + "\n" + asset("diff.js").strip("\n")  # figures.js: whole figures
    return fill_page("diff", js, css, payload, payload["title"],
                     noscript="page draws its tables with JavaScript; enable it to see them.")


def write_diff_page(path: str | os.PathLike[str], res: Any, failed: list[dict[str, Any]],
                    title: str | None = None) -> Path:
    """Render the diff page and write it to ``path`` (parent folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_diff_page(res, failed, title), encoding="utf-8")
    return out
