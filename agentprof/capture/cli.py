"""``agentprof run``: the capture stage's command."""

from __future__ import annotations

import os
import signal
import sys

import click

from agentprof.capture.runner import CommandFailedToStart, run_command


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", default="traces/", show_default=True, help="Folder for the trace file.")
@click.option("--name", default=None, help="Run name (default: the script or module name).")
@click.option("--capture-content", is_flag=True, help="Also store prompt and response text (off: hashes only).")
@click.option("--instrument-subprocess", is_flag=True, help="Record child processes as tool spans.")
@click.option("--instrument-json", is_flag=True, help="Record json.loads calls as parse spans.")
@click.option("--sample", is_flag=True, help="Also sample every thread's stack (which functions take the time).")
@click.option("--sample-interval", type=str, default=None, metavar="MS",
              help="Milliseconds between stack samples, 0.1 to 10000 (implies --sample; default 10).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(out: str, name: str | None, capture_content: bool, instrument_subprocess: bool, instrument_json: bool,
        sample: bool, sample_interval: str | None, command: tuple[str, ...]) -> None:
    """Run an unmodified Python program and record its model calls into one trace.

    Calls through the openai and anthropic SDKs are recorded for the whole process; functions decorated
    with @agentprof.tool become tool spans. The trace path is printed at the end; the program's exit
    status is passed through. Ctrl-C and signals reach the program as without agentprof; if the trace
    cannot be set up, the program runs unprofiled after one warning.

    \b
    Example:
      agentprof run -- python my_agent.py --task fix-bug
      agentprof run --out traces/ --instrument-subprocess -- python -m my_agent
      agentprof run --sample -- python my_agent.py
    """
    from agentprof.capture.sampler import DEFAULT_INTERVAL_S

    if command[0].startswith("-"):  # an unknown option of run's, not a program (no program starts with '-')
        raise click.UsageError(f"No such option: {command[0]}")
    interval = _interval_s(sample_interval) if sample_interval is not None else DEFAULT_INTERVAL_S if sample else None
    warned: list[str] = []

    def warn(message: str) -> None:  # the one warning of a failed recording set-up (then: unprofiled)
        warned.append(message)
        click.echo(message, err=True)

    try:
        rc, path, died_of = run_command(list(command), out=out, name=name, capture_content=capture_content,
                                        instrument_subprocess=instrument_subprocess, instrument_json=instrument_json,
                                        sample=interval, warn=warn)
    except CommandFailedToStart as e:  # as a shell would: 127 command not found, 126 not executable
        click.echo(f"error: {e}", err=True)
        sys.exit(e.exit_code)
    if path is None and not warned:
        click.echo("agentprof: no trace recorded (the command did not start a Python program that could "
                   "import agentprof, or its program never ran)", err=True)
    elif path is not None:
        click.echo(f"agentprof: trace written to {path}", err=True)
    if died_of == signal.SIGINT:  # die of it too, so a calling shell script stops as it would without agentprof
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(rc)


def _interval_s(text: str) -> float:
    """``--sample-interval`` in seconds; a value that is not a number is NaN, refused by the runner's range
    check (a recording-only option: the program still runs, unprofiled, after one warning)."""
    try:
        return float(text) / 1000
    except ValueError:
        return float("nan")
