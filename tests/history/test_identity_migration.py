"""Schema step 4: every execution and gate run gets a stable uid, also rows from before it."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from testfleet.config import Project
from testfleet.store import connect, open_store
from testfleet.store.durations import Execution
from testfleet.store.identity import UID_PATTERN, execution_uid, gate_run_uid
from testfleet.store.metrics import gate_runs
from testfleet.store.schema import (
    MIGRATIONS,
    apply_step,
    executions,
    latest_version,
    lock_for_migration,
)


def _v3_database(project: Project, url: str | None) -> None:
    """A database as testfleet left it before step 4, holding rows without identities
    (two of them identical, as a JUnit file imported twice with --force leaves them)."""
    with connect(project, url, create_file=True) as store:
        for step in MIGRATIONS[:3]:
            with store.write() as conn:
                lock_for_migration(conn)
                apply_step(conn, step)
        row = {"file": "tests/a.py", "stage": "stage-a-cpu", "backend": "cpu", "duration": 1.5,
               "outcome": "PASSED", "attempt": 1, "commit_sha": "abc", "ci_run_id": "7",
               "ts": 100.0, "recorded_at": 101.0}
        with store.write() as conn:
            conn.execute(executions.insert(), [row, row, {**row, "file": "tests/b.py"}])
            conn.execute(gate_runs.insert(), [{
                "run_id": "r1", "test_path": "tests/a.py", "test_hash": "h", "backend": "cpu",
                "suite": "stage-a-cpu", "env_key": "", "ci_run_id": "7", "commit_sha": "abc",
                "trusted": True, "recorded_at": 50.0}])


@pytest.fixture
def old_url(engine_name: str, project: Project, request: pytest.FixtureRequest) -> str | None:
    if engine_name == "sqlite":
        _v3_database(project, None)
        return None
    url: str = request.getfixturevalue("pg_url")
    _v3_database(project, url)
    return url


def test_step_3_gives_old_rows_stable_unique_identities(project: Project,
                                                         old_url: str | None) -> None:
    with connect(project, old_url) as store:
        assert [m.version for m in store.migrate()] == list(range(4, latest_version() + 1))
        with store.read() as conn:
            uids = [r[0] for r in conn.execute(select(executions.c.uid).order_by(executions.c.id))]
            run_uids = list(conn.execute(select(gate_runs.c.uid)).scalars())
    expected = execution_uid(file="tests/a.py", stage="stage-a-cpu", backend="cpu", attempt=1,
                             commit="abc", ci_run_id="7", ts=100.0, duration=1.5, outcome="PASSED")
    assert uids[0] == expected
    assert len(set(uids)) == 3 and all(UID_PATTERN.match(u) for u in uids)
    assert run_uids == [gate_run_uid(run_id="r1", test_path="tests/a.py", backend="cpu",
                                     suite="stage-a-cpu", env_key="", ci_run_id="7",
                                     commit="abc", recorded_at=50.0)]


def test_new_rows_get_their_own_identity_even_when_they_look_alike(
        project: Project, store_url: str | None) -> None:
    same = Execution("tests/a.py", "stage-a-cpu", "cpu", 2.0, timestamp=5.0)
    with open_store(project, store_url) as store:
        store.record_executions([same, same])
        store.record_executions([same])
        with store.read() as conn:
            uids = list(conn.execute(select(executions.c.uid)).scalars())
            count = conn.execute(select(func.count()).select_from(executions)).scalar()
    assert count == 3 and len(set(uids)) == 3 and all(UID_PATTERN.match(u) for u in uids)
