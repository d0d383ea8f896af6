"""The ``agentprof`` command line: a thin click group; each command lives with the stage it drives.

Commands are imported lazily so ``agentprof --help`` is fast and a stage's dependencies load only when used.
User errors (:class:`~agentprof.errors.AgentprofError`) print one line and exit with status 2.
"""

from __future__ import annotations

import importlib
import sys

import click

from agentprof import __version__
from agentprof.errors import AgentprofError, did_you_mean

# command name -> "module:attribute" of a click.Command
COMMANDS: dict[str, str] = {
    "run": "agentprof.capture.cli:run",
    "import": "agentprof.importers.cli:import_cmd",
    "analyze": "agentprof.analysis.cli:analyze",
    "cachesim": "agentprof.analysis.cli:cachesim",
    "replay": "agentprof.replay.cli:replay",
    "devices": "agentprof.replay.cli:devices",
    "capacity": "agentprof.replay.serving.cli:capacity_cmd",
    "report": "agentprof.report.cli:report",
    "export": "agentprof.report.cli:export",
    "demo": "agentprof.demo.cli:demo",
    "diff": "agentprof.report.diff_cli:diff",
    "loadtest": "agentprof.loadtest.cli:loadtest_cmd",
    "collect": "agentprof.collect.cli:collect",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                           list[str]]:
        """Click's resolution, with a suggestion for a mistyped command (``analyse`` → ``analyze``)."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand:
            name = str(args[0])
            raise click.UsageError(f"No such command {name!r}{did_you_mean(name, COMMANDS)}", ctx) from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            reason = str(e)

            @click.command(cmd_name, help=f"(unavailable: {reason})")
            def _missing() -> None:
                raise click.ClickException(f"command {cmd_name!r} is unavailable: {reason}")

            return _missing


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentprof")
def cli() -> None:
    """Where does an AI agent's time go, and what would change it?

    \b
    Example:
      agentprof demo    # capture, import, analyze, replay, report: a bundled run
      agentprof import ~/.claude/projects/my-project/ -o traces/mine.parquet
      agentprof analyze traces/mine.parquet
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI and turn user errors into one clear line."""
    try:
        cli.main(args=argv, prog_name="agentprof", standalone_mode=False)
    except AgentprofError as e:
        from agentprof.safe_text import shown

        click.echo(f"error: {shown(e, 2000)}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:  # wrong option or argument: one line, like every other user error
        where = e.ctx.command_path if e.ctx is not None else "agentprof"
        click.echo(f"error: {e.format_message().rstrip('.')} (see '{where} --help')", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
