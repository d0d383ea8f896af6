"""``agentprof report`` (the single-file HTML report) and ``agentprof export`` (Perfetto, Mooncake, OTLP JSON)."""

from __future__ import annotations

import re
import webbrowser
from pathlib import Path

import click

from agentprof.distributed.options import cluster_options
from agentprof.errors import AgentprofError
from agentprof.safe_text import console as safe_console


def _load(paths: tuple[str, ...], skip_bad_lines: bool, workers: int | None = None, scheduler: str | None = None):
    from agentprof.distributed.options import load

    return load(paths, workers, scheduler, skip_bad_lines, progress=True)


def _default_name(paths: tuple[str, ...]) -> str:
    stem = Path(paths[0]).name if len(paths) == 1 else "corpus"
    for suffix in (".jsonl", ".json", ".parquet"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-") or "report"


@click.command("report")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="HTML file to write (default: reports/NAME.html).")
@click.option("--system", "-s", "systems", multiple=True, metavar="S",
              help="Serving system for the device what-if (repeatable; `agentprof devices list`; default: "
                   "h200+x86, jalapeno, rubin+vera).")
@click.option("--model", default=None, metavar="NAME",
              help="Open model standing in for the served one: its KV size drives the cache panel and the replay.")
@click.option("--title", default=None, help="Title shown at the top (default: the input's name).")
@click.option("--include-text", is_flag=True,
              help="Include captured prompt/response text in hover details (only if the capture opted in).")
@click.option("--no-analysis", is_flag=True, help="Skip the analysis stage (timeline, counts and exports only).")
@click.option("--no-replay", is_flag=True, help="Skip the device what-if replay.")
@click.option("--skip-bad-lines", is_flag=True, help="Skip unreadable records instead of stopping.")
@click.option("--serving-concurrency", default=None, metavar="LIST",
              help="Concurrencies for the serving panel, e.g. 1,8,50 ('none' skips it; default 1,4,16,50 up "
                   "to 100 sessions, stopping where one system would simulate over 2,000 model calls).")
@click.option("--attention", type=click.Choice(["auto", "tp", "dp"]), default="auto", show_default=True,
              help="Attention layout in the serving panel's simulations (see `agentprof replay --help`).")
@click.option("--serving-levers", is_flag=True,
              help="In the serving panel, simulate what would bring a slow system (TTFT p50 >= 10 s) to seconds: "
                   "FP8 KV, a 2 TB CPU tier, both (one simulation each; `agentprof replay --concurrency` always does).")
@click.option("--deployment", type=click.Choice(["agentic", "benchmark"]), default="agentic", show_default=True,
              help="How each system is deployed in the replay and serving panels (see `agentprof replay --help`).")
@click.option("--serving-bands/--no-serving-bands", default=False,
              help="Add the serving panel's ranges: each system resting on estimates simulated twice more at the "
                   "largest concurrency, at the ranges' fast and slow ends (off by default: about as long as the "
                   "panel itself).")
@click.option("--loadtest", "loadtests", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Add a 'Measured on your backend' panel from an `agentprof loadtest --out FILE` result "
                   "(repeatable: one block per load test).")
@click.option("--open", "open_browser", is_flag=True, help="Open the report in the default browser.")
@click.option("--diff", "as_diff", is_flag=True,
              help="Compare two sides instead: exactly two PATHS, BASE and NEW (each a file or folder of runs); "
                   "writes the `agentprof diff` page.")
@cluster_options
def report(paths: tuple[str, ...], output: str | None, systems: tuple[str, ...], model: str | None,
           title: str | None, include_text: bool, no_analysis: bool, no_replay: bool, skip_bad_lines: bool,
           serving_concurrency: str | None, open_browser: bool, as_diff: bool, workers: int | None = None,
           scheduler: str | None = None, attention: str = "auto", serving_levers: bool = False,
           deployment: str = "agentic", serving_bands: bool = False, loadtests: tuple[str, ...] = ()) -> None:
    """Write one self-contained HTML report (opens offline, no network) for trace files or folders.

    \b
    Example:
      agentprof report traces/run.jsonl -o reports/run.html \\
          --system jalapeno --system h200+x86 --model gpt-oss-120b
      # measured beside predicted:
      agentprof report traces/run.jsonl --loadtest lt-8.json --loadtest lt-32.json
      # BASE and NEW side by side:
      agentprof report --diff traces/main/ traces/pr/ -o reports/diff.html
    """
    if as_diff:
        if loadtests:
            raise click.UsageError("--loadtest adds a panel to a trace's report, not to --diff")
        from agentprof.report.diff_cli import report_diff

        report_diff(paths, output, title, skip_bad_lines, open_browser)
        return
    from agentprof.outputs import checked_output
    from agentprof.report import measured
    from agentprof.report.html import render_payload
    from agentprof.report.payload import build_payload
    from agentprof.report.stages import run_stages
    from agentprof.report.terminal import report_view, show

    out = checked_output(output if output else Path("reports") / f"{_default_name(paths)}.html", (".html", ".htm"),
                         "an HTML report")
    serving = _concurrency_list(serving_concurrency)
    tested = [(Path(f).name, measured.read(f)) for f in loadtests]  # a bad file is an error before the work
    trace = _load(paths, skip_bad_lines, workers, scheduler)
    err = safe_console(stderr=True)
    with err.status("analyzing", spinner="dots") if err.is_terminal else _null():
        res = run_stages(trace, systems, model, analysis=not no_analysis, replay=not no_replay, serving=serving,
                         attention=attention, serving_levers=serving_levers, deployment=deployment,
                         serving_bands=serving_bands)
    if title is None:
        title = Path(paths[0]).name + (f" and {len(paths) - 1} more input{'s' if len(paths) > 2 else ''}"
                                       if len(paths) > 1 else "")
    payload = build_payload(trace, analysis=res.analysis, replay=res.replay, cache=res.cache, title=title,
                            include_text=include_text, notes=res.notes, cache_model=res.cache_model,
                            serving=res.serving,
                            measured=measured.panel(tested, trace.meta.sources) if tested else None)
    try:
        out.write_text(render_payload(payload), encoding="utf-8")
    except OSError as e:
        raise AgentprofError(f"{out}: cannot write: {e.strerror or e}") from None
    show(report_view(str(out), out.stat().st_size, payload))
    if open_browser:
        webbrowser.open(out.resolve().as_uri())


def _concurrency_list(text: str | None) -> list[int] | None:
    """``1,8,50`` -> [1, 8, 50]; ``none`` -> []; None -> None (the default rule)."""
    if text is None:
        return None
    if text.strip().lower() == "none":
        return []
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise AgentprofError(f"--serving-concurrency {text!r}: expected whole numbers like 1,8,50 or 'none'") from None
    if not vals or min(vals) < 1:
        raise AgentprofError(f"--serving-concurrency {text!r}: expected whole numbers >= 1 like 1,8,50 or 'none'")
    return vals


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@click.command("export")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--to", "fmt", required=True,
              type=click.Choice(["perfetto", "mooncake", "otlp-json", "otlp", "speedscope"]),
              help="perfetto: Chrome trace-event JSON (Perfetto UI, chrome://tracing); mooncake: JSONL for "
                   "AIPerf/Dynamo replay; otlp-json: OpenTelemetry spans as OTLP/JSON; otlp: the spans sent "
                   "to an OTLP receiver (--endpoint); speedscope: sampled stacks (a trace captured with "
                   "--sample) for speedscope.app.")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="File to write (every format but otlp).")
@click.option("--endpoint", default=None, help="otlp: the receiver, e.g. http://127.0.0.1:6006 (Phoenix).")
@click.option("--protocol", default="http/protobuf", show_default=True, type=click.Choice(["http/protobuf", "grpc"]),
              help="otlp: how to send.")
@click.option("--block", default=512, show_default=True, type=click.IntRange(min=1),
              help="Mooncake: tokens per hash_ids block (a multiple of the trace's hash block size).")
@click.option("--skip-bad-lines", is_flag=True, help="Skip unreadable records instead of stopping.")
def export(paths: tuple[str, ...], fmt: str, output: str | None, endpoint: str | None, protocol: str, block: int,
           skip_bad_lines: bool) -> None:
    """Export traces for other tools.

    \b
    Examples:
      # open in ui.perfetto.dev:
      agentprof export traces/run.jsonl --to perfetto -o run.trace.json
      # for aiperf --custom-dataset-type mooncake_trace:
      agentprof export traces/kv/ --to mooncake -o kv.mooncake.jsonl
      # open in speedscope.app:
      agentprof export traces/run.jsonl --to speedscope -o run.speedscope.json
      # to Phoenix, Langfuse, a Collector:
      agentprof export traces/run.jsonl --to otlp --endpoint http://127.0.0.1:6006
    """
    if fmt == "otlp":
        if not endpoint:
            raise click.UsageError("--to otlp needs --endpoint URL")
        from agentprof.report.otlp_send import send_otlp

        sent = send_otlp(_load(paths, skip_bad_lines), endpoint, protocol)
        click.echo(f"sent {sent.spans:,} spans of {sent.sessions:,} sessions to {sent.endpoint} "
                   f"({sent.requests:,} requests, {protocol})")
        return
    if output is None:
        raise click.UsageError(f"--to {fmt} needs -o/--output FILE")
    if endpoint is not None:
        raise click.UsageError("--endpoint is for --to otlp")
    from agentprof.outputs import checked_output

    suffixes = {"perfetto": (".json",), "mooncake": (".jsonl", ".json"), "otlp-json": (".json", ".jsonl"),
                "speedscope": (".json",)}[fmt]
    out = checked_output(output, suffixes, f"--to {fmt}", bare_ok=True)
    trace = _load(paths, skip_bad_lines)
    try:
        if fmt == "perfetto":
            from agentprof.report.perfetto import write_perfetto

            st = write_perfetto(trace, out)
            msg = f"{st['slices']:,} slices in {st['sessions']:,} sessions"
            if st["skipped_untimed"]:
                msg += f"; {st['skipped_untimed']:,} spans without times left out"
        elif fmt == "mooncake":
            from agentprof.report.mooncake import write_mooncake

            ms = write_mooncake(trace, out, block)
            msg = f"{ms.requests:,} requests, {ms.unique_blocks:,} distinct {block}-token blocks"
            notes = []
            if ms.calls_without_hashes:
                notes.append(f"{ms.calls_without_hashes:,} calls had no prompt hashes (fresh ids, no reuse)")
            if ms.calls_without_output:
                notes.append(f"{ms.calls_without_output:,} calls had no output count (written as 1)")
            if ms.calls_without_time:
                notes.append(f"{ms.calls_without_time:,} calls had no start time (kept in order)")
            if ms.skipped_no_length:
                notes.append(f"{ms.skipped_no_length:,} calls with no input length left out")
            if notes:
                msg += "; " + "; ".join(notes)
        elif fmt == "speedscope":
            from agentprof.report.speedscope import write_speedscope

            sp = write_speedscope(trace, out)
            msg = f"{sp['samples']:,} samples in {sp['profiles']:,} profiles, {sp['frames']:,} frames"
        else:
            from agentprof.report.otlp import write_otlp_json

            n = write_otlp_json(trace, out)
            msg = f"{n:,} spans"
    except OSError as e:
        raise AgentprofError(f"{out}: cannot write: {e.strerror or e}") from None
    click.echo(f"wrote {out} ({msg})")
