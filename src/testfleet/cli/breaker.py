"""``testfleet breaker``: the runner-class breakers (#41) kept in the history.

    testfleet breaker list [--format table|json]
    testfleet breaker open STAGE[.VARIANT] --reason TEXT [--by WHO]
    testfleet breaker close STAGE[.VARIANT] --reason TEXT [--by WHO]
    testfleet breaker observe --run-id ID [--plan FILE]

``list`` reads and judges nothing (exit 0). ``open`` and ``close`` force a lane's
breaker, recording who (the git author, or ``--by``) and why; the lane must opt in
(``breaker = true``). Flags in, rendering out: the work is ``testfleet.app.breaker``'s.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from testfleet import color
from testfleet.cli._common import database_option, project_from, single_line
from testfleet.cli._options import format_option, output_option
from testfleet.documents.breaker import SCHEMA
from testfleet.errors import UsageError
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.breaker import BreakerLaneDoc, BreakersDoc


@click.group("breaker")
def command() -> None:
    """A lane whose runners failed the same infrastructure way in consecutive default-branch
    runs is held back by its breaker until its probe passes again.

    \b
    Examples:
      testfleet breaker list
      testfleet breaker open stage-c-4-gpu-mi300x --reason "runners drained for a driver update"
      testfleet breaker close stage-c-4-gpu-mi300x --reason "fixed in #2231" --by alice
    """


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "—"
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _lane_doc(item: Any, now: float) -> BreakerLaneDoc:
    s = item.state
    return {
        "lane": item.lane, "opted_in": item.settings.open_after > 0,
        "open_after": item.settings.open_after, "close_after": item.settings.close_after,
        "max_open_days": float(item.settings.max_open_days), "status": s.status,
        "since": s.opened_at if s.open else s.closed_at, "age_days": round(s.age_days(now), 3),
        "streak": len(s.streak), "clean": s.clean, "signature": s.signature, "text": s.text,
        "runs": [{"run": r.run, "url": r.url} for r in s.runs], "opened_by": s.opened_by,
        "reason": s.reason,
        "episodes": [{"opened_at": e.opened_at, "opened_by": e.opened_by,
                      "signature": e.signature, "text": e.text,
                      "runs": [{"run": r.run, "url": r.url} for r in e.runs],
                      "closed_at": e.closed_at, "closed_by": e.closed_by,
                      "held_runs": e.held_runs, "held_registrations": e.held_registrations,
                      "reason": e.reason} for e in item.episodes],
    }


@command.command("list")
@format_option(["table", "json"], f"table for people, json for tools ({SCHEMA}).")
@output_option()
@database_option()
@click.pass_context
def list_cmd(ctx: click.Context, fmt: str, database: str | None) -> int:
    """Every lane with a breaker: open or closed, since when, why, and its episodes.

    \b
    Examples:
      testfleet breaker list
      testfleet breaker list --format json -o breakers.json
    """
    from testfleet.app.breaker import breaker_list

    project = project_from(ctx)
    items = breaker_list(project, database)
    now = time.time()
    if fmt == "json":
        doc: BreakersDoc = {"schema": "testfleet.breakers/1",
                            "lanes": [_lane_doc(i, now) for i in items]}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    console = color.console()
    if not items:
        console.print("no lane has a breaker (opt in with 'breaker = true' on a stage or variant)")
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title="Runner-class breakers", title_justify="left")
    for col in ("lane", "state", "since", "why", "held back", "episodes"):
        table.add_column(col)
    for item in items:
        s = item.state
        if s.open:
            why = (f"{s.signature}: {s.text} (runs {', '.join(r.run for r in s.runs)})"
                   if s.signature or s.text else f"opened by {s.opened_by}: {s.reason}")
            state = Text(f"open, probe clean {s.clean}/{item.settings.close_after}",
                         style="bold red")
        else:
            why = (f"{len(s.streak)}/{item.settings.open_after} run(s) failed the same way"
                   if s.streak else "")
            state = Text("closed", style="green")
        table.add_row(printable(item.lane), state,
                      _when(s.opened_at if s.open else s.closed_at), printable(why)[:300],
                      f"{s.held_runs} run(s), {s.held_registrations} registration(s)"
                      if s.open else "", str(len(item.episodes)))
    console.print(table)
    return 0


def _force(ctx: click.Context, lane: str, reason: str, by: str | None, database: str | None,
           open_it: bool) -> int:
    from testfleet.app.breaker import author, force_lane

    if not reason.strip():
        raise UsageError("--reason: say why (it is recorded with who forced the breaker)")
    project = project_from(ctx)
    who = by if by is not None else author(project)
    if not who.strip():
        raise UsageError("--by: say who forces the breaker")
    state = force_lane(project, database, lane, open_it=open_it, by=who, reason=reason)
    click.echo(printable(f"breaker {state.lane}: {state.status} by {who}: {reason}"
                         + ("; the next plans hold the lane back and run only its probe"
                            if open_it else "; the next plan schedules the lane again")))
    return 0


_LANE = click.argument("lane", metavar="STAGE[.VARIANT]", callback=single_line)
_REASON = click.option("--reason", required=True, callback=single_line, metavar="TEXT",
                       help="Why (recorded with who).")
_BY = click.option("--by", default=None, callback=single_line, metavar="WHO",
                   help="Who decides (default: the git author).")


@command.command("open")
@_LANE
@_REASON
@_BY
@database_option()
@click.pass_context
def open_cmd(ctx: click.Context, lane: str, reason: str, by: str | None,
             database: str | None) -> int:
    """Open a lane's breaker by hand: its registrations get the fate runner-broken and only
    its probe runs, until its probe passes close_after times in a row or it is closed.

    \b
    Examples:
      testfleet breaker open stage-c-4-gpu-mi300x --reason "runners drained, see #2231"
    """
    return _force(ctx, lane, reason, by, database, open_it=True)


@command.command("close")
@_LANE
@_REASON
@_BY
@database_option()
@click.pass_context
def close_cmd(ctx: click.Context, lane: str, reason: str, by: str | None,
              database: str | None) -> int:
    """Close a lane's breaker by hand: the next plan schedules the lane again.

    \b
    Examples:
      testfleet breaker close stage-c-4-gpu-mi300x --reason "driver fixed in #2231"
    """
    return _force(ctx, lane, reason, by, database, open_it=False)


@command.command("observe")
@click.option("--run-id", "run_id", required=True, callback=single_line, metavar="ID",
              help="The CI run whose records to fold in (its ci_run_id in the history).")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="The run's plan: a lane it gave jobs that recorded nothing counts as one "
                   "whose jobs never started or never reported.")
@database_option()
@click.pass_context
def observe_cmd(ctx: click.Context, run_id: str, plan_path: Path | None,
                database: str | None) -> int:
    """Fold a default-branch run into its lanes' breakers when its jobs wrote their records
    straight into the history database (with bundles, 'history merge' does it).

    \b
    Examples:
      testfleet breaker observe --run-id 9876543210 --plan plan.json
    """
    from testfleet.app.breaker import observe_run

    project = project_from(ctx)
    plan = None
    if plan_path is not None:
        from testfleet.planning.model import load_plan

        base: Path = ctx.find_root().obj.directory
        plan = load_plan(plan_path if plan_path.is_absolute() else base / plan_path)
    lines = observe_run(project, database, run_id, plan)
    for line in lines:
        click.echo(f"testfleet: {printable(line)}", err=True)
    click.echo(f"run {printable(run_id)}: {len(lines)} breaker change(s)")
    return 0
