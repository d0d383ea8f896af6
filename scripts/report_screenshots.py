"""Chromium screenshots of reports.

``python scripts/report_screenshots.py [OUT_DIR] [--calls 1,5,100,1000]``: full pages of reports on captured runs
of 1, 5, 100 and 1,000 model calls (the loopback model server, the real openai SDK, a growing conversation with a
tool call per turn), to look at every chart at each size.

``python scripts/report_screenshots.py --docs docs/screenshots``: the first screen (900 px tall) at 800 and
1,400 px wide of the demo's page (``agentprof demo``) and of the reports on the bundled Claude Code session and
kv-cache-tester folder, as ``agentprof report`` writes them; prints each page's layout check (sideways scroll,
cut boxes, longest visible block of text)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def capture(n: int, out: Path) -> Path:
    import openai

    import agentprof
    from agentprof.demo.model_server import ModelServer

    @agentprof.tool
    def run_step(i: int) -> str:
        return f"step {i} done " + "x" * (i % 50)

    with ModelServer() as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="x", max_retries=0)
        msgs = [{"role": "system", "content": "You fix bugs. " * 40}, {"role": "user", "content": "go"}]
        with agentprof.profile(f"calls-{n}", out=out) as run:
            for i in range(n):
                reply = client.chat.completions.create(model="gpt-4o", messages=msgs, stream=i % 2 == 1,
                                                       **({"stream_options": {"include_usage": True}}
                                                          if i % 2 else {}))
                text = "".join(c.choices[0].delta.content or "" for c in reply if c.choices) if i % 2 else \
                    reply.choices[0].message.content
                msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": run_step(i)}]
                if len(msgs) > 60:  # keep prompts bounded, and make the prefix change now and then
                    msgs = msgs[:2] + msgs[-40:]
    return Path(run.path)


ROOT = Path(__file__).resolve().parents[1]


def docs(out: Path) -> int:
    """First-screen PNGs of the demo page and the samples' reports at 800 and 1,400 px."""
    import subprocess
    import tempfile

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT))
    from report_samples import REPORT_SAMPLES

    from tests.report.report_support import LAYOUT_PROBE

    out.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "agentprof.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        pages = {}
        subprocess.run([*cli, "demo", "--out", tmp, "--traces", tmp], check=True, stdout=subprocess.DEVNULL)
        pages["demo"] = Path(tmp) / "demo.html"
        for name, paths in REPORT_SAMPLES.items():
            pages[name] = Path(tmp) / f"{name}.html"
            subprocess.run([*cli, "report", *map(str, paths), "-o", str(pages[name])], check=True,
                           stdout=subprocess.DEVNULL)
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
            for name, html in pages.items():
                for width in (800, 1400):
                    page = browser.new_page(viewport={"width": width, "height": 900})
                    page.goto(html.resolve().as_uri())
                    page.wait_for_selector("html[data-rendered]", timeout=60_000)
                    got = page.evaluate(LAYOUT_PROBE)
                    page.screenshot(path=str(out / f"{name}-{width}.png"))
                    print(f"{name} at {width} px: page {got['scrollWidth']} px wide, {len(got['clipped'])} boxes cut,"
                          f" {len(got['spilled'])} past their panel,"
                          f" longest visible block {got['blocks'][0][0] if got['blocks'] else 0} words")
                    page.close()
            browser.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="reports/screenshots")
    ap.add_argument("--calls", default="1,5,100,1000")
    ap.add_argument("--docs", metavar="DIR", help="first screens of the demo and samples reports into DIR instead")
    args = ap.parse_args()
    if args.docs:
        return docs(Path(args.docs))
    from playwright.sync_api import sync_playwright

    from agentprof.report.html import write_report
    from agentprof.report.stages import run_stages
    from agentprof.trace import read

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
        for n in (int(x) for x in args.calls.split(",")):
            trace = read(capture(n, out / "traces"))
            staged = run_stages(trace, systems=["h200+x86", "jalapeno"])
            html = out / f"calls-{n}.html"
            write_report(html, trace, staged.analysis, staged.replay, staged.cache, notes=staged.notes,
                         cache_model=staged.cache_model)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(html.resolve().as_uri())
            page.wait_for_selector("html[data-rendered]", timeout=60_000)
            overflow = page.evaluate("""() => [...document.querySelectorAll('svg')].flatMap(svg => {
                const box = svg.getBoundingClientRect(); const out = [];
                svg.querySelectorAll('rect,text,line,path,circle').forEach(el => { const b = el.getBoundingClientRect();
                  if (b.width && (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 ||
                      b.bottom > box.bottom + 1)) out.push((svg.closest('section')||{}).id + ':' + el.tagName); });
                return out; })""")
            page.screenshot(path=str(out / f"calls-{n}.png"), full_page=True)
            print(f"{n} calls: {html} ({len(overflow)} SVG elements outside their chart: {sorted(set(overflow))[:8]})")
            page.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
