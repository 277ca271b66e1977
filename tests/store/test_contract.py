"""The contract every engine must honour: the same tests on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from testfleet.config import Project
from testfleet.store import InvalidExecution, SchemaTooNew, open_store
from testfleet.store.durations import OUTCOMES, Execution
from testfleet.store.schema import latest_version, schema_version


def ex(file: str, duration: float, ts: float, *, stage: str = "stage-a-cpu",
       outcome: str = "PASSED", **kw: object) -> Execution:
    backend = {"stage-a-cpu": "cpu", "stage-c-h200": "cuda", "stage-c-mi300x": "rocm"}[stage]
    return Execution(file, stage, backend, duration, outcome=outcome, timestamp=ts, **kw)  # type: ignore[arg-type]


def test_schema_is_at_the_latest_version(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store:
        assert store.schema_version() == latest_version()
        assert store.pending_migrations() == []


def test_newest_first_window_and_passing_only(project: Project, store_url: str | None) -> None:
    rows = [ex("tests/a.py", float(i), 1000.0 + i) for i in range(12)]
    rows += [
        ex("tests/a.py", 999.0, 5000.0, outcome="FAILED"),
        ex("tests/a.py", 998.0, 5001.0, outcome="TIMEOUT"),
        ex("tests/a.py", 997.0, 5002.0, outcome="ERROR"),
        ex("tests/a.py", 996.0, 5003.0, outcome="NOT_RUN"),
        ex("tests/a.py", 50.0, 6000.0, outcome="FLAKY", attempt=2),
        ex("tests/b.py", 7.5, 1000.0),
    ]
    with open_store(project, store_url) as store:
        store.record_executions(rows)
        got = store.durations("stage-a-cpu", None, window=4)
    assert got == {"tests/a.py": [50.0, 11.0, 10.0, 9.0], "tests/b.py": [7.5]}


def test_history_is_keyed_by_stage(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store:
        store.record_executions([
            ex("tests/e2e.py", 1000.0, 1.0, stage="stage-c-h200"),
            ex("tests/e2e.py", 2300.0, 2.0, stage="stage-c-mi300x"),
        ])
        assert store.durations("stage-c-h200", None, 10) == {"tests/e2e.py": [1000.0]}
        assert store.durations("stage-c-mi300x", ["tests/e2e.py"], 10) == {"tests/e2e.py": [2300.0]}
        assert store.durations("stage-a-cpu", None, 10) == {}


def test_file_filter_including_long_lists(project: Project, store_url: str | None) -> None:
    rows = [ex(f"tests/t{i:04d}.py", float(i), 10.0) for i in range(1200)]
    with open_store(project, store_url) as store:
        store.record_executions(rows)
        wanted = [f"tests/t{i:04d}.py" for i in range(0, 1200, 2)] + ["tests/unknown.py"]
        got = store.durations("stage-a-cpu", wanted, 3)
        assert store.durations("stage-a-cpu", [], 3) == {}
    assert len(got) == 600
    assert got["tests/t0002.py"] == [2.0]
    assert "tests/t0001.py" not in got


def test_equal_timestamps_newest_recorded_first(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store:
        store.record_executions([ex("tests/a.py", 1.0, 100.0)])
        store.record_executions([ex("tests/a.py", 2.0, 100.0)])
        assert store.durations("stage-a-cpu", None, 10) == {"tests/a.py": [2.0, 1.0]}


def test_aware_datetimes_in_any_zone_order_correctly(project: Project, store_url: str | None) -> None:
    utc = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    plus2 = timezone(timedelta(hours=2))
    with open_store(project, store_url) as store:
        store.record_executions([
            Execution("tests/a.py", "stage-a-cpu", "cpu", 1.0, timestamp=utc),
            # 13:30 at +02:00 is 11:30 UTC: older than the UTC row.
            Execution("tests/a.py", "stage-a-cpu", "cpu", 2.0,
                      timestamp=datetime(2026, 1, 1, 13, 30, tzinfo=plus2)),
            Execution("tests/a.py", "stage-a-cpu", "cpu", 3.0),  # None = now
        ])
        assert store.durations("stage-a-cpu", None, 10) == {"tests/a.py": [3.0, 1.0, 2.0]}


@pytest.mark.parametrize("bad", [
    {"duration": -1.0}, {"duration": math.nan}, {"duration": math.inf}, {"duration": "3"},
    {"outcome": "passed"}, {"attempt": 0}, {"file": ""}, {"stage": "  "},
    {"timestamp": datetime(2026, 1, 1)}, {"timestamp": math.nan}, {"commit": "x" * 65},
])
def test_invalid_rows_reject_the_whole_batch(project: Project, store_url: str | None,
                                             bad: dict[str, object]) -> None:
    fields: dict[str, object] = {"file": "tests/a.py", "stage": "stage-a-cpu", "backend": "cpu",
                                 "duration": 1.0}
    fields.update(bad)
    good = Execution("tests/good.py", "stage-a-cpu", "cpu", 1.0)
    with open_store(project, store_url) as store:
        with pytest.raises(InvalidExecution, match="refusing to record 2 execution"):
            store.record_executions([good, Execution(**fields)])  # type: ignore[arg-type]
        assert store.durations("stage-a-cpu", None, 10) == {}


def test_every_outcome_is_storable(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store:
        store.record_executions([ex("tests/a.py", 1.0, 1.0, outcome=o) for o in OUTCOMES])
        summary = store.stage_summary()
    assert summary[0]["stage"] == "stage-a-cpu"
    assert summary[0]["executions"] == len(OUTCOMES)
    assert summary[0]["passing"] == 2
    assert summary[0]["files"] == 1
    # JSON numbers on every engine (PostgreSQL's SUM is a Decimal, which `db status
    # --format json` wrote as the string "2")
    assert {k: type(v) for k, v in summary[0].items()} == {
        "stage": str, "executions": int, "passing": int, "files": int, "newest": float}


def test_run_ids_are_countable(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store:
        store.record_executions([ex("tests/a.py", 1.0, 1.0, ci_run_id="run-7", commit="abc123"),
                                 ex("tests/b.py", 1.0, 1.0, ci_run_id="run-7"),
                                 ex("tests/b.py", 1.0, 1.0, ci_run_id="run-8")])
        assert store.run_executions("run-7") == 2
        assert store.run_executions("run-7", "stage-c-h200") == 0
        assert store.run_executions("nope") == 0


def test_empty_batch_is_a_no_op(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store:
        store.record_executions([])
        assert store.durations("stage-a-cpu", None, 10) == {}


def test_window_must_be_positive(project: Project, store_url: str | None) -> None:
    with open_store(project, store_url) as store, pytest.raises(ValueError, match="window"):
        store.durations("stage-a-cpu", None, 0)


def test_a_newer_schema_is_refused(project: Project, store_url: str | None,
                                   engine_name: str, request: pytest.FixtureRequest) -> None:
    from testfleet.store import connect

    owner_url = store_url if engine_name == "sqlite" else request.getfixturevalue("pg_url")
    with open_store(project, owner_url) as store, store.write() as conn:
        conn.execute(schema_version.insert().values(version=latest_version() + 5,
                                                    description="from the future", applied_at=0.0))
    with pytest.raises(SchemaTooNew, match=f"schema version {latest_version() + 5}"):
        open_store(project, store_url)
    with pytest.raises(SchemaTooNew), open_store(project, store_url, readonly=True):
        pass
    with connect(project, owner_url) as store, pytest.raises(SchemaTooNew):
        store.migrate()


def test_migrate_is_idempotent(project: Project, store_url: str | None, engine_name: str,
                               request: pytest.FixtureRequest) -> None:
    from testfleet.store import connect

    owner_url = store_url if engine_name == "sqlite" else request.getfixturevalue("pg_url")
    open_store(project, store_url).close()
    with connect(project, owner_url) as store:
        assert store.migrate() == []
        assert store.schema_version() == latest_version()


def test_prune_keeps_the_newest_per_file_and_outcome_class(project: Project,
                                                            store_url: str | None) -> None:
    rows = [ex("tests/a.py", float(i), 100.0 + i) for i in range(10)]
    rows += [ex("tests/a.py", 500.0 + i, 200.0 + i, outcome="FAILED") for i in range(10)]
    rows += [ex("tests/a.py", 7.0, 1.0, stage="stage-c-h200")]
    rows += [ex("tests/b.py", 1.0, 50.0), ex("tests/b.py", 2.0, 60.0)]
    with open_store(project, store_url) as store:
        store.record_executions(rows)
        assert store.prune_executions(3) == 7 + 7
        assert store.durations("stage-a-cpu", None, 100) == {"tests/a.py": [9.0, 8.0, 7.0],
                                                             "tests/b.py": [2.0, 1.0]}
        assert store.durations("stage-c-h200", None, 100) == {"tests/a.py": [7.0]}
        assert store.prune_executions(3, older_than=55.0) == 2  # h200's and b's oldest
        assert store.durations("stage-a-cpu", None, 100)["tests/b.py"] == [2.0]
        assert store.prune_executions(3) == 0
        with pytest.raises(ValueError, match="keep"):
            store.prune_executions(0)


def test_duration_samples_bound_by_recent_timeouts(project: Project, store_url: str | None) -> None:
    rows = [ex("tests/a.py", 60.0 + i, 100.0 + i) for i in range(5)]
    rows += [ex("tests/a.py", 300.0, 200.0, outcome="TIMEOUT"),
             ex("tests/a.py", 310.0, 201.0, outcome="TIMEOUT"),
             ex("tests/a.py", 9.0, 202.0, outcome="FAILED")]
    # b: its only timeout is older than its last 3 executions, so it does not count
    rows += [ex("tests/b.py", 900.0, 1.0, outcome="TIMEOUT")]
    rows += [ex("tests/b.py", 5.0, 10.0 + i) for i in range(3)]
    # c: never passed, always times out (the case passing-only history cannot see)
    rows += [ex("tests/c.py", 300.0 + i, 50.0 + i, outcome="TIMEOUT") for i in range(4)]
    rows += [ex("tests/c.py", 400.0, 1.0, stage="stage-c-h200", outcome="TIMEOUT")]
    with open_store(project, store_url) as store:
        store.record_executions(rows)
        got = store.duration_samples("stage-a-cpu", None, window=2, recent=3)
        assert {f: (s.passing, s.timeout) for f, s in got.items()} == {
            "tests/a.py": ([64.0, 63.0], 310.0),
            "tests/b.py": ([5.0, 5.0], None),
            "tests/c.py": ([], 303.0),
        }
        # recent defaults to window; the file filter and stage keying hold as for durations()
        only = store.duration_samples("stage-a-cpu", ["tests/b.py", "tests/none.py"], window=10)
        assert {f: (s.passing, s.timeout) for f, s in only.items()} == {
            "tests/b.py": ([5.0, 5.0, 5.0], 900.0)}
        h200 = store.duration_samples("stage-c-h200", None, 10)
        assert {f: (s.passing, s.timeout) for f, s in h200.items()} == {"tests/c.py": ([], 400.0)}
        assert store.duration_samples("stage-a-cpu", [], 3) == {}
        # the existing passing-only view is unchanged
        assert store.durations("stage-a-cpu", None, 2) == {"tests/a.py": [64.0, 63.0],
                                                            "tests/b.py": [5.0, 5.0]}
        with pytest.raises(ValueError, match="recent"):
            store.duration_samples("stage-a-cpu", None, 3, recent=0)
        with pytest.raises(ValueError, match="window"):
            store.duration_samples("stage-a-cpu", None, 0)


def test_duration_samples_long_file_lists(project: Project, store_url: str | None) -> None:
    rows = [ex(f"tests/t{i:04d}.py", float(i), 10.0,
               outcome="TIMEOUT" if i % 3 == 0 else "PASSED") for i in range(1200)]
    with open_store(project, store_url) as store:
        store.record_executions(rows)
        wanted = [f"tests/t{i:04d}.py" for i in range(0, 1200, 2)] + ["tests/unknown.py"]
        got = store.duration_samples("stage-a-cpu", wanted, 3)
    assert len(got) == 600 and "tests/unknown.py" not in got
    assert got["tests/t0006.py"].passing == [] and got["tests/t0006.py"].timeout == 6.0
    assert got["tests/t0004.py"].passing == [4.0] and got["tests/t0004.py"].timeout is None
