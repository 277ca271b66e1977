"""``testfleet plan``: resolve a CI trigger into jobs and the fate of every registration."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from testfleet import color
from testfleet.cli import _verbosity
from testfleet.cli._common import (
    database_option,
    generated_workflow,
    history_location_problem,
    project_from,
    write_output,
)
from testfleet.cli._options import format_option
from testfleet.cli._trigger import (
    PullRequestMoved,
    TriggerOptions,
    build_request,
    trigger_options,
)
from testfleet.errors import TestfleetError, UsageError
from testfleet.findings import Finding
from testfleet.integrations.plan_formats import FORMATS, render_table

if TYPE_CHECKING:
    from testfleet.breaker.runners import RunnerInventory
    from testfleet.integrations.workflow_fit import WorkflowJobs
    from testfleet.planning.model import Plan

MAX_FINDINGS_SHOWN = 20


class RegistryInvalid(TestfleetError):
    """The tree has registration errors and ``--strict`` asked for no plan at all."""

    exit_code = 1


class TreeHasErrors(TestfleetError):
    """The plan was made and written, but the tree has errors (exit 1, after the output)."""

    exit_code = 1


def _annotation(message: str) -> str:
    """A GitHub ``::warning::`` command whose data cannot start a second command; a warning that
    repeats on every run with nothing to fix (see :func:`is_note`) is a ``::notice::``."""
    data = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    kind = "notice" if is_note(message) else "warning"
    return f"::{kind} title=testfleet plan::{data}"


def is_note(message: str) -> bool:
    """Warnings that every run repeats without anything to fix: a project that has no
    history database yet. (A PR label that is not a CI label is not even a note.)"""
    return message.startswith("no history database at ")


@click.command("plan")
@trigger_options
@format_option(list(FORMATS), "table for people, json for tools (testfleet.plan/1), markdown "
                              "for a step summary, github for $GITHUB_OUTPUT, buildkite for a "
                              "pipeline upload.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="FILE", help="Write the output to FILE (atomically) instead of standard "
                                   "output (or, for --format github, instead of $GITHUB_OUTPUT).")
@click.option("--plan-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="FILE", help="Also write the plan JSON to FILE, whatever --format is.")
@database_option("Duration estimates come from it; unavailable history falls back to est_time.")
@click.option("--strict", is_flag=True,
              help="Make no plan at all when the tree has registration errors (default: plan what is "
                   "valid, give each invalid registration the fate 'invalid', exit 1).")
@click.option("--fits-workflow", "fits_workflow", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="Refuse (exit 2, after writing) a plan that the generated workflow FILE "
                   "cannot run: a stage with jobs but no job there, or whose runs-on or CI "
                   "settings there differ (regenerate it with testfleet init --github --force).")
@click.option("--runners", "runners_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="The self-hosted runners, as GitHub's runners API returns them (GET "
                   "/repos/OWNER/REPO/actions/runners): a lane whose labels no online runner "
                   "carries gets the fate 'no-runner-online' instead of jobs that would wait. "
                   "Without it runner availability is not checked.")
@click.pass_context
def command(ctx: click.Context, trigger_options: TriggerOptions, fmt: str, output: Path | None,
            plan_file: Path | None, database: str | None, strict: bool,
            fits_workflow: Path | None, runners_file: Path | None) -> int:
    """Resolve a CI trigger into a plan: jobs per stage and shard, and for every
    registration not in a job the one reason why.

    \b
    Exit status: 0 plan made, tree clean; 1 plan made and written, but the tree
    has registration errors (each invalid registration has the fate 'invalid';
    with --strict: no plan); 2 usage or configuration error.

    \b
    Examples:
      testfleet plan --labels run-ci-megatron --fork
      testfleet plan --schedule "0 15 * * 6" --format json -o plan.json
      testfleet plan --github --format github --plan-file plan.json
      testfleet plan --stage stage-c-4-gpu-h200 --cadence nightly
      testfleet plan --file tests/unit/test_fault_injection_cpu.py --include-disabled
    """
    from testfleet.planning.model import plan_bytes
    from testfleet.registry import collect

    project = project_from(ctx)
    base = ctx.find_root().obj.directory
    runners = _runners(runners_file, Path(base)) if runners_file is not None else None
    try:
        request = build_request(project, base, trigger_options)
    except PullRequestMoved as exc:
        if os.environ.get("GITHUB_ACTIONS") == "true":  # on the run's page, not only its log
            click.echo(_error_annotation(str(exc)))
        raise
    registry = collect(project, gates=False)
    errors = [f for f in registry.findings if f.severity == "error"]
    if errors and strict:
        raise RegistryInvalid(_errors_message(errors, "fix them before planning (--strict)"), errors)

    # Measured durations (median/p90 of recent passing runs per file and stage) and the
    # flaky quarantine; when history is unavailable the literals are used and the plan's
    # warnings say so.
    from testfleet.app.plan import plan_from_history

    plan, _ = plan_from_history(project, registry, request, database, notes_in_plan=True,
                                history_problem=history_location_problem(project, database),
                                runners=runners)

    if plan_file is not None:
        write_output(plan_file if plan_file.is_absolute() else base / plan_file, plan_bytes(plan),
                     "--plan-file")

    fit: WorkflowJobs | None = None  # the --fits-workflow file, read once
    to_stdout = output is None or str(output) == "-"
    if fmt == "table" and to_stdout and color.terminal():
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else color.PIPE_WIDTH
        text = render_table(plan, color=color.wanted(), width=width)
    elif fmt == "github" and fits_workflow is not None:
        # the workflow's jobs that run several lanes read one matrix for all of them
        from testfleet.integrations.plan_formats import render_github

        fit = generated_workflow(fits_workflow if fits_workflow.is_absolute()
                                 else base / fits_workflow, "--fits-workflow")
        text = render_github(plan, {key: lanes for key, (lanes, _) in fit.groups.items()})
    else:
        text = FORMATS[fmt](plan)

    annotated = False
    if output is not None and str(output) != "-":
        target = output if output.is_absolute() else base / output
        write_output(target, text.encode("utf-8"))
        _verbosity.note(f"wrote {target}")
    elif fmt == "github" and os.environ.get("GITHUB_OUTPUT"):
        target = Path(os.environ["GITHUB_OUTPUT"])
        try:
            with target.open("a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise UsageError(f"cannot append to $GITHUB_OUTPUT ({target}): "
                             f"{exc.strerror or exc}") from None
        for warning in plan.warnings:
            click.echo(_annotation(warning))
        annotated = True
        click.echo(f"testfleet: {len(plan.jobs)} job(s) in {plan.waves} wave(s) written to "
                   f"$GITHUB_OUTPUT; {len(plan.holes)} coverage hole(s)")
    else:
        # click strips ANSI from a pipe unless told: FORCE_COLOR's table keeps its colour
        click.echo(text, nl=False, color=color.wanted())

    if fmt != "table" and not annotated:  # under GitHub Actions each warning is shown once
        for warning in plan.warnings:
            if is_note(warning):
                _verbosity.note(warning)
            else:
                click.echo(f"testfleet: warning: {warning}", err=True)
    if fits_workflow is not None:
        path = fits_workflow if fits_workflow.is_absolute() else base / fits_workflow
        _check_fits(plan, path, fit or generated_workflow(path, "--fits-workflow"))
    if errors:
        # The plan is out; now say loudly that the tree is broken, so that a pull request
        # introducing an error cannot pass a required check.
        summary = (f"the tree has {len(errors)} registration error(s); {len(registry.invalid)} "
                   "invalid registration(s) are in no job (fate 'invalid')")
        if os.environ.get("GITHUB_ACTIONS") == "true":
            click.echo(_error_annotation(summary + "; run 'testfleet check'"))
        raise TreeHasErrors(_errors_message(errors, "the plan above leaves them out"), errors)
    return 0


def _runners(path: Path, base: Path) -> RunnerInventory:
    """``--runners FILE`` read and parsed; any problem is a usage error naming the file and
    the place in it (exit 2)."""
    from testfleet.breaker.runners import RunnersError, parse_runners
    from testfleet.fileio import read_capped

    target = path if path.is_absolute() else base / path
    try:
        raw = read_capped(target, 32 << 20)
    except OSError as exc:
        raise UsageError(f"--runners: cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--runners: {path}: not UTF-8 (byte {exc.start})") from None
    try:
        return parse_runners(text, f"--runners {path}")
    except RunnersError as exc:
        raise UsageError(str(exc)) from None


def _check_fits(plan: Plan, workflow: Path, fit: WorkflowJobs) -> None:
    """Refuse a plan the workflow that runs it was not generated for (each reason as an
    error annotation on the run's page under GitHub Actions)."""
    import json

    from testfleet.integrations.workflow_fit import misfits
    from testfleet.planning.model import plan_bytes

    reasons = misfits(json.loads(plan_bytes(plan)), fit.lanes, fit.groups)
    if not reasons:
        return
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for reason in reasons:
            click.echo(f"::error title=testfleet::{reason}")
    raise UsageError(f"the plan does not fit {workflow.name}:\n"
                     + "\n".join(f"  {r}" for r in reasons))


def _error_annotation(message: str) -> str:
    data = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::error title=testfleet plan::{data}"


def _errors_message(errors: list[Finding], tail: str) -> str:
    first, more = _verbosity.cap(errors, MAX_FINDINGS_SHOWN)
    shown = "\n".join("  " + f.render() for f in first)
    return (f"the tree has {len(errors)} registration error(s); {tail} "
            f"('testfleet check' lists them all):\n{shown}"
            + (f"\n  {_verbosity.more(more)}" if more > 0 else ""))
