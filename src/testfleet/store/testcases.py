"""Per-testcase results of pytest files, beside the per-file executions.

One row per test per attempt (schema step 4): which test of which file in which
stage, its outcome over setup, call and teardown, and the same who/when columns as
an execution (commit, CI run id, attempt), so flaky detection can see a test that
failed and passed on one commit, or passed on a retry. Durations for sharding stay
per file (``executions``); these rows are for results and flakiness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Boolean, Column, Double, Index, Integer, String, Table

from testfleet.store.caserow import NAME_MAX, CaseRow, case_payload
from testfleet.store.tables import metadata

if TYPE_CHECKING:
    from sqlalchemy import Connection

_IN_CHUNK = 500

testcases = Table(
    "testcases",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("file", String(1024), nullable=False),
    Column("stage", String(255), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("name", String(NAME_MAX), nullable=False),  # pytest node id without the file part
    Column("outcome", String(16), nullable=False),
    Column("duration", Double, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("final", Boolean, nullable=False),  # from the file's final attempt in its run
    Column("commit_sha", String(64), nullable=True),
    Column("ci_run_id", String(255), nullable=True),
    Column("ts", Double, nullable=False),
    Column("recorded_at", Double, nullable=False),
    # Incidents (step 8): the failing test's signature digest (store.signatures).
    Column("signature", String(16), nullable=True, info={"since": 8}),
)
Index("ix_testcases_stage_file_ts", testcases.c.stage, testcases.c.file, testcases.c.ts)


def create_tables(conn: Connection) -> None:
    """DDL of schema step 5 (called only from the migration): the table as it was then."""
    from testfleet.store.tables import create_as_of

    create_as_of(conn, testcases, 5)


def insert_cases(conn: Connection, rows: Sequence[CaseRow]) -> None:
    payload = case_payload(rows)
    if payload:
        conn.execute(testcases.insert(), payload)


def prune_cases(conn: Connection, keep: int, older_than: float | None = None) -> int:
    """Keep the newest ``keep`` rows per (stage, file, test) -- newest as stored here (local
    id), like executions (see ``durations.prune``) -- and none that ran before ``older_than``."""
    from sqlalchemy import delete, func, or_, select

    tc = testcases
    rn = func.row_number().over(partition_by=(tc.c.stage, tc.c.file, tc.c.name),
                                order_by=tc.c.id.desc()).label("rn")
    ranked = select(tc.c.id, tc.c.ts, rn).subquery()
    doomed = select(ranked.c.id).where(
        or_(ranked.c.rn > keep, *([ranked.c.ts < older_than] if older_than is not None else [])))
    ids = [row[0] for row in conn.execute(doomed)]
    deleted = 0
    for i in range(0, len(ids), _IN_CHUNK):
        deleted += conn.execute(delete(tc).where(tc.c.id.in_(ids[i:i + _IN_CHUNK]))).rowcount or 0
    return deleted
