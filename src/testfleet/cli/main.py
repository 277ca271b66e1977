"""The ``testfleet`` entry point.

Subcommands are loaded lazily (``cli/<verb>.py`` each exposes ``command``) so that
``testfleet plan`` does not pay for the runner's, the store's or the report's imports.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from testfleet import __version__
from testfleet.cli import _verbosity

COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("testfleet.cli.check", "Validate config and every registration; all errors at once."),
    "list": ("testfleet.cli.list_cmd", "The registry as a table, JSON or CSV."),
    "plan": ("testfleet.cli.plan", "Resolve a CI trigger into a plan of jobs and fates."),
    "run": ("testfleet.cli.run", "Run one job of a plan (or a stage shard)."),
    # exactly once (issue #26)
    "reconcile": ("testfleet.cli.reconcile", "Check that every planned file ran exactly once."),
    "gate": ("testfleet.cli.gate", "Evaluate metric records, show history, untrust runs."),
    "durations": ("testfleet.cli.durations", "Import, show and correct test durations."),
    "db": ("testfleet.cli.db", "Create or migrate the history database."),
    "history": ("testfleet.cli.history", "Export, merge and inspect portable history bundles."),
    "report": ("testfleet.cli.report", "Disabled ledger, coverage, holes, balance, trends."),
    "init": ("testfleet.cli.init", "Scaffold config and a CI workflow."),
    "schema": ("testfleet.cli.schema", "Print a published JSON Schema (config, or a --format json output)."),
    # results (issue #14)
    "results": ("testfleet.cli.results", "Last outcomes per file and stage, with CI run links."),
    "flaky": ("testfleet.cli.flaky", "Flaky, recovered and broken files per stage."),
    "disable": ("testfleet.cli.disable", "Disable registrations in place with a tracked reason."),
    "enable": ("testfleet.cli.enable", "Restore disabled registrations (by --ref #N or file)."),
    # incidents (issue #29)
    "incident": ("testfleet.cli.incident", "Failures grouped by cause; make a broken stage dormant."),
    # moving a project over (issue #39)
    "shadow": ("testfleet.cli.shadow", "Compare what testfleet would run with what the old CI ran."),
    # elastic execution (issue #40)
    "queue": ("testfleet.cli.queue", "Queue mode: what a plan's queue lanes hold."),
    "action": ("testfleet.cli.action", "One step of testfleet's GitHub Action (inputs from TESTFLEET_*)."),
    # the runner-class breaker (issue #41)
    "breaker": ("testfleet.cli.breaker", "Runner-class breakers: show their state, or force one."),
}


class LazyGroup(click.Group):
    """Loads a command's module when it is asked for, and gives the command (and its
    subcommands) the global ``-q``/``-v`` so that they work after the command too."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        _verbosity.reset()  # one invocation, one level (tests call main() many times)
        return super().make_context(info_name, args, parent=parent, **extra)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command: click.Command = module.command
        return _verbosity.add_to(command)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # Raised here, before click's own EPIPE handling can turn it into exit 1.
            raise SystemExit(_closed_pipe()) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class AppContext:
    """What global options decide for every command."""

    def __init__(self, directory: Path, config_file: Path | None) -> None:
        self.directory = directory
        self.config_file = config_file

    @property
    def quiet(self) -> bool:
        return _verbosity.quiet()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="testfleet")
@click.option("-C", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Run as if testfleet was started in DIR.", metavar="DIR")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Use this configuration file instead of searching for one.", metavar="FILE")
@click.pass_context
def cli(ctx: click.Context, directory: Path | None, config_file: Path | None) -> None:
    """testfleet: plan, shard, run and gate multi-backend CI test fleets.

    Every command takes -q (no notes, no progress) and -v (every detail on stderr), before
    or after its name; neither changes standard output or the exit status. Exit status:
    0 success, 1 findings or failed tests, 2 usage or input errors.

    \b
    Examples:
      testfleet check
      testfleet list --stage stage-a-cpu
      testfleet plan --labels run-ci-megatron --fork
      testfleet -v run --stage stage-a-cpu --shard 1/4 --dry-run
      testfleet -q report --format markdown -o report.md
    """
    from testfleet import progress

    progress.configure(quiet=_verbosity.quiet())
    base = Path.cwd()
    if directory is not None:
        base = (base / directory).resolve()
        if not base.is_dir():
            raise click.UsageError(f"-C {directory}: not a directory")
    if config_file is not None and not config_file.is_absolute():
        config_file = (Path.cwd() / config_file).resolve()
    ctx.obj = AppContext(base, config_file)


_verbosity.add_to(cli)


def _closed_pipe() -> int:
    """A closed pipe (``testfleet list | head``) is not an error worth a traceback, nor a
    finding (exit 1 would read as one): exit as a Unix tool killed by SIGPIPE does."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13


def main(argv: list[str] | None = None) -> None:
    from testfleet.errors import TestfleetError

    try:
        code = cli.main(args=argv, prog_name="testfleet", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        # One style for every error, click's own included: "testfleet: error: ...".
        click.echo(f"testfleet: error: {exc.format_message()}", err=True)
        if isinstance(exc, click.UsageError):
            where = exc.ctx.command_path if exc.ctx is not None else "testfleet"
            click.echo(f"(see '{where} --help')", err=True)
            sys.exit(2)
        sys.exit(exc.exit_code)
    except TestfleetError as exc:
        click.echo(f"testfleet: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(_closed_pipe())
    except KeyboardInterrupt:
        sys.exit(130)
    else:
        sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
