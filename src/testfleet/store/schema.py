"""The history database schema: tables and the ordered list of migration steps.

The database records which steps it has applied in ``schema_version`` (one row per
step). ``testfleet db init`` / ``db upgrade`` apply the missing steps in order, each
in its own transaction together with its ``schema_version`` row, under a lock
(PostgreSQL advisory lock, SQLite ``BEGIN IMMEDIATE``), so two upgrades racing each
other apply every step once. A database whose version is higher than the last step
here was written by a newer testfleet and is refused with a clear error.

Runtime code (planning, the runner, the metric gate) only reads and writes rows;
only these steps need DDL rights. The embedded SQLite default is migrated
automatically on first use, PostgreSQL only by ``testfleet db init`` / ``db upgrade``.

How to add tables (e.g. the metric gate's)
------------------------------------------
1. Define the new ``Table`` objects on ``metadata`` (``store/tables.py``, or the module
   that owns them, which imports ``metadata`` from there; unqualified names, no
   schema: PostgreSQL users pick the schema with ``search_path``).
2. Write a step function taking a ``Connection`` that creates exactly those tables
   (``my_table.create(conn)``) and their indexes, or issues the ``ALTER``s it needs.
3. APPEND ``Migration(<last version + 1>, "what it does", _step_fn)`` to
   ``MIGRATIONS``. Versions are consecutive from 1.

Never edit or reorder a step that has been released: databases in the field have
already applied it. Change a released table with a new step instead. Keep steps
portable between SQLite and PostgreSQL (tests run both); use ``Double`` for seconds
and POSIX-epoch timestamps and ``String(n)`` with explicit lengths.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Double,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    inspect,
    select,
    text,
)

from testfleet.store.tables import create_as_of as create_as_of  # re-exported: the schema's
from testfleet.store.tables import executions as executions
from testfleet.store.tables import metadata as metadata
from testfleet.store.tables import schema_version as schema_version

# The executions table exactly as step 1 created it. Later steps ALTER it, so step 1
# must not create today's columns (a fresh database then takes every step in order,
# like one in the field).
_executions_v1 = Table(
    "executions",
    MetaData(),
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("file", String(1024), nullable=False),
    Column("stage", String(255), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("duration", Double, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("commit_sha", String(64), nullable=True),
    Column("ci_run_id", String(255), nullable=True),
    Column("ts", Double, nullable=False),
    Column("recorded_at", Double, nullable=False),
)
Index("ix_executions_stage_file_ts", _executions_v1.c.stage, _executions_v1.c.file,
      _executions_v1.c.ts)
Index("ix_executions_ci_run_id", _executions_v1.c.ci_run_id)

# The executions table as steps 3-6 left it: steps 4 and 6 create its indexes, step 7
# reads it into the tables that replace it.
_executions_v6 = Table(
    "executions",
    MetaData(),
    *[c._copy() for c in _executions_v1.columns],
    Column("gate_status", String(16), nullable=True),
    Column("gate_mode", String(16), nullable=True),
    Column("reason", String(500), nullable=True),
    Column("uid", String(32), nullable=True),
    Column("final", Boolean, nullable=True),
)
_ux_uid_v4 = Index("ux_executions_uid", _executions_v6.c.uid, unique=True)
_ix_recorded_v6 = Index("ix_executions_stage_file_recorded", _executions_v6.c.stage,
                        _executions_v6.c.file, _executions_v6.c.recorded_at, _executions_v6.c.ts)


@dataclass(frozen=True)
class Migration:
    """One schema step. ``apply`` runs inside the step's transaction."""

    version: int
    description: str
    apply: Callable[[Connection], None]
    #: The step rewrites a table: SQLite's file is VACUUMed after the migration.
    frees_space: bool = False


def _v1_durations(conn: Connection) -> None:
    schema_version.create(conn)
    _executions_v1.create(conn)  # creates its indexes too


def _v2_metric_gate(conn: Connection) -> None:
    # The tables live with their queries in testfleet.store.metrics (frozen as of step 2).
    from testfleet.store.metrics import create_tables

    create_tables(conn)


def _v3_final_verdict(conn: Connection) -> None:
    # Existing rows keep their outcome and get NULL gate columns: before this step the
    # gate's verdict was not recorded with the execution, and guessing it (enforced or
    # shadow, FAIL or ERROR) from gate_runs would invent facts. Readers show NULL as
    # "not recorded".
    for column in ("gate_status VARCHAR(16)", "gate_mode VARCHAR(16)", "reason VARCHAR(500)"):
        conn.execute(text(f"ALTER TABLE executions ADD COLUMN {column}"))


def _v4_record_identities(conn: Connection) -> None:
    """``uid`` on executions and gate runs, filled for existing rows, then unique."""
    from testfleet.store.identity import execution_uid, gate_run_uid
    from testfleet.store.metrics import gate_runs

    uid_type = String(32).compile(dialect=conn.dialect)
    for table in (_executions_v6, gate_runs):
        conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN uid {uid_type}"))
    ex, gr = _executions_v6, gate_runs
    _backfill_uids(conn, ex, [ex.c.file, ex.c.stage, ex.c.backend, ex.c.attempt, ex.c.commit_sha,
                              ex.c.ci_run_id, ex.c.ts, ex.c.duration, ex.c.outcome],
                   lambda r, seq: execution_uid(file=r[0], stage=r[1], backend=r[2], attempt=r[3],
                                                commit=r[4], ci_run_id=r[5], ts=r[6],
                                                duration=r[7], outcome=r[8], seq=seq))
    _backfill_uids(conn, gr, [gr.c.run_id, gr.c.test_path, gr.c.backend, gr.c.suite, gr.c.env_key,
                              gr.c.ci_run_id, gr.c.commit_sha, gr.c.recorded_at],
                   lambda r, seq: gate_run_uid(run_id=r[0], test_path=r[1], backend=r[2],
                                               suite=r[3], env_key=r[4], ci_run_id=r[5],
                                               commit=r[6], recorded_at=r[7], seq=seq))
    _ux_uid_v4.create(conn)
    for index in gate_runs.indexes:
        if index.info.get("since") == 4:
            index.create(conn)


def _backfill_uids(conn: Connection, table: Table, columns: list[Column[Any]],
                   uid: Callable[[Any, int], str]) -> None:
    from sqlalchemy import bindparam, update

    seen: set[str] = set()
    stmt = update(table).where(table.c.id == bindparam("b_id")).values(uid=bindparam("b_uid"))
    for rows in _in_id_order(conn, table, [table.c.id, *columns]):
        batch = []
        for row in rows:
            seq = 0
            value = uid(row[1:], seq)
            while value in seen:  # an identical older row: see testfleet.store.identity
                seq += 1
                value = uid(row[1:], seq)
            seen.add(value)
            batch.append({"b_id": row[0], "b_uid": value})
        conn.execute(stmt, batch)


def _in_id_order(conn: Connection, table: Table, columns: list[Column[Any]]) -> Iterator[list[Any]]:
    """``columns`` of every row of ``table`` (the first column its ``id``), in id order by
    key ranges: a large history is rewritten without holding it in memory twice."""
    last = -1
    while True:
        rows = list(conn.execute(select(*columns).where(table.c.id > last).order_by(table.c.id)
                                 .limit(_BATCH)).all())
        if not rows:
            return
        yield rows
        last = rows[-1][0]


_BATCH = 5000

def _v5_testcases(conn: Connection) -> None:
    from testfleet.store.finals import mark_final
    from testfleet.store.testcases import create_tables

    conn.execute(text("ALTER TABLE executions ADD COLUMN final BOOLEAN"))
    mark_final(conn)
    create_tables(conn)


def _v6_recorded_index(conn: Connection) -> None:
    _ix_recorded_v6.create(conn)


def _v7_compact_executions(conn: Connection) -> None:
    """Executions into ``execution_rows`` keyed to ``tested_files`` and ``sources``, read
    from the old table in id order by key ranges (ids and every value kept), then the
    table becomes the view of the same name and columns (store.tables)."""
    from testfleet.store.execution_rows import AlchemyDb, insert_payload
    from testfleet.store.tables import execution_rows, executions_view_sql, sources, tested_files

    for table in (tested_files, sources, execution_rows):
        create_as_of(conn, table, 7)  # with its indexes, without later steps' columns
    db = AlchemyDb(conn)
    for rows in _in_id_order(conn, _executions_v6, list(_executions_v6.columns)):
        payload = [dict(r._mapping) for r in rows]
        _uids_storable(payload)
        insert_payload(db, payload)
    conn.execute(text("DROP TABLE executions"))
    conn.execute(text(executions_view_sql(conn.dialect.name, 7)))
    if conn.dialect.name == "sqlite":
        _gate_values_without_rowid(conn)
    if conn.dialect.name == "postgresql":  # ids were copied: the sequence continues after them
        conn.execute(text("SELECT setval(pg_get_serial_sequence('execution_rows', 'id'), "
                          "(SELECT COALESCE(MAX(id), 0) + 1 FROM execution_rows), false)"))


def _uids_storable(payload: list[dict[str, Any]]) -> None:
    """Step 7 stores a uid as 16 bytes: a row whose uid is not 32 hex digits (only a
    hand-edited database has one) stops the step, rolled back, naming the row."""
    from testfleet.store.errors import StoreError
    from testfleet.store.identity import UID_PATTERN

    for row in payload:
        uid = row["uid"]
        if not isinstance(uid, str) or not UID_PATTERN.fullmatch(uid):
            raise StoreError(
                f"executions row id {row['id']} ({row['file']}, stage {row['stage']}) has uid "
                f"{uid!r}, not 32 lower-case hexadecimal digits; schema step 7 stores uids as 16 "
                "bytes, so the upgrade stopped and changed nothing: correct or delete that row, "
                "then upgrade again")


def _gate_values_without_rowid(conn: Connection) -> None:
    """On SQLite, ``gate_values`` stored in its primary key's order: its rows are small
    and the separate rowid table duplicated the key index. Same columns, keys, indexes."""
    from testfleet.store.metrics import gate_values

    conn.execute(text(
        "CREATE TABLE gate_values_new (series_id INTEGER NOT NULL REFERENCES gate_series (id), "
        "run_pk INTEGER NOT NULL REFERENCES gate_runs (id), trusted BOOLEAN NOT NULL, "
        "value DOUBLE NOT NULL, actual_step INTEGER, "
        "CONSTRAINT pk_gate_values PRIMARY KEY (series_id, run_pk)) WITHOUT ROWID"))
    conn.execute(text("INSERT INTO gate_values_new SELECT series_id, run_pk, trusted, value, "
                      "actual_step FROM gate_values"))
    conn.execute(text("DROP TABLE gate_values"))
    conn.execute(text("ALTER TABLE gate_values_new RENAME TO gate_values"))
    for index in gate_values.indexes:
        index.create(conn)


def _v8_failure_signatures(conn: Connection) -> None:
    """Incidents (#29): the signature digest on executions and testcases, and the table
    of signature texts. Rows before this step have none (NULL): their output is gone."""
    from testfleet.store.tables import executions_view_sql, failure_signatures

    failure_signatures.create(conn)
    digest = String(16).compile(dialect=conn.dialect)
    conn.execute(text("DROP VIEW executions"))
    for table in ("execution_rows", "testcases"):
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN signature {digest}"))
    conn.execute(text(executions_view_sql(conn.dialect.name, 8)))


def _v9_queue(conn: Connection) -> None:
    """Queue mode (#40): its tables live with their statements in testfleet.store.queue."""
    from testfleet.store.queue import create_tables

    create_tables(conn)


def _v10_breakers(conn: Connection) -> None:
    """The runner-class breaker (#41): its log lives with its statements in
    testfleet.store.breakers; a lane's state is its newest row."""
    from testfleet.store.breakers import create_tables

    create_tables(conn)


MIGRATIONS: list[Migration] = [
    Migration(1, "schema_version and test executions (durations history)", _v1_durations),
    Migration(2, "metric gate: gate_runs, gate_series, gate_values", _v2_metric_gate),
    Migration(3, "results: executions record the gate's verdict and the reason", _v3_final_verdict),
    Migration(4, "record identities: uid on executions and gate_runs (history bundles)",
              _v4_record_identities),
    Migration(5, "results: executions.final and per-testcase results (testcases)", _v5_testcases),
    Migration(6, "estimates: index executions by (stage, file, recorded_at) for newest-recorded "
              "windows", _v6_recorded_index),
    Migration(7, "history size: executions keyed to tested_files and sources, 16-byte uids; "
              "executions is a view", _v7_compact_executions, frees_space=True),
    Migration(8, "incidents: failure signatures on executions and testcases (failure_signatures)",
              _v8_failure_signatures),
    Migration(9, "queue mode: queue_lanes, queue_items, queue_attempts (claims and leases, "
              "apart from the history)", _v9_queue),
    Migration(10, "runner-class breaker: breaker_events (each lane's breaker log and state)",
              _v10_breakers),
    # Append new steps here; see the module docstring.
]


def latest_version() -> int:
    """The schema version this testfleet writes and expects."""
    _check_steps()
    return MIGRATIONS[-1].version


def _check_steps() -> None:
    versions = [m.version for m in MIGRATIONS]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"schema MIGRATIONS must be numbered 1..N in order, got {versions}")


def current_version(conn: Connection) -> int | None:
    """The highest applied step, or ``None`` when the database has no testfleet schema."""
    if not inspect(conn).has_table("schema_version"):
        return None
    value = conn.execute(select(schema_version.c.version).order_by(
        schema_version.c.version.desc()).limit(1)).scalar()
    return int(value) if value is not None else 0


def lock_for_migration(conn: Connection) -> None:
    """Serialise concurrent upgrades (the SQLite transaction is already IMMEDIATE)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(7340402119)"))


def apply_step(conn: Connection, step: Migration) -> None:
    step.apply(conn)
    conn.execute(schema_version.insert().values(
        version=step.version, description=step.description, applied_at=time.time()))
