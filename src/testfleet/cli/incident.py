"""``testfleet incident``: failures of a CI run grouped by signature; make a stage dormant.

    testfleet incident list [--runs N] [--stage STAGE] [--format table|json]
    testfleet incident dormant STAGE [--run RUN] [--ref URL|#N] [--dry-run]

``list`` reads history and judges nothing: exit 0. ``dormant`` writes one line,
``disabled = "<the incident, its reference>"``, into the stage's table of the
configuration and changes no other byte; exit 2 when there is no infrastructure
incident that took STAGE whole, the stage is dormant already, or the line cannot be
written safely (nothing is written then).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Final

import click

from testfleet import color
from testfleet.cli import _verbosity
from testfleet.cli._common import database_option, project_from, single_line
from testfleet.cli._options import format_option, output_option, stage_option
from testfleet.cli.completion import complete_stages
from testfleet.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from testfleet.documents.results import IncidentsDoc

SCHEMA: Final = "testfleet.incidents/1"


@click.group("incident")
def command() -> None:
    """Failures of one CI run that share a signature are one incident: infrastructure or test.

    \b
    Examples:
      testfleet incident list
      testfleet incident dormant stage-c-4-gpu-mi300x --ref "#2230" --dry-run
    """


def _linker(project: Any) -> Any:
    from testfleet.results.links import linker

    cfg = project.config.results
    return linker(cfg.run_url, cfg.github_repository, cfg.buildkite_pipeline, os.environ).url


def _check_stage(project: Any, stage: str | None) -> None:
    from testfleet.planning.lanes import find_lane

    if stage is not None and stage not in project.config.stages \
            and find_lane(project.config, stage) is None:
        raise UsageError(f"--stage {stage!r} is not a configured stage "
                         f"({', '.join(sorted(project.config.stages)) or 'none'})")


@command.command("list")
@click.option("--runs", type=click.IntRange(1, 200), default=10, show_default=True, metavar="N",
              help="The newest N CI runs.")
@stage_option("Only this stage (or <stage>.<variant>).")
@format_option(["table", "json"], f"table for people, json for tools ({SCHEMA}).")
@output_option()
@database_option()
@click.pass_context
def list_cmd(ctx: click.Context, runs: int, stage: str | None, fmt: str, database: str | None) -> int:
    """Incidents of the newest N CI runs, newest first: infrastructure before test.

    \b
    Examples:
      testfleet incident list
      testfleet incident list --stage stage-c-4-gpu-h200 --runs 30
      testfleet incident list --format json -o incidents.json
    """
    from testfleet.app.results import read_incidents
    from testfleet.incidents.render import dormancy, incident_json, incidents_table

    project = project_from(ctx)
    _check_stage(project, stage)
    incidents = read_incidents(project, database, runs=runs, stage=stage)
    link = _linker(project)
    suggestions = {n: d for n, i in enumerate(incidents)
                   if (d := dormancy(project, i, link)) is not None}
    if fmt == "json":
        doc: IncidentsDoc = {"schema": SCHEMA, "runs": runs, "stage": stage,
                             "incidents": [incident_json(i, link, suggestions.get(n))
                                           for n, i in enumerate(incidents)]}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    console = color.console()
    if not incidents:
        from testfleet.app.results import NO_RUNS, history_missing

        console.print(NO_RUNS if history_missing(project, database)
                      else f"no failures in the newest {runs} run(s)")
        return 0
    console.print(incidents_table(incidents, link, suggestions,
                                  f"incidents of the newest {runs} run(s), newest first"))
    return 0


@command.command("dormant")
@click.argument("stage", callback=single_line, metavar="STAGE", shell_complete=complete_stages)
@click.option("--run", "run", default=None, metavar="RUN", callback=single_line,
              help="The CI run whose incident it is (default: the newest run in which an "
                   "infrastructure incident took STAGE whole).")
@click.option("--ref", default=None, metavar="URL|#N", help="The issue that tracks the restore.")
@click.option("--dry-run", is_flag=True, help="Print the line and where it goes; write nothing.")
@database_option()
@click.pass_context
def dormant_cmd(ctx: click.Context, stage: str, run: str | None, ref: str | None, dry_run: bool,
                database: str | None) -> int:
    """Make STAGE dormant for its infrastructure incident: one `disabled = "..."` line.

    \b
    Examples:
      testfleet incident dormant stage-c-4-gpu-mi300x --ref "#2230" --dry-run
      testfleet incident dormant stage-c-8-gpu-h100 --run 9876543210 --ref "#2242"
    """
    from testfleet.app.results import read_incidents
    from testfleet.incidents.dormancy import DormancyError, set_disabled, table_header
    from testfleet.incidents.render import dormancy
    from testfleet.results.disabling import valid_ref

    project = project_from(ctx)
    _check_stage(project, stage)
    if ref is not None and not valid_ref(ref):
        raise UsageError(f"--ref {ref!r}: expected #N (an issue or pull request) or an http(s) URL")
    incidents = read_incidents(project, database, runs=50, stage=stage)
    link = _linker(project)
    found = next(((i, d) for i in incidents if run is None or run in (i.ci_run_id, i.run)
                  if (d := dormancy(project, i, link, ref)) is not None and d.stage == stage), None)
    if found is None:
        where = f"CI run {run}" if run else "the newest 50 runs"
        raise UsageError(f"no infrastructure incident took every file of {stage} in {where}; "
                         "nothing was written ('testfleet incident list' shows the incidents)")
    incident, suggestion = found
    if suggestion.already:
        raise UsageError(f"{stage} is dormant already ({suggestion.already!r}); nothing was written")
    path = project.config_path
    click.echo(f"{table_header(suggestion.path)}\n{suggestion.line}")
    if dry_run:
        _verbosity.note(f"dry run: {path.name} not changed")
        return 0
    # In place, under the lock disable/enable take, from the file's content at the moment
    # of writing: an editor's unsaved-then-saved change or a hard link survives (#27 D1).
    from testfleet.results.inplace import edit_in_place, edit_lock

    rel = path.relative_to(project.root).as_posix()
    line = [0]

    def plan(current: Mapping[str, bytes]) -> dict[str, bytes]:
        try:
            edit = set_disabled(current[rel].decode("utf-8"), suggestion.path,
                                _reason_of(suggestion.line))
        except UnicodeDecodeError as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
        except DormancyError as exc:
            raise UsageError(f"{path.name}: {exc}; nothing was written") from None
        line[0] = edit.line
        return {rel: edit.text.encode("utf-8")}

    try:
        with edit_lock(project.root):
            edit_in_place(project.root, [rel], plan)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write it: {exc.strerror or exc}") from None
    _verbosity.note(f"wrote {path.name}:{line[0]} (incident {incident.id}); the stage is "
                    "dormant from the next plan on" + (
                        "" if project.config.stages.get(stage) is None
                        or project.config.stages[stage].probe is not None
                        else f"; add [{'.'.join(suggestion.path)}.probe] to hear when its "
                             "runners are back"))
    return 0


def _reason_of(line: str) -> str:
    import tomlkit

    value = tomlkit.parse(line)["disabled"]
    return str(value)
