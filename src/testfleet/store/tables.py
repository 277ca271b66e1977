"""The history database's shared tables: ``metadata``, ``schema_version``, executions.

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
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", Double, nullable=False),  # POSIX epoch seconds
)

# What readers see of one execution of one test file in one stage (one row per
# attempt): since step 7 the view ``executions`` over the three tables below, with the
# columns every step before it had as a table. Readers select from it; writers go
# through ``store.execution_rows`` (a view takes no INSERT on SQLite). Steps 1-6 create
# and alter the table of the same name as they always did (``schema._executions_v6``).
executions = Table(
    "executions",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
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
    # Step 4: the record's stable identity, 32 hex digits (testfleet.store.identity).
    Column("uid", String(32), nullable=False),
    # Results (step 5): true on the row that holds the file's final verdict in its run,
    # false on an attempt that was retried. Rows before step 5 are classified by it.
    Column("final", Boolean, nullable=True),
    # Incidents (step 8): the failure's signature digest (store.signatures); NULL on a
    # pass and on rows recorded before step 8.
    Column("signature", String(16), nullable=True, info={"since": 8}),
)

# Step 7 (#11): the history is a CI cache that every job restores, so its size is paid
# on every job. The strings every row repeated (a 60-character path, the stage, the
# backend, a 40-digit commit, the run id) and the 32-digit uid were most of each row and
# of each index entry; they are keys into two small tables now, and the uid is its 16
# bytes. A file's key is (stage, file) alone, so its rows are one index range in time
# order; the backend goes with the source (a CI job runs one).
tested_files = Table(
    "tested_files",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("stage", String(255), nullable=False),
    Column("file", String(1024), nullable=False),
    UniqueConstraint("stage", "file", name="ux_tested_files"),
)

# One row per (commit, CI run, backend) that recorded executions. NULLs are values here
# (a local run has no commit or run id): the unique constraint dedupes only rows without
# them, and the writer looks NULLs up with IS (a second row from two writers racing is
# harmless: the view reads both).
sources = Table(
    "sources",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("commit_sha", String(64), nullable=True),
    Column("ci_run_id", String(255), nullable=True),
    Column("backend", String(64), nullable=False),
    UniqueConstraint("commit_sha", "ci_run_id", "backend", name="ux_sources"),
)
Index("ix_sources_ci_run_id", sources.c.ci_run_id)

execution_rows = Table(
    "execution_rows",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("tested_id", Integer, ForeignKey("tested_files.id"), nullable=False),
    Column("source_id", Integer, ForeignKey("sources.id"), nullable=False),
    Column("duration", Double, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("ts", Double, nullable=False),
    Column("recorded_at", Double, nullable=False),
    Column("gate_status", String(16), nullable=True),
    Column("gate_mode", String(16), nullable=True),
    Column("reason", String(500), nullable=True),
    Column("uid", LargeBinary(16), nullable=False),
    Column("final", Boolean, nullable=True),
    Column("signature", String(16), nullable=True, info={"since": 8}),
)
# A file's newest rows by recording time (estimates, prune: step 6's order) are one
# range scan; with the rowid SQLite keeps in every entry it serves the full
# ``recorded_at DESC, ts DESC, id DESC`` order, and every per-(stage, file) query.
Index("ix_execution_rows_recorded", execution_rows.c.tested_id, execution_rows.c.recorded_at,
      execution_rows.c.ts)
Index("ux_execution_rows_uid", execution_rows.c.uid, unique=True)
# No index on source_id: only ``history export --run-id`` and a JUnit import's
# idempotency check select by CI run, once per command, and a scan of the rows is
# milliseconds; the index would be 5 % of the file every job restores.

# Step 8 (#29): a failure signature's kind, label and normalized text, once per digest
# (store.signatures writes and reads it; executions and testcases name it).
failure_signatures = Table(
    "failure_signatures",
    metadata,
    Column("digest", String(16), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("label", String(120), nullable=False),
    Column("text", String(300), nullable=False),
)

#: The view's definition per dialect: only the uid's hex form differs.
_UID_HEX = {"sqlite": "lower(hex(e.uid))", "postgresql": "encode(e.uid, 'hex')"}


def executions_view_sql(dialect: str, version: int = 8) -> str:
    """The view as step ``version`` (7, or 8 which added ``signature``) defines it."""
    uid = _UID_HEX[dialect]
    signature = ", e.signature" if version >= 8 else ""
    return (
        "CREATE VIEW executions AS SELECT e.id, t.file, t.stage, s.backend, e.duration, "
        "e.outcome, e.attempt, s.commit_sha, s.ci_run_id, e.ts, e.recorded_at, e.gate_status, "
        f"e.gate_mode, e.reason, {uid} AS uid, e.final{signature} "
        "FROM execution_rows e JOIN tested_files t ON t.id = e.tested_id "
        "JOIN sources s ON s.id = e.source_id"
    )


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
