"""Schema step 7 (#11): executions keyed to ``tested_files`` and ``sources`` with 16-byte
uids, read through the view ``executions``. The step keeps every row and value of a
step-6 database (SQLite and the real PostgreSQL); every writer stores the same rows;
on SQLite the gate's values lose their duplicate rowid table."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy import select

from store.test_recorded_index import migrate_to
from testfleet.config import Project
from testfleet.store import connect, open_store
from testfleet.store.durations import Execution, execution_payload
from testfleet.store.metric_store import MetricStore
from testfleet.store.metrics import GateRun, StoredValue
from testfleet.store.schema import executions, latest_version
from testfleet.store.sqlite_write import open_writer

ROWS = [
    # a local run: no commit, no CI run (NULLs are values in ``sources``)
    Execution("tests/a.py", "stage-a-cpu", "cpu", 1.5, timestamp=100.0),
    Execution("tests/a.py", "stage-a-cpu", "cpu", 2.5, timestamp=101.0),
    # the same file in another stage, and one stage that changed its backend
    Execution("tests/a.py", "stage-c-h200", "cuda", 30.0, commit="c" * 40, ci_run_id="7.1",
              timestamp=102.0),
    Execution("tests/b.py", "stage-c-h200", "rocm", 31.0, commit="c" * 40, ci_run_id="7.1",
              timestamp=103.0),
    # a retried attempt and its verdict, with the gate's columns and a reason
    Execution("tests/b.py", "stage-c-h200", "cuda", 40.0, outcome="FAILED", attempt=1,
              commit="d" * 40, ci_run_id="8", timestamp=104.0, final=False),
    Execution("tests/b.py", "stage-c-h200", "cuda", 41.0, outcome="FLAKY", attempt=2,
              commit="d" * 40, ci_run_id="8", timestamp=105.0, gate_status="FAIL",
              gate_mode="shadow", reason="train/loss rose 9 % (limit 5 %)"),
    # a commit without a CI run id, and a run id without a commit
    Execution("tests/c.py", "stage-a-cpu", "cpu", 0.0, outcome="TIMEOUT", commit="e" * 40,
              timestamp=106.0),
    Execution("tests/c.py", "stage-a-cpu", "cpu", 0.25, ci_run_id="9", timestamp=107.0),
]


def _view(store: Any, before_step_8: bool = False) -> list[dict[str, Any]]:
    columns = [c for c in executions.c if not (before_step_8 and c.name == "signature")]
    with store.read() as conn:
        return [dict(r._mapping) for r in conn.execute(select(*columns).order_by(executions.c.id))]


@pytest.fixture
def v6_url(engine_name: str, project: Project, request: pytest.FixtureRequest) -> str | None:
    """A database as testfleet left it before step 7: the table ``executions`` (with a
    gap in its ids, as pruning leaves it) and a gate run with values."""
    url = None if engine_name == "sqlite" else request.getfixturevalue("pg_url")
    with connect(project, url, create_file=True) as store:
        migrate_to(store, 6)
        payload = execution_payload(ROWS, now=500.0)
        for i, row in enumerate(payload):
            row["id"] = i * 3 + 1
            del row["signature"]  # step 8's column
        with store.write() as conn:
            conn.execute(executions.insert(), payload)
        MetricStore(store).write_run(
            GateRun("7.1-job", "tests/a.py", "cuda", "stage-c-h200", ci_run_id="7.1",
                    commit="c" * 40, recorded_at=100.0),
            [StoredValue("train/loss", "all", "{}", s, s / 10) for s in range(5)], trusted=True)
    return url


def test_step_7_keeps_every_row_and_value(project: Project, v6_url: str | None) -> None:
    with connect(project, v6_url) as store:
        before = _view(store, before_step_8=True)
        assert [m.version for m in store.migrate()] == [7, 8, 9, 10] == [7, 8, 9, latest_version()]
        after = _view(store)
    assert [{k: v for k, v in r.items() if k != "signature"} for r in after] == before
    assert {r["signature"] for r in after} == {None}  # step 8: rows before it have none
    assert [r["id"] for r in after] == [1, 4, 7, 10, 13, 16, 19, 22]
    assert after[0]["commit_sha"] is None and after[0]["ci_run_id"] is None
    assert after[5]["reason"] == "train/loss rose 9 % (limit 5 %)" and after[4]["final"] is False


def test_after_step_7_new_rows_follow_the_copied_ids(project: Project, v6_url: str | None) -> None:
    with connect(project, v6_url) as store:
        store.migrate()
        store.record_executions([Execution("tests/z.py", "stage-a-cpu", "cpu", 9.0)])
        rows = _view(store)
    assert rows[-1]["file"] == "tests/z.py" and rows[-1]["id"] > 22


def test_step_7_keeps_the_gate_values(project: Project, v6_url: str | None) -> None:
    from testfleet.store.metrics import gate_values as gv

    with connect(project, v6_url) as store:
        with store.read() as conn:
            values = sorted(tuple(r) for r in conn.execute(select(gv)))
        store.migrate()
        with store.read() as conn:
            assert sorted(tuple(r) for r in conn.execute(select(gv))) == values
    assert len(values) == 5


def test_sqlite_gate_values_have_no_rowid_table(project: Project) -> None:
    with open_store(project) as store:
        path = store.target.path
    con = sqlite3.connect(str(path))
    try:
        (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'gate_values'").fetchone()
        indexes = {r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'gate_values'")}
    finally:
        con.close()
    assert sql.endswith("WITHOUT ROWID")
    assert {"ix_gate_values_baseline", "ix_gate_values_run"} <= indexes


def test_every_writer_stores_the_same_rows(project: Project, tmp_path: Any) -> None:
    """The store (SQLAlchemy) and the runner's standard-library writer: same view rows,
    and keys shared, not repeated (one source for every local row of a backend)."""
    rows = [Execution(r.file, r.stage, r.backend, r.duration, r.outcome, r.attempt, r.commit,
                      r.ci_run_id, r.timestamp, r.gate_status, r.gate_mode, r.reason, r.final,
                      uid=f"{i:032x}") for i, r in enumerate(ROWS)]
    views = []
    for name, write in (("alchemy", "store"), ("stdlib", "writer")):
        with open_store(project, str(tmp_path / f"{name}.db")) as store:
            if write == "store":
                store.record_executions(rows[:4])
                store.record_executions(rows[4:])
            else:
                writer = open_writer(store.target)
                assert writer is not None
                writer.record_executions(rows[:4])
                writer.record_executions(rows[4:])
                writer.close()
            views.append([{k: v for k, v in r.items() if k not in ("id", "recorded_at")}
                          for r in _view(store)])
        con = sqlite3.connect(tmp_path / f"{name}.db")
        try:
            counts = [con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      for t in ("tested_files", "sources", "execution_rows")]
        finally:
            con.close()
        # files: (a, cpu stage) (a, h200) (b, h200) (c, cpu); sources: local cpu, 7.1 cuda,
        # 7.1 rocm, 8 cuda, commit e, run 9
        assert counts == [4, 6, 8], name
    assert views[0] == views[1]
    assert [r["uid"] for r in views[0]] == [f"{i:032x}" for i in range(len(ROWS))]


def test_a_known_uid_is_refused_unless_merging(project: Project, store_url: str | None) -> None:
    from testfleet.store.errors import StoreError

    row = Execution("tests/a.py", "stage-a-cpu", "cpu", 1.0, uid="ab" * 16)
    with open_store(project, store_url) as store:
        store.record_executions([row])
        with pytest.raises(StoreError):
            store.record_executions([row])
        assert len(_view(store)) == 1


def test_a_key_that_cannot_be_read_back_is_a_clear_error() -> None:
    """A connection that does not show its own writes (not READ COMMITTED) must not end
    in a bare KeyError deep in the writer."""
    from testfleet.store.errors import StoreError
    from testfleet.store.execution_rows import insert_payload

    class Blind:
        dialect = "postgresql"

        def __init__(self) -> None:
            self.writes: list[str] = []

        def rows(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
            return []

        def many(self, sql: str, params: list[dict[str, Any]]) -> None:
            self.writes.append(sql.split("(")[0])

    payload = execution_payload([Execution("tests/a.py", "stage-a-cpu", "cpu", 1.0)])
    db = Blind()
    with pytest.raises(StoreError, match=r"tested_files: 1 key\(s\) written but not readable"):
        insert_payload(db, payload)
    assert db.writes == ["INSERT INTO tested_files "]


@pytest.mark.parametrize("engine_name", ["sqlite"])
def test_sqlite_gives_back_the_pages_step_7_freed(project: Project, v6_url: str | None) -> None:
    """The old table's pages would stay in a cached file until the next merge."""
    with connect(project, v6_url) as store:
        store.migrate()
        path = store.target.path
    con = sqlite3.connect(str(path))
    try:
        assert con.execute("PRAGMA freelist_count").fetchone()[0] == 0
    finally:
        con.close()


def test_pruning_also_removes_keys_no_row_uses(project: Project, store_url: str | None) -> None:
    """A renamed file's (stage, file) key and a pruned-away run's source go with their
    last row; keys still in use stay."""
    old = [Execution("tests/old_name.py", "stage-a-cpu", "cpu", 1.0, commit="a" * 40,
                     ci_run_id="1", timestamp=10.0)]
    new = [Execution("tests/new_name.py", "stage-a-cpu", "cpu", 1.0, commit="b" * 40,
                     ci_run_id="2", timestamp=20.0 + i) for i in range(3)]
    with open_store(project, store_url) as store:
        store.record_executions(old + new)
        assert store.prune_executions(3, older_than=15.0) == 1
        with store.read() as conn:
            from testfleet.store.tables import sources, tested_files

            files = [r[0] for r in conn.execute(select(tested_files.c.file))]
            runs = [r[0] for r in conn.execute(select(sources.c.ci_run_id))]
        assert {r["file"] for r in _view(store)} == {"tests/new_name.py"}
    assert (files, runs) == (["tests/new_name.py"], ["2"])


@pytest.mark.parametrize("uid", ["not-a-uid", "AB" * 16, "ab" * 15])
def test_a_uid_step_7_cannot_store_stops_it_cleanly(project: Project, v6_url: str | None,
                                                    uid: str) -> None:
    """Only a hand-edited database holds such a uid; it was a ValueError traceback."""
    from sqlalchemy import update

    from testfleet.store.errors import StoreError

    with connect(project, v6_url) as store:
        with store.write() as conn:
            conn.execute(update(executions).where(executions.c.id == 10).values(uid=uid))
        before = _view(store, before_step_8=True)
        with pytest.raises(StoreError) as info:
            store.migrate()
        assert "row id 10" in str(info.value) and repr(uid) in str(info.value)
        assert "changed nothing" in str(info.value)
        assert store.schema_version() == 6
        assert _view(store, before_step_8=True) == before
