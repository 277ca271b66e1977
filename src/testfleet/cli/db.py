"""``testfleet db``: create, migrate and inspect the history database.

These are the only commands that change the schema (DDL). Runners, planners and the
metric gate then need a role that can only read and write rows.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import click

from testfleet.cli._common import database_option, finite, project_from
from testfleet.cli._options import format_option, output_option

if TYPE_CHECKING:
    from testfleet.documents.db import DbStatusDoc


@click.group("db")
def command() -> None:
    """Create, migrate and inspect the history database.

    \b
    Examples:
      testfleet db status
      testfleet db init --database postgresql://ci@db.internal/testfleet
      testfleet db upgrade --dry-run
    """


@command.command("init")
@database_option()
@click.pass_context
def init_cmd(ctx: click.Context, database: str | None) -> int:
    """Create the schema in an empty database (idempotent).

    \b
    Examples:
      testfleet db init
      testfleet db init --database postgresql://ci@db.internal/testfleet
    """
    from testfleet.store import connect
    from testfleet.store.schema import latest_version

    project = project_from(ctx)
    with connect(project, database, create_file=True) as store:
        version = store.schema_version()
        latest = latest_version()
        if version is None:
            applied = store.migrate()
            click.echo(f"initialised history database {store.target.display} "
                       f"(schema version {latest}, {len(applied)} step(s))")
            return 0
        if version > latest:
            raise store._too_new(version)
        if version < latest:
            click.echo(f"history database {store.target.display} already exists at schema version "
                       f"{version}; run 'testfleet db upgrade' to reach {latest}")
            return 0
        click.echo(f"history database {store.target.display} is already initialised "
                   f"(schema version {version})")
        return 0


@command.command("upgrade")
@database_option()
@click.option("--dry-run", is_flag=True, help="List the pending steps without applying them.")
@click.pass_context
def upgrade_cmd(ctx: click.Context, database: str | None, dry_run: bool) -> int:
    """Apply the schema steps this testfleet knows and the database lacks.

    \b
    Examples:
      testfleet db upgrade --dry-run
      testfleet db upgrade --database postgresql://ci@db.internal/testfleet
    """
    from testfleet.store import SchemaNotInitialised, connect

    project = project_from(ctx)
    with connect(project, database) as store:
        if store.schema_version() is None:
            raise SchemaNotInitialised(
                f"history database {store.target.display} has no testfleet schema; "
                "run 'testfleet db init' first")
        pending = store.pending_migrations()
        if not pending:
            click.echo(f"history database {store.target.display} is up to date "
                       f"(schema version {store.schema_version()})")
            return 0
        if dry_run:
            for step in pending:
                click.echo(f"pending {step.version}: {step.description}")
            return 0
        for step in store.migrate():
            click.echo(f"applied {step.version}: {step.description}")
        click.echo(f"history database {store.target.display} is at schema version "
                   f"{store.schema_version()}")
        return 0


@command.command("grant")
@click.argument("role")
@database_option()
@click.pass_context
def grant_cmd(ctx: click.Context, role: str, database: str | None) -> int:
    """PostgreSQL: let ROLE read and write rows (never change the schema).

    Grants SELECT/INSERT/UPDATE/DELETE on every table of the current schema, use of
    its sequences, and the same by default on tables later steps create, so runners
    and gates can use ROLE. Run it with the role that ran 'db init'.

    \b
    Examples:
      testfleet db grant ci_runner --database postgresql://owner@db.internal/testfleet
    """
    from sqlalchemy import text

    from testfleet.store import StoreError, connect, resolve_target

    project = project_from(ctx)
    if resolve_target(project, database).dialect != "postgresql":
        raise StoreError("'db grant' is for PostgreSQL; a SQLite database is governed by "
                         "its file permissions")
    with connect(project, database) as store:
        if store.schema_version() is None:
            raise StoreError(f"history database {store.target.display} has no testfleet schema; "
                             "run 'testfleet db init' first")
        with store.write() as conn:
            quote = conn.dialect.identifier_preparer.quote
            who = quote(role)
            schema = quote(conn.execute(text("SELECT current_schema()")).scalar_one())
            for statement in (
                f"GRANT USAGE ON SCHEMA {schema} TO {who}",
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {who}",
                f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {who}",
                f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} "
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {who}",
                f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT USAGE, SELECT ON SEQUENCES TO {who}",
            ):
                conn.execute(text(statement))
        click.echo(f"granted row read/write on {store.target.display} (schema {schema}) to {role}")
        return 0


@command.command("prune")
@click.option("--keep", type=click.IntRange(min=1), default=50, show_default=True, metavar="N",
              help="Executions to keep per stage and file (passing and other outcomes "
                   "counted separately).")
@click.option("--older-than", "older_than_days", type=click.FloatRange(min=0, min_open=True),
              default=None, metavar="DAYS", callback=finite,
              help="Also delete executions older than DAYS.")
@database_option()
@click.pass_context
def prune_cmd(ctx: click.Context, keep: int, older_than_days: float | None,
              database: str | None) -> int:
    """Bound the durations history (estimates read only the newest few runs anyway).

    \b
    Examples:
      testfleet db prune
      testfleet db prune --keep 20 --older-than 90
    """
    import time

    from testfleet.store import open_store

    project = project_from(ctx)
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    with open_store(project, database) as store:
        deleted = store.prune_executions(keep, cutoff)
        click.echo(f"deleted {deleted} execution(s) from {store.target.display}")
    return 0


@command.command("status")
@database_option()
@format_option(["table", "json"], "table for people, json for tools (testfleet.db-status/1).",
               old=("--json",), old_value="json")
@output_option()
@click.pass_context
def status_cmd(ctx: click.Context, database: str | None, fmt: str) -> int:
    """Where the database is, its schema version and what it holds.

    Exit status 1 when it needs 'db init' or 'db upgrade' (or is newer than this
    testfleet), 0 when it is ready.

    \b
    Examples:
      testfleet db status
      testfleet db status --format json -o db-status.json
      testfleet db status --database postgresql://ci@db.internal/testfleet
    """
    as_json = fmt == "json"
    from testfleet.store import StoreMissing, connect, resolve_target
    from testfleet.store.schema import latest_version

    project = project_from(ctx)
    target = resolve_target(project, database)
    latest = latest_version()
    info: DbStatusDoc = {
        "schema": "testfleet.db-status/1", "database": target.display, "origin": target.origin, "dialect": target.dialect,
        "code_schema_version": latest, "schema_version": None, "state": "missing", "stages": [],
    }
    try:
        store = connect(project, database)
    except StoreMissing:
        store = None
    if store is not None:
        with store:
            version = store.schema_version()
            info["schema_version"] = version
            if version is None:
                info["state"] = "uninitialised"
            elif version > latest:
                info["state"] = "newer-than-code"
            elif version < latest:
                info["state"] = "outdated"
                info["pending"] = [f"{m.version}: {m.description}" for m in store.pending_migrations()]
            else:
                info["state"] = "ready"
            if version is not None and version <= latest:
                info["stages"] = store.stage_summary()
    if as_json:
        click.echo(json.dumps(info, indent=2, sort_keys=True))
    else:
        _print_status(info)
    return 0 if info["state"] == "ready" else 1


_HINT = {
    "missing": "run 'testfleet db init' (or any run that records durations) to create it",
    "uninitialised": "run 'testfleet db init'",
    "outdated": "run 'testfleet db upgrade'",
    "newer-than-code": "upgrade testfleet: the database was migrated by a newer version",
}


def _print_status(info: DbStatusDoc) -> None:
    click.echo(f"database: {info['database']} ({info['dialect']}, from {info['origin']})")
    click.echo(f"schema:   {info['schema_version'] if info['schema_version'] is not None else '-'}"
               f" (this testfleet: {info['code_schema_version']})")
    state = str(info["state"])
    click.echo(f"state:    {state}" + (f" - {_HINT[state]}" if state in _HINT else ""))
    for line in info.get("pending", []):
        click.echo(f"  pending {line}")
    stages = info["stages"]
    if stages:
        click.echo("executions:")
        for row in stages:
            newest = datetime.fromtimestamp(row["newest"], tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
            click.echo(f"  {row['stage']}: {row['executions']} ({row['passing']} passing) "
                       f"over {row['files']} file(s), newest {newest} UTC")
