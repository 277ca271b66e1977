"""The history database's shared tables: ``metadata``, ``schema_version``, ``executions``.

Apart from the migration steps (``store/schema.py``) so that the modules owning other
tables (the gate's in ``metrics.py``, per-test results in ``testcases.py``) and the
readers and writers of executions import tables, not migrations: imports flow one way,
``schema`` -> owners -> ``tables``.
"""

from __future__ import annotations

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
)

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", Double, nullable=False),  # POSIX epoch seconds
)

# One row per execution of one test file in one stage (one row per attempt).
executions = Table(
    "executions",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("file", String(1024), nullable=False),
    Column("stage", String(255), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("duration", Double, nullable=False),  # seconds, finite, >= 0
    Column("outcome", String(16), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("commit_sha", String(64), nullable=True),
    Column("ci_run_id", String(255), nullable=True),
    Column("ts", Double, nullable=False),  # when it ran: POSIX epoch seconds (UTC)
    Column("recorded_at", Double, nullable=False),
    # Results (step 3): the metric gate's verdict on the file, beside the final outcome.
    # NULL on rows recorded before step 3 and on files without a gate.
    Column("gate_status", String(16), nullable=True),  # PASS | FAIL | ERROR | INACTIVE
    Column("gate_mode", String(16), nullable=True),  # enforced | shadow
    Column("reason", String(500), nullable=True),  # why the verdict is what it is
    # Step 4: the record's stable identity (testfleet.store.identity); NULL never after step 4.
    Column("uid", String(32), nullable=True, info={"since": 4}),
    # Results (step 5): true on the row that holds the file's final verdict in its run,
    # false on an attempt that was retried. Rows before step 5 are classified by it.
    Column("final", Boolean, nullable=True),
)
_ix_stage_file_ts = Index("ix_executions_stage_file_ts", executions.c.stage,
                          executions.c.file, executions.c.ts)
_ix_run = Index("ix_executions_ci_run_id", executions.c.ci_run_id)
_ux_uid = Index("ux_executions_uid", executions.c.uid, unique=True, info={"since": 4})
# Step 6 (#17): estimates and `db prune` take a file's newest rows by recording time (an
# imported timestamp cannot pin them), so that order is an index range scan too.
ix_recorded = Index("ix_executions_stage_file_recorded", executions.c.stage, executions.c.file,
                    executions.c.recorded_at, executions.c.ts, info={"since": 6})


def create_as_of(conn: Connection, table: Table, version: int) -> None:
    """Create ``table`` as step ``version`` defined it.

    Columns and indexes added by a later step carry ``info={"since": <step>}`` on the
    ``Table`` (queries need them there); a released step must keep creating exactly
    what it always created, so that the later step's ``ALTER`` finds the table as
    databases in the field have it.
    """
    later = [c for c in table.columns if c.info.get("since", 1) > version]
    if not later:
        table.create(conn)  # with its indexes
        return
    frozen = Table(table.name, MetaData(),
                   *[c._copy() for c in table.columns if c.info.get("since", 1) <= version])
    for index in table.indexes:
        if index.info.get("since", 1) <= version:
            Index(index.name, *[frozen.c[c.name] for c in index.columns], unique=index.unique)
    frozen.create(conn)
