"""Helpers for the report tests: small synthetic traces built from span records, and a real headless
Chromium (Debian's package, driven by Playwright) that opens reports offline and records what they do."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprof.trace import Trace, TraceMeta, spans_from_records

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "traces" / "samples"
BIG_SESSION = SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
BIG_SESSION_SUBAGENTS = SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d"
KV_FOLDER = SAMPLES / "kv-cache-tester"
T0 = 1_700_000_000_000_000_000
SEC = 1_000_000_000

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def span(session: str, span_id: str, parent: str | None, kind: str, name: str, start: int | None,
         end: int | None, trace_id: str = "t1", status: str = "ok", **attrs: Any) -> dict[str, Any]:
    """One agentprof span record."""
    return {"record": "span", "trace_id": trace_id, "span_id": span_id, "parent_id": parent, "name": name,
            "kind": kind, "start_ns": start, "end_ns": end, "status": status,
            "error_type": "ToolError" if status == "error" else None,
            "attributes": {"agentprof.session.id": session, **attrs}}


def make_trace(records: list[dict[str, Any]], **meta: Any) -> Trace:
    return Trace(TraceMeta(**{"source_format": "agentprof", "name": "synthetic", **meta}), spans_from_records(records))


def synthetic_session(turns: int = 40, seed: int = 1, tool_name: str | None = None, subagent: bool = True,
                      parallel_every: int = 7) -> Trace:
    """A session of model call → tool call turns with waits, a parallel tool pair with a nested parse every
    ``parallel_every`` turns and (optionally) one subagent session. ``tool_name`` names the fourth tool."""
    rnd = random.Random(seed)
    recs: list[dict[str, Any]] = []
    t = T0
    for i in range(turns):
        d = int(rnd.uniform(0.5, 4) * SEC)
        recs.append(span("s1", f"m{i}", "root", "model", "chat model-x", t, t + d, **{
            "gen_ai.usage.input_tokens": 1000 + 500 * i, "gen_ai.usage.cache_read.input_tokens": 900 + 480 * i,
            "gen_ai.usage.output_tokens": 100 + i, "gen_ai.response.model": "model-x"}))
        t += d
        tool = tool_name if (tool_name and i == 3) else rnd.choice(["Bash", "Read", "Edit", "Grep"])
        d = int(rnd.uniform(0.05, 3) * SEC)
        recs.append(span("s1", f"t{i}", "root", "tool", f"execute_tool {tool}", t, t + d, **{"gen_ai.tool.name": tool}))
        if parallel_every and i % parallel_every == 0:
            recs.append(span("s1", f"t{i}b", "root", "tool", "execute_tool Read", t + 1000, t + d // 2,
                             **{"gen_ai.tool.name": "Read"}))
            recs.append(span("s1", f"p{i}", f"t{i}", "parse", "parse tool result", t + 2000, t + d // 3))
        t += d
        if i % 10 == 5:
            d = int(rnd.uniform(5, 20) * SEC)
            recs.append(span("s1", f"w{i}", "root", "wait", "wait user", t, t + d, **{"agentprof.wait.reason": "user"}))
            t += d
    recs.insert(0, span("s1", "root", None, "agent", "invoke_agent coder", T0, t))
    if subagent:
        s0 = T0 + 30 * SEC
        recs.append(span("s2", "sroot", "t5", "agent", "invoke_agent Explore", s0, s0 + 20 * SEC, **{
            "agentprof.session.parent_id": "s1", "agentprof.session.role": "subagent"}))
        recs.append(span("s2", "sm1", "sroot", "model", "chat model-y", s0 + SEC, s0 + 5 * SEC,
                         **{"agentprof.session.parent_id": "s1"}))
    return make_trace(recs)


def find_chromium() -> str | None:
    """A Chromium executable: ``$AGENTPROF_CHROMIUM``, else chromium / chromium-browser / google-chrome on PATH."""
    env = os.environ.get("AGENTPROF_CHROMIUM")
    if env and Path(env).exists():
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


@dataclass
class Opened:
    """A report page opened in the browser and what happened while it loaded."""

    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return [t for kind, t in self.console if kind in ("error", "assert")] + self.page_errors


class Browser:
    """One headless Chromium (fresh user-data-dir) for the test session."""

    def __init__(self, executable: str) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self._dir = tempfile.mkdtemp(prefix="agentprof-chromium-")
        self.context = self._pw.chromium.launch_persistent_context(
            self._dir, executable_path=executable, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})

    def open(self, path: Path, width: int = 1400) -> Opened:
        page = self.context.new_page()
        page.set_viewport_size({"width": width, "height": 1000})
        o = Opened(page)
        page.on("console", lambda m: o.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: o.page_errors.append(str(e)))
        page.on("request", lambda r: o.requests.append(r.url))

        def on_dialog(d: Any) -> None:
            o.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", on_dialog)
        page.goto(Path(path).resolve().as_uri())
        page.wait_for_selector("html[data-rendered]", timeout=20_000)
        return o

    def close(self) -> None:
        try:
            self.context.close()
        finally:
            self._pw.stop()
            shutil.rmtree(self._dir, ignore_errors=True)


LAYOUT_PROBE = r"""() => {
  // what a reader meets at this width: sideways scroll, clipped boxes, and the longest visible block of text
  const out = {scrollWidth: document.scrollingElement.scrollWidth, width: window.innerWidth, clipped: [], blocks: []};
  for (const el of document.querySelectorAll('body *')) {
    if (!el.getClientRects().length || el.closest('svg') || el.tagName === 'CANVAS') continue;
    if (el.closest('details:not([open])') && !el.closest('summary') && el.tagName !== 'DETAILS') continue;
    const cs = getComputedStyle(el);
    if (cs.overflowX !== 'visible' && cs.textOverflow !== 'ellipsis' && el.scrollWidth > el.clientWidth + 1)
      out.clipped.push(`${el.tagName}.${el.className} ${el.scrollWidth}>${el.clientWidth}: ${el.innerText.slice(0, 60)}`);
  }
  // spilled: boxes reaching past the right edge of their panel (drawn over its border or beyond)
  out.spilled = [];
  for (const sec of document.querySelectorAll('section.panel')) {
    const edge = sec.getBoundingClientRect().right;
    for (const el of sec.querySelectorAll('*')) {
      if (el.closest('svg') && el.tagName !== 'svg') continue;
      const r = el.getBoundingClientRect();
      if (r.width && r.right > edge + 1 && getComputedStyle(el).position !== 'fixed')
        out.spilled.push(`${sec.id}: ${el.tagName}.${el.className} ${Math.round(r.right)}>${Math.round(edge)}`);
    }
  }
  out.spilled = out.spilled.slice(0, 10);
  // words per block: each visible text node counts toward its nearest ancestor that is not laid out inline
  const words = new Map();
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const p = n.parentElement;
    if (!p || p.closest('svg, script, style, select, noscript, .tip') || !p.getClientRects().length) continue;
    const shut = p.closest('details:not([open])');
    if (shut && !p.closest('summary')) continue;  // a closed disclosure shows its summary only
    let b = p;
    while (b.parentElement && getComputedStyle(b).display.startsWith('inline')) b = b.parentElement;
    const w = n.textContent.split(/\s+/).filter(x => /[\p{L}\p{N}]/u.test(x)).length;
    if (w) words.set(b, (words.get(b) || 0) + w);
  }
  // split: visible text a line may break inside a figure (a plain space between a number and its unit, or
  // between a duration's parts): the page joins them with a no-break space
  out.split = [];
  const figure = /\d [hmd] \d|\d (%|×|[hmsd]\b|ms\b|µs\b|min\b|[KMGTP]i?B\b|[kMGT]?Wh?\b)/;
  const walk2 = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk2.nextNode(); n; n = walk2.nextNode()) {
    const p = n.parentElement;
    if (!p || p.closest('svg, script, style, noscript') || !p.getClientRects().length) continue;
    const m = n.textContent.match(figure);
    if (m && out.split.length < 10) out.split.push(n.textContent.slice(Math.max(0, m.index - 20), m.index + 20));
  }
  for (const [b, w] of words) out.blocks.push([w, b.tagName + '.' + b.className, b.innerText.slice(0, 80)]);
  out.blocks.sort((a, b) => b[0] - a[0]);
  out.blocks = out.blocks.slice(0, 5);
  return out; }"""
"""A page's layout as a reader meets it: ``scrollWidth`` against the viewport ``width``; ``clipped``, every box
whose content is cut sideways or scrolls sideways (single-line cells cut with an ellipsis and a title excepted);
``spilled``, boxes reaching past their panel's right edge; ``blocks``, the five visible text blocks with the most words (text in closed disclosures is not visible); ``split``, visible text
where a line may break inside a figure."""
