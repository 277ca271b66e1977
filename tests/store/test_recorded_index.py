"""Schema step 6 (#17): estimates take each file's newest rows by recording time, so
(stage, file, recorded_at) is indexed; since step 7 (#11) that is (tested_id, recorded_at,
ts) on ``execution_rows``. The steps apply to a step-5 database on SQLite and on the real
PostgreSQL, and the embedded SQLite answers the window query from the index."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from testfleet.config import Project
from testfleet.store import connect, open_store
from testfleet.store.durations import Execution, execution_payload
from testfleet.store.schema import (
    MIGRATIONS,
    apply_step,
    executions,
    latest_version,
    lock_for_migration,
)

OLD_INDEX = "ix_executions_stage_file_recorded"
INDEX = "ix_execution_rows_recorded"


def _indexes(store, table: str) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    with store.read() as conn:
        return {ix["name"]: list(ix["column_names"]) for ix in inspect(conn).get_indexes(table)}


def migrate_to(store, version: int) -> None:  # type: ignore[no-untyped-def]
    for step in MIGRATIONS[:version]:
        with store.write() as conn:
            lock_for_migration(conn)
            apply_step(conn, step)


@pytest.fixture
def v5_url(engine_name: str, project: Project, request: pytest.FixtureRequest) -> str | None:
    """A database as testfleet left it before step 6, with a row in it (written as the
    writers of steps 5 and 6 wrote it: into the table ``executions``)."""
    url = None if engine_name == "sqlite" else request.getfixturevalue("pg_url")
    with connect(project, url, create_file=True) as store:
        migrate_to(store, 5)
        with store.write() as conn:
            conn.execute(executions.insert(), [
                {k: v for k, v in row.items() if k != "signature"}  # step 8's column
                for row in execution_payload([Execution("tests/a.py", "stage-a-cpu", "cpu", 3.0)])])
        assert OLD_INDEX not in _indexes(store, "executions")
    return url


def test_steps_6_and_7_index_the_recording_time(project: Project, v5_url: str | None) -> None:
    with connect(project, v5_url) as store:
        assert [m.version for m in store.migrate()] == list(range(6, latest_version() + 1))
        assert _indexes(store, "execution_rows")[INDEX] == ["tested_id", "recorded_at", "ts"]
        assert store.schema_version() == latest_version()
        assert store.durations("stage-a-cpu", None, window=3) == {"tests/a.py": [3.0]}


def test_a_new_database_has_it(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store:
        assert INDEX in _indexes(store, "execution_rows")


def test_sqlite_reads_the_newest_recorded_rows_through_the_index(project: Project) -> None:
    with open_store(project) as store:
        store.record_executions([Execution("tests/a.py", "stage-a-cpu", "cpu", float(i))
                                 for i in range(50)])
        with store.read() as conn:
            plan = " ".join(str(row[-1]) for row in conn.execute(text(
                "EXPLAIN QUERY PLAN SELECT duration FROM executions WHERE stage = 'stage-a-cpu' "
                "AND file = 'tests/a.py' ORDER BY recorded_at DESC, ts DESC, id DESC LIMIT 10")))
    assert INDEX in plan, plan
    assert "TEMP B-TREE FOR ORDER BY" not in plan.replace("LAST TERM OF", ""), plan
