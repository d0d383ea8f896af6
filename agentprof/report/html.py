"""The single-file HTML report: template, styles, script and data inlined; nothing is fetched when opened.

Safety: the data travels as JSON inside ``<script type="application/json">`` with ``<``, ``>``, ``&`` and the
JavaScript line separators escaped, so no trace text can close the element; the page script inserts every text
as a text node; and a Content-Security-Policy allows only the one inline script (by its SHA-256) and no
network access at all (``default-src 'none'``).
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import json
import math
import os
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from agentprof import __version__
from agentprof.report.payload import build_payload
from agentprof.report.timeline import DEFAULT_MAX_SPANS
from agentprof.trace import Trace

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")
_SLOT_RE = re.compile(r"\{\{([A-Z_]+)\}\}")


@cache
def asset(name: str) -> str:
    """Text of a packaged asset (``agentprof/report/assets/NAME``)."""
    return resources.files("agentprof.report").joinpath("assets", name).read_text(encoding="utf-8")


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by ``None`` (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and all(type(v) is int for v in obj):  # the common case: long integer columns
            return obj
        return [_finite(v) for v in obj]
    return obj


def embed_json(data: Any) -> str:
    """JSON that is safe inside an HTML ``<script>`` element: it cannot close the element or the page."""
    text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def _script_hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def fill_page(kind: str, js: str, css: str, data: dict[str, Any], title: str, *, nav: bool = False,
              noscript: str = "report draws its charts with JavaScript; enable it to see them.") -> str:
    """The single-file page every HTML view shares (``assets/page.html``): its script, style and data inlined,
    a content security policy that admits only that script (by hash), and the title escaped.
    ``kind`` labels the page under the brand; ``nav`` adds the section list the report's script fills."""
    if "</script" in js.lower() or "</style" in css.lower():  # pragma: no cover - guards the packaged assets
        raise ValueError("page assets must not contain closing script/style tags")
    slots = {
        "TITLE": html.escape(title, quote=True),
        "KIND": html.escape(kind),
        "NAV": '    <nav id="toc" aria-label="Sections"></nav>\n' if nav else "",
        "NOSCRIPT": html.escape(noscript) + " The data is embedded in this file.",
        "VERSION": html.escape(__version__),
        "CSS": css,
        "JS": js,
        "DATA": embed_json(data),
        "SCRIPT_HASH": _script_hash("\n" + js + "\n"),  # the element's exact text, as the template wraps it
    }
    return _SLOT_RE.sub(lambda m: slots[m.group(1)], asset("page.html"))


def render_payload(payload: dict[str, Any]) -> str:
    """The report page for an already built payload (see :mod:`agentprof.report.payload`)."""
    js = "\n".join(asset(n).strip("\n") for n in ("figures.js", "report.js", "flame.js"))  # flame view: report.flame
    return fill_page("report", js, asset("report.css"), payload, str(payload.get("title") or "agentprof report"),
                     nav=True)


def render_measured(panel: dict[str, Any], title: str) -> str:
    """A page of the load-test panel alone (``agentprof loadtest --html``), drawn by the report's own script."""
    data = {"page": "loadtest", "title": title, "version": __version__, "measured": panel,
            "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    js = "\n".join(asset(n).strip("\n") for n in ("figures.js", "report.js"))
    return fill_page("load test", js, asset("report.css"), data, title)


def render(trace: Trace, analysis: Any = None, replay: Any = None, cache: Any = None, *,
           title: str | None = None, include_text: bool = False, notes: dict[str, str] | None = None,
           max_spans: int = DEFAULT_MAX_SPANS, cache_model: str | None = None,
           serving: dict[str, Any] | None = None, measured: dict[str, Any] | None = None) -> str:
    """One self-contained HTML report of ``trace`` and whichever stage results are given.

    ``analysis`` (an ``Analysis`` or its ``to_dict()``), ``replay`` (a ``ReplayResult`` or dict) and ``cache``
    (a capacity sweep, or ``[(label, sweep), ...]`` for ``cache_model``) are optional: a panel whose input is
    missing says so, with the reason from ``notes`` (``{"analysis": "...", "replay": "...", "cache": "..."}``)
    when given. Prompt text is included only with ``include_text`` and only where the trace captured it.
    ``serving`` is a concurrency sweep (:func:`agentprof.replay.serving.sweep.sweep`) for the serving panel,
    ``measured`` the load-test panel (:func:`agentprof.report.measured.panel`).
    """
    payload = build_payload(trace, analysis=analysis, replay=replay, cache=cache, title=title,
                            include_text=include_text, notes=notes, max_spans=max_spans, cache_model=cache_model,
                            serving=serving, measured=measured)
    return render_payload(payload)


def write_report(path: str | os.PathLike[str], trace: Trace, analysis: Any = None, replay: Any = None,
                 cache: Any = None, **kwargs: Any) -> Path:
    """Render the report and write it to ``path`` (parent folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(trace, analysis, replay, cache, **kwargs), encoding="utf-8")
    return out
