"""Per-testcase results of pytest files, beside the per-file executions.

One row per test per attempt (schema step 4): which test of which file in which
stage, its outcome over setup, call and teardown, and the same who/when columns as
an execution (commit, CI run id, attempt), so flaky detection can see a test that
failed and passed on one commit, or passed on a retry. Durations for sharding stay
per file (``executions``); these rows are for results and flakiness.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Boolean, Column, Double, Index, Integer, String, Table

from testfleet.store.durations import CASE_OUTCOMES  # one definition (bundles use it too)
from testfleet.store.errors import InvalidExecution
from testfleet.store.schema import metadata

if TYPE_CHECKING:
    from sqlalchemy import Connection

NAME_MAX = 1024
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
)
Index("ix_testcases_stage_file_ts", testcases.c.stage, testcases.c.file, testcases.c.ts)


def create_tables(conn: Connection) -> None:
    """DDL of schema step 4 (called only from the migration)."""
    testcases.create(conn)


@dataclass(frozen=True)
class CaseRow:
    """One test's result in one attempt of one file."""

    file: str
    stage: str
    backend: str
    name: str
    outcome: str
    duration: float = 0.0
    attempt: int = 1
    commit: str | None = None
    ci_run_id: str | None = None
    timestamp: float | None = None
    final: bool = True

    def problems(self) -> list[str]:
        out: list[str] = []
        for field_name in ("file", "stage", "backend", "name"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value:
                out.append(f"{field_name} must be a non-empty string")
        if len(self.name or "") > NAME_MAX:
            out.append(f"name longer than {NAME_MAX} characters")
        if self.outcome not in CASE_OUTCOMES:
            out.append(f"outcome {self.outcome!r} is not one of {', '.join(CASE_OUTCOMES)}")
        if (isinstance(self.duration, bool) or not isinstance(self.duration, (int, float))
                or not math.isfinite(self.duration) or self.duration < 0):
            out.append(f"duration must be a finite number >= 0, got {self.duration!r}")
        if isinstance(self.attempt, bool) or not isinstance(self.attempt, int) or self.attempt < 1:
            out.append(f"attempt must be an integer >= 1, got {self.attempt!r}")
        return out


def insert_cases(conn: Connection, rows: Sequence[CaseRow]) -> None:
    bad = [f"{r.file}::{r.name}: {p}" for r in rows for p in r.problems()]
    if bad:
        raise InvalidExecution("refusing to record testcases:\n  " + "\n  ".join(bad[:20]))
    now = time.time()
    payload = [
        {"file": r.file, "stage": r.stage, "backend": r.backend, "name": r.name,
         "outcome": r.outcome, "duration": float(r.duration), "attempt": r.attempt,
         "final": bool(r.final),
         "commit_sha": r.commit, "ci_run_id": r.ci_run_id,
         "ts": now if r.timestamp is None else float(r.timestamp), "recorded_at": now}
        for r in rows
    ]
    if payload:
        conn.execute(testcases.insert(), payload)


def prune_cases(conn: Connection, keep: int, older_than: float | None = None) -> int:
    """Keep the newest ``keep`` rows per (stage, file, test) and none before ``older_than``."""
    from sqlalchemy import delete, func, or_, select

    tc = testcases
    rn = func.row_number().over(partition_by=(tc.c.stage, tc.c.file, tc.c.name),
                                order_by=(tc.c.ts.desc(), tc.c.id.desc())).label("rn")
    ranked = select(tc.c.id, tc.c.ts, rn).subquery()
    doomed = select(ranked.c.id).where(
        or_(ranked.c.rn > keep, *([ranked.c.ts < older_than] if older_than is not None else [])))
    ids = [row[0] for row in conn.execute(doomed)]
    deleted = 0
    for i in range(0, len(ids), _IN_CHUNK):
        deleted += conn.execute(delete(tc).where(tc.c.id.in_(ids[i:i + _IN_CHUNK]))).rowcount or 0
    return deleted
