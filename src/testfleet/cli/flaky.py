"""``testfleet flaky``: flaky files (and tests) per stage, with rate, evidence and state.

    testfleet flaky [--stage STAGE] [--all] [--format table|json]

States: ``flaky`` (quarantined when ``[tool.testfleet.flaky] quarantine = true``),
``recovered`` (its quarantine lifted after ``restore_after`` clean passes), ``broken``
(fails every run: a real failure, never quarantined); ``--all`` adds ``healthy``.
Files of one stage in one state whose failures share a signature (eight files broken by
one runner class) are one row, the incident's, never eight.
Exit status 0; 2 for bad options or an unreadable history database.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import click

from testfleet import color
from testfleet.cli._common import database_option, project_from
from testfleet.cli._options import format_option, output_option, stage_option
from testfleet.errors import UsageError

if TYPE_CHECKING:
    from testfleet.documents.results import FlakyCauseDoc, FlakyDoc
    from testfleet.results.flaky import FlakyVerdict

SCHEMA: Final = "testfleet.flaky/1"


@click.command("flaky")
@stage_option("Only this stage (or <stage>.<variant>).")
@click.option("--all", "show_all", is_flag=True, help="Also list healthy files.")
@format_option(["table", "json"], f"table for people, json for tools ({SCHEMA}).")
@output_option()
@database_option()
@click.pass_context
def command(ctx: click.Context, stage: str | None, show_all: bool, fmt: str,
            database: str | None) -> int:
    """Flaky, recovered and broken files per stage (and tests, where pytest reported them).

    \b
    Examples:
      testfleet flaky
      testfleet flaky --stage stage-a-cpu --all
      testfleet flaky --format json -o flaky.json
    """
    from testfleet.app.results import read_flaky
    from testfleet.incidents.flaky_groups import group_verdicts
    from testfleet.results.flaky import classify_all
    from testfleet.results.settings import flaky_policy

    project = project_from(ctx)
    from testfleet.planning.lanes import find_lane

    # a stage, or one variant's results (recorded under <stage>.<variant>, #12)
    if stage is not None and stage not in project.config.stages \
            and find_lane(project.config, stage) is None:
        raise UsageError(f"--stage {stage!r} is not a configured stage "
                         f"({', '.join(sorted(project.config.stages)) or 'none'})")
    policy = flaky_policy(project.config)
    read = read_flaky(project, database, stage=stage)
    rows, cause, signatures = read.rows, read.cause, read.signatures
    verdicts = [v for v in classify_all(rows, policy) if show_all or v.state != "healthy"]
    groups, alone = group_verdicts(verdicts, cause, signatures)
    if fmt == "json":
        doc: FlakyDoc = {
            "schema": SCHEMA,
            "policy": {"window": policy.window, "threshold": policy.threshold,
                       "min_runs": policy.min_runs, "quarantine": policy.quarantine,
                       "restore_after": policy.restore_after},
            "files": [_with_cause(v, cause) for v in verdicts if not v.test],
            "tests": [_with_cause(v, cause) for v in verdicts if v.test],
            "incidents": [g.to_json() for g in groups],
        }
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    if not rows:
        from testfleet.app.results import NO_RUNS

        color.console().print(NO_RUNS)
        return 0
    _table(alone, policy, groups)
    return 0


def _with_cause(v: FlakyVerdict, cause: dict[tuple[str, str, str], str]) -> FlakyCauseDoc:
    return {**v.to_json(), "signature": cause.get((v.stage, v.file, v.test))}


def _table(verdicts: list[Any], policy: Any, groups: list[Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    from testfleet.textsafe import printable

    console = color.console()
    caption = (f"window {policy.window} runs, threshold {policy.threshold:g}, "
               f"quarantine {'on' if policy.quarantine else 'off'}, "
               f"restore after {policy.restore_after} clean passes")
    if not verdicts and not groups:
        console.print(f"no flaky or broken files ({caption})")
        return
    table = Table(title=f"flaky: {caption}", title_justify="left")
    for col in ("stage", "file", "test", "state", "rate", "evidence", "clean streak"):
        table.add_column(col, overflow="fold")
    for g in groups:  # one cause, one row
        names = [*g.files, *g.tests]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        table.add_row(*(Text(printable(c)) for c in (
            g.stage, f"{len(g.files)} file(s): {shown}" if g.files else shown,
            str(len(g.tests)) if g.tests else "-", g.state, "-",
            f"one incident, signature {g.signature.digest[:8]}: {g.signature.text}", "-")))
    for v in verdicts:
        state = v.state + (" (quarantined)" if v.quarantined else "")
        evidence = []
        if v.retry_passes:
            evidence.append(f"{v.retry_passes} pass(es) on retry")
        if v.split_commits:
            shown = ", ".join(c[:10] for c in v.split_commits[:3])
            more = f" +{len(v.split_commits) - 3}" if len(v.split_commits) > 3 else ""
            evidence.append(f"failed and passed on {shown}{more}")
        if v.state == "broken":
            evidence.append(f"failed {v.failures}/{v.runs} runs")
        runs = sorted({r.ci_run_id for r in v.evidence if r.ci_run_id})
        if runs:
            evidence.append("runs " + ", ".join(runs[:5]) + (" ..." if len(runs) > 5 else ""))
        # history may come from merged bundles: data, one inert line each, never markup
        table.add_row(*(Text(printable(c)) for c in (
            v.stage, v.file, v.test or "-", state, f"{v.evidence_runs}/{v.runs} ({v.rate:.0%})",
            "; ".join(evidence) or "-", str(v.clean_streak))))
    console.print(table)
