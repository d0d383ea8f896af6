"""``agentprof loadtest``: replay recorded sessions against a real OpenAI-compatible endpoint and measure them."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

_CTX = {"help_option_names": ["-h", "--help"]}


@click.command("loadtest", context_settings=_CTX)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--endpoint", required=True, metavar="URL",
              help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, a provider).")
@click.option("--model", required=True, metavar="NAME", help="Model name the endpoint serves.")
@click.option("--concurrency", type=int, default=1, show_default=True, help="Sessions in flight at once.")
@click.option("--sessions", type=int, metavar="K",
              help="Session instances to run (recorded sessions cycled); default: every recorded session, at "
                   "least --concurrency.")
@click.option("--max-calls", type=int, metavar="M", help="Send only each session's first M calls (a short test).")
@click.option("--cap-wait", type=float, metavar="SECONDS",
              help="Cap every gap between a reply and the next call (tools, thinking, a human) at SECONDS.")
@click.option("--time-scale", type=float, default=1.0, show_default=True,
              help="Scale the recorded gaps (0.1: ten times faster) before --cap-wait.")
@click.option("--api", type=click.Choice(["chat", "responses"]), default="chat", show_default=True)
@click.option("--predict", metavar="SYSTEM",
              help="Also simulate the same sessions on a catalogued system and show the error per figure.")
@click.option("--predict-model", metavar="MODEL",
              help="Catalog model for --predict (default: --model through the catalog's stand-ins).")
@click.option("--tokenizer", metavar="SPEC",
              help="Check the synthetic prompt words against this tokenizer (tokenizer.json path or cl100k).")
@click.option("--template-tokens", type=int, metavar="N",
              help="Chat-template tokens the server adds to a prompt (default: asked of its /tokenize, else 0).")
@click.option("--seed", type=int, metavar="N",
              help="Fix the synthetic text (default: new text each run, so a run never hits an earlier run's "
                   "cached blocks; the same seed twice measures a warm cache).")
@click.option("--price", metavar="IN,OUT[,CACHED]",
              help="USD per million tokens for cost per task (default: the catalog's provider price).")
@click.option("--retries", type=int, default=2, show_default=True,
              help="Retries of a call that fails to connect or gets 429/5xx before its stream starts.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds to wait on the server (to connect, and for each read of a stream).")
@click.option("--api-key", envvar="OPENAI_API_KEY", default="EMPTY", show_default=False,
              help="Bearer key (default: $OPENAI_API_KEY, else none).")
@click.option("--ignore-eos/--no-ignore-eos", default=True, show_default=True,
              help="Ask the server to ignore end-of-sequence so every reply is max_tokens long (vLLM, SGLang).")
@click.option("--client", "engine", type=click.Choice(["httpx", "sdk"]), default="httpx", show_default=True,
              help="Load engine: httpx (lean stream reading) or sdk (the openai SDK's AsyncOpenAI).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--out", "out_json", type=click.Path(dir_okay=False), metavar="FILE.json",
              help="Also write the result as JSON, for `agentprof report TRACE --loadtest FILE.json`.")
@click.option("--html", "out_html", type=click.Path(dir_okay=False), metavar="FILE.html",
              help="Also write the result as a one-file HTML page (the report's 'Measured on your backend' panel).")
def loadtest_cmd(paths: tuple[str, ...], endpoint: str, model: str, concurrency: int, sessions: int | None,
                 max_calls: int | None, cap_wait: float | None, time_scale: float, api: str, predict: str | None,
                 predict_model: str | None, tokenizer: str | None, template_tokens: int | None, seed: int | None,
                 price: str | None,
                 retries: int, timeout_s: float, api_key: str, ignore_eos: bool, engine: str,
                 as_json: bool, out_json: str | None = None, out_html: str | None = None) -> None:
    """Replay recorded agent sessions against your endpoint and measure TTFT, TPOT, cache hits and cost per task.

    Each session's calls go in order with the recorded gaps between them, --concurrency sessions at once.
    Prompts are synthetic text with the trace's lengths and prefix-block reuse (no recorded text is sent), so
    the server's prefix cache sees the hits the real agent caused.

    \b
    Example:
      agentprof loadtest traces/samples/kv-cache-tester \\
          --endpoint http://127.0.0.1:8000/v1 --model served --concurrency 8 \\
          --max-calls 10 --cap-wait 5 --predict h200+x86 --out lt-8.json
      agentprof report traces/samples/kv-cache-tester --loadtest lt-8.json
    """
    from agentprof.errors import AgentprofError
    from agentprof.importers import load_any
    from agentprof.loadtest.client import Endpoint
    from agentprof.loadtest.results import parse_price
    from agentprof.loadtest.run import loadtest
    from agentprof.outputs import checked_output

    if retries < 0:
        raise AgentprofError(f"--retries must be at least 0, got {retries}")
    if not timeout_s > 0:
        raise AgentprofError(f"--timeout must be positive, got {timeout_s}")
    if template_tokens is not None and template_tokens < 0:
        raise AgentprofError(f"--template-tokens must be at least 0, got {template_tokens}")
    p = parse_price(price) if price else None
    json_path = checked_output(out_json, (".json",), "a load-test result") if out_json else None
    html_path = checked_output(out_html, (".html", ".htm"), "a load-test page") if out_html else None
    ep = Endpoint(endpoint, model, api, api_key or "EMPTY", timeout_s, retries, ignore_eos, client=engine)
    trace = load_any(list(paths))
    progress, on_start, on_call = _progress(os.environ.get("AGENTPROF_PROGRESS") != "0")
    try:
        res = loadtest(trace, ep, concurrency, sessions, max_calls, cap_wait, time_scale, predict, predict_model,
                       tokenizer, p, template_tokens, seed, on_call=on_call, on_start=on_start)
    finally:
        if progress is not None:
            progress.stop()
    d = res.to_dict()
    _write(json_path, lambda: json.dumps(d, indent=2) + "\n")
    if html_path is not None:
        from agentprof.report.html import render_measured
        from agentprof.report.measured import panel

        _write(html_path, lambda: render_measured(panel([(json_path.name if json_path else "", d)]),
                                                  f"load test: {d['model']} at {d['endpoint']}"))
    if as_json:
        click.echo(json.dumps(d, indent=2))
    else:
        print_result(d)
    for path in (json_path, html_path):
        if path is not None:
            click.echo(f"wrote {path}", err=True)


def _write(path: Any, text: Any) -> None:
    """Write ``text()`` to ``path`` (nothing when ``path`` is None); a failed write is one error line."""
    from agentprof.errors import AgentprofError

    if path is None:
        return
    try:
        path.write_text(text(), encoding="utf-8")
    except OSError as e:
        raise AgentprofError(f"{path}: cannot write: {e.strerror or e}") from None


def _progress(enabled: bool) -> tuple[Any, Any, Any]:
    """A rich progress line on stderr (calls answered of calls to send), or nothing when stderr is not a
    terminal; returns (progress, on_start, on_call)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentprof.safe_text import console as safe_console

    con = safe_console(stderr=True)
    if not enabled or not con.is_terminal:
        return None, lambda n: None, lambda r: None
    prog = Progress(TextColumn("loadtest"), BarColumn(), MofNCompleteColumn(), TextColumn("calls"),
                    TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), console=con, transient=True)
    state: dict[str, Any] = {}

    def on_start(n: int) -> None:
        prog.start()
        state["task"] = prog.add_task("calls", total=n, failed=0)
        state["failed"] = 0

    def on_call(r: Any) -> None:
        state["failed"] += r.error is not None
        prog.update(state["task"], advance=1, failed=state["failed"])

    return prog, on_start, on_call


def print_result(d: dict[str, Any]) -> None:
    """The terminal view: what ran, then one row per figure (measured, predicted, error); fits 80 columns. The
    rows are the report panel's (:func:`agentprof.report.measured.run_view`), made once for both."""
    from agentprof.report.measured import run_view
    from agentprof.report.terminal import measured_view, show

    show(measured_view({"status": "ok", "runs": [run_view(d, "loadtest")]}, title=""))
    sys.stdout.flush()
