"""Helpers shared by the command modules: loading the project, options, writing outputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from testfleet.cli import _verbosity
from testfleet.cli._options import FormatChoice, format_option, write_output
from testfleet.config import Project, load_project
from testfleet.errors import UsageError

if TYPE_CHECKING:
    from testfleet.integrations.workflow_fit import WorkflowJobs

_F = TypeVar("_F", bound=Callable[..., Any])

_DATABASE_HELP = ("postgresql://user:pass@host/db or a SQLite path; default: TESTFLEET_DATABASE_URL, "
                  "then the config's 'database', then <cache_dir>/history.db.")


__all__ = ["FormatChoice", "database_option", "human_format_option", "project_from", "write_output"]


def project_from(ctx: click.Context) -> Project:
    app = ctx.find_root().obj
    project = load_project(app.directory, app.config_file)
    loaded(project)
    return project


def loaded(project: Project) -> None:
    """With -v: which configuration the command read (the first thing to know when a
    result surprises)."""
    _verbosity.detail(f"configuration {project.config_path} (project root {project.root})")


def human_format_option(json_help: str) -> Callable[[_F], _F]:
    """``--format table|json`` for a command whose human output used to be called ``text``
    (still accepted, with a note)."""
    return format_option(["table", "json"], f"table for people, json for tools ({json_help}).",
                         aliases={"text": "table"})


def database_option(note: str = "") -> Callable[[_F], _F]:
    """``--database URL``, spelt and explained the same by every command that uses history;
    ``note`` says what this command does with it (e.g. when it is unavailable)."""
    return click.option("--database", "database", metavar="URL", default=None,
                        help=_DATABASE_HELP + (f" {note}" if note else ""))


def single_line(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback for free text that is stored (a run id, a commit): a newline or
    other control character would forge lines in every listing that shows it, so it is
    a usage error naming the option (also when the value came from the environment)."""
    if value is None:
        return None
    bad = next((c for c in value if ord(c) < 32 or 127 <= ord(c) < 160), None)
    if bad is not None:
        name = param.opts[0] if param.opts else str(param.name)
        if ctx.get_parameter_source(str(param.name)) is click.core.ParameterSource.ENVIRONMENT:
            name = f"{name} (from ${param.envvar})" if isinstance(param.envvar, str) else name
        shown = value if len(value) <= 80 else value[:60] + f"… ({len(value)} characters)"
        raise UsageError(f"{name} {shown!r}: contains a control character (U+{ord(bad):04X}); "
                         "give a single line of printable text")
    return value


def history_location_problem(project: Project, url: str | None) -> str | None:
    """Why a SQLite history database cannot exist where it is configured, when a file
    stands where a directory must be (``<project>/.testfleet`` as a regular file): the
    estimates layer would only see "no database there yet", which sends the user looking
    for a missing history instead of the file in the way. None when nothing is wrong."""
    from testfleet.store.engine import resolve_target
    from testfleet.store.errors import StoreError

    try:
        target = resolve_target(project, url)
    except StoreError:
        return None  # the estimates layer reports an unusable URL itself
    if target.path is None:
        return None
    for parent in target.path.parents:  # the nearest ancestor that exists must be a directory
        if parent.exists():
            if parent.is_dir():
                return None
            try:
                shown = parent.relative_to(project.root).as_posix()
            except ValueError:
                shown = str(parent)
            what = " (the config's cache_dir)" if target.default else ""
            return (f"the history database {target.display} cannot exist: {shown}{what} is a file, "
                    "not a directory; move or remove that file")
    return None


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Click callback: NaN passes a FloatRange (every comparison with it is false) and
    would turn a prune cutoff or a drift factor into nonsense; refuse it and infinities."""
    import math

    if value is not None and not math.isfinite(value):
        name = param.opts[0] if param.opts else str(param.name)
        raise click.BadParameter(f"{value!r} is not a finite number", ctx=ctx, param_hint=name)
    return value



def generated_workflow(path: Path, option: str) -> WorkflowJobs:
    """The stage jobs of the generated workflow an option names (exit 2 when unreadable)."""
    from testfleet.integrations.workflow_fit import read_workflow

    try:
        return read_workflow(path)
    except ValueError as exc:
        raise UsageError(f"{option}: cannot read {path}: {exc}") from None
