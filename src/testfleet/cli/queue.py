"""``testfleet queue status``: what a plan's queue lanes hold in the queue database.

Exit status: 0 shown; 2 bad input (a plan that cannot be read, queue mode without a
PostgreSQL database, a database that cannot be reached).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from testfleet.cli._common import database_option, project_from
from testfleet.cli._options import format_option, output_option
from testfleet.errors import UsageError
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.documents.queue import QueueStatusDoc
    from testfleet.store import Store


@click.group("queue")
def command() -> None:
    """Inspect queue mode's queues (execution = "queue").

    \b
    Examples:
      testfleet queue status --plan plan.json
      testfleet queue status --plan plan.json --format json -o queue.json
      testfleet queue prune --older-than 14
    """


@command.command("prune")
@click.option("--older-than", "days", type=click.FloatRange(min=1), default=None, metavar="DAYS",
              help="Delete the rows of queue lanes with no activity for DAYS days (at least "
                   "1). Default: 30 (what every new lane's enqueue prunes anyway).")
@database_option("The queue lives there.")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@click.pass_context
def prune_cmd(ctx: click.Context, days: float | None, database: str | None, dry_run: bool) -> int:
    """Delete the queue rows (lanes, their files and attempts) of plans whose lanes saw no
    claim and no report for DAYS days: finished lanes, and lanes whose runners are all gone.
    A lane some runner still works on is kept. The history (durations, outcomes) is not
    touched: a queue row is never history.

    \b
    Examples:
      testfleet queue prune
      testfleet queue prune --older-than 7 --dry-run
      testfleet queue prune --older-than 14 --database postgresql://ci@db.internal/tf
    """
    import time

    from testfleet.store import open_store
    from testfleet.store import queue as q

    keep = q.KEEP_DAYS if days is None else days
    with open_store(project_from(ctx), database) as store, \
            (store.read() if dry_run else store.write()) as conn:
        now = q.server_now(conn) if conn.dialect.name == "postgresql" else time.time()
        pruned = q.prune(conn, now - keep * 86400, delete=not dry_run)
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"testfleet queue prune: {verb} {pruned.lanes} lane(s) idle for {keep:g} day(s) "
               f"or more: {pruned.items} file row(s), {pruned.attempts} attempt row(s)")
    return 0


@command.command("status")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path, dir_okay=False),
              required=True, metavar="FILE", help="The plan whose queue lanes to show.")
@database_option("The queue lives there (PostgreSQL only).")
@format_option(["table", "json"], "table for people, json for tools "
                                  "(testfleet.queue-status/1).")
@output_option()
@click.pass_context
def status_cmd(ctx: click.Context, plan_path: Path, database: str | None, fmt: str) -> int:
    """Per queue lane of the plan: files pending, claimed (by which runner, how old the
    lease), done, and leases that expired.

    \b
    Examples:
      testfleet queue status --plan plan.json
      testfleet queue status --plan plan.json --format json -o queue.json
      testfleet queue status --plan plan.json --database postgresql://ci@db.internal/tf
    """
    from testfleet.planning.model import load_plan
    from testfleet.queue.lane import planned_lanes
    from testfleet.queue.status import queue_status

    project = project_from(ctx)
    base: Path = ctx.find_root().obj.directory
    plan = load_plan(plan_path if plan_path.is_absolute() else base / plan_path)
    if not planned_lanes(plan):
        raise UsageError(f"plan {plan.digest[:19]}… has no queue lane (no stage sets "
                         "execution = \"queue\", or a fork's pull request planned it)")
    with open_queue_store(project, database) as store:
        doc = queue_status(store, plan)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        _print(doc)
    return 0


def open_queue_store(project: Project, database: str | None) -> Store:
    """The queue's database, or exit 2 saying why queue mode cannot use it."""
    from testfleet.store import open_store, resolve_target

    target = resolve_target(project, database)
    if target.dialect != "postgresql":
        raise UsageError(f"queue mode keeps its queue in the team's PostgreSQL history database; "
                         f"this one is SQLite ({target.display}). Give --database "
                         "postgresql://... or TESTFLEET_DATABASE_URL")
    return open_store(project, database)  # PostgreSQL: never migrated here, only checked


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}s"


def _print(doc: QueueStatusDoc) -> None:
    for lane in doc["lanes"]:
        if not lane["queued"]:
            click.echo(f"{lane['lane']}: not queued yet ({lane['planned']} planned file(s); the "
                       "first runner queues them)")
            continue
        head = (f"{lane['lane']}: {lane['pending']} pending, {lane['claimed']} claimed, "
                f"{lane['done']} done of {lane['planned']}; {lane['expired']} lease(s) expired"
                f" (lease {lane['lease_seconds']:g}s)")
        if lane["stopped"]:
            head += f"; stopped: {lane['stopped']}"
        click.echo(printable(head))
        for f in lane["files"]:
            if f["state"] == "pending" and not f["expired"]:
                continue
            where = f["runner"] or "-"
            extra = (f"lease age {_age(f['lease_age'])}, {_age(f['lease_left'])} left"
                     if f["state"] == "claimed" else (f["outcome"] or ""))
            lost = f", {f['expired']} expired" if f["expired"] else ""
            click.echo(printable(f"  {f['state']:<8} {f['file']}  {where}  {extra}{lost}"))
