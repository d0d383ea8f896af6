"""``agentprof demo``: the whole pipeline on a bundled agent and a bundled real session, in seconds, offline."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from agentprof.demo.latency import DEFAULT_SYSTEM
from agentprof.demo.samples import DEFAULT_SAMPLE, SAMPLES
from agentprof.errors import AgentprofError
from agentprof.outputs import unwritable_folder


@click.command("demo")
@click.option("--out", "out_dir", default="reports/", show_default=True, type=click.Path(file_okay=False),
              help="Folder for demo.html.")
@click.option("--traces", "traces_dir", default="traces/", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the captured trace (demo-agent-<UTC time>.jsonl).")
@click.option("--system", "-s", "systems", multiple=True, metavar="S",
              help="Serving system to replay both traces on (repeatable; `agentprof devices list`; default: "
                   "h200+x86, jalapeno, rubin+vera).")
@click.option("--serve-on", default=DEFAULT_SYSTEM, show_default=True, metavar="SYSTEM",
              help="System whose device model sets the loopback model's latencies (serving gpt-oss-120b).")
@click.option("--sample", default=DEFAULT_SAMPLE, show_default=True, metavar="NAME|PATH",
              help=f"Real trace to set beside the captured run: a bundled one ({', '.join(SAMPLES)}) or a trace "
                   "file/folder of yours.")
@click.option("--open", "open_browser", is_flag=True, help="Open the report in the default browser.")
def demo(out_dir: str, traces_dir: str, systems: tuple[str, ...], serve_on: str, sample: str,
         open_browser: bool) -> None:
    """Capture a real agent run, import a real public session, analyze, replay and report both side by side.

    A bundled coding agent (real openai SDK, real tools, tests in a child process) fixes a bug in a small
    repository while a model server on 127.0.0.1 answers from a script with latencies from a device model:
    no network, no API key, no model weights. The model's answers and latencies are simulated; the rest is
    real. Writes the trace to --traces and OUT/demo.html.

    \b
    Examples:
      agentprof demo
      agentprof demo --out /tmp/demo --system jalapeno --system b200+vera \\
          --sample claude-code --open
    """
    import importlib.util

    from rich.text import Text

    from agentprof.demo.run import run_demo
    from agentprof.safe_text import console as safe_console

    if importlib.util.find_spec("openai") is None:  # the bundled agent is plain code on the real openai SDK
        raise AgentprofError("the demo's agent needs the openai SDK: pip install 'agentprof[openai]'")
    from agentprof.demo.terminal import show_result

    con = safe_console()
    err = safe_console(stderr=True)

    def step(msg: str) -> None:
        err.print(Text("▸ " + msg, style="dim"))

    for folder in (out_dir, traces_dir):  # checked before any work, nothing created yet
        problem = unwritable_folder(Path(folder))
        if problem:
            raise AgentprofError(f"{folder}: cannot write: {problem}")
    result = run_demo(out_dir=out_dir, traces_dir=traces_dir, systems=systems, serve_on=serve_on, sample=sample,
                      step=step)
    show_result(result, con)
    if open_browser:
        webbrowser.open(result.report_path.resolve().as_uri())
