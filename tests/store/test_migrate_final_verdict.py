"""Schema step 3 on a database that already holds executions (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from testfleet.config import Project
from testfleet.store import connect, open_store
from testfleet.store.durations import Execution
from testfleet.store.schema import MIGRATIONS, apply_step, executions, latest_version


def _v2_database(project: Project, url: str | None) -> None:
    """A database as testfleet left it before step 3, with two rows in it."""
    with connect(project, url, create_file=True) as store, store.write() as conn:
        for step in MIGRATIONS[:2]:
            apply_step(conn, step)
        conn.execute(text(
            "INSERT INTO executions (file, stage, backend, duration, outcome, attempt, "
            "commit_sha, ci_run_id, ts, recorded_at) VALUES "
            "('tests/a.py', 'stage-a-cpu', 'cpu', 1.5, 'PASSED', 1, 'abc', '77', 10.0, 11.0)"))


@pytest.mark.parametrize("engine_name", ["sqlite", "postgresql"])
def test_step_3_keeps_rows_and_marks_the_gate_not_recorded(
        engine_name: str, project: Project, request: pytest.FixtureRequest) -> None:
    owner = None if engine_name == "sqlite" else request.getfixturevalue("pg_url")
    rw = None if engine_name == "sqlite" else request.getfixturevalue("pg_url_rw")
    _v2_database(project, owner)
    with connect(project, owner) as store:
        assert store.schema_version() == 2
        assert [m.version for m in store.migrate()] == list(range(3, latest_version() + 1))
    with open_store(project, rw) as store:
        store.record_executions([Execution("tests/a.py", "stage-a-cpu", "cpu", 2.0,
                                           outcome="FAILED", timestamp=20.0, gate_status="FAIL",
                                           gate_mode="enforced", reason="metric gate failed")])
        with store.read() as conn:
            got = conn.execute(select(executions.c.outcome, executions.c.duration,
                                      executions.c.gate_status, executions.c.gate_mode,
                                      executions.c.reason).order_by(executions.c.id)).all()
    assert [tuple(r) for r in got] == [
        ("PASSED", 1.5, None, None, None),
        ("FAILED", 2.0, "FAIL", "enforced", "metric gate failed"),
    ]


@pytest.mark.parametrize("bad", [{"gate_status": "MAYBE", "gate_mode": "enforced"},
                                 {"gate_status": "FAIL", "gate_mode": "loud"},
                                 {"gate_status": "FAIL"},
                                 {"reason": "x" * 501}])
def test_invalid_gate_fields_are_refused(bad: dict[str, str]) -> None:
    row = Execution("tests/a.py", "s", "cpu", 1.0, **bad)  # type: ignore[arg-type]
    assert row.problems()
