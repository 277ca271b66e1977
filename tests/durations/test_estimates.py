"""Estimates: the statistic, per-stage keying, min_samples, and every fallback path."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from testfleet.app.estimates import estimate_rows, estimates_for
from testfleet.config import DurationsConfig, Project
from testfleet.planning.estimates import compute, statistic
from testfleet.registry.model import Registration
from testfleet.store import open_store
from testfleet.store.durations import Execution
from testfleet.store.schema import latest_version, schema_version

REGS = [
    Registration("tests/e2e/test_big.py", "cuda", "stage-c-h200", 1000.0, line=3),
    Registration("tests/e2e/test_big.py", "rocm", "stage-c-mi300x", 1000.0, line=4),
    Registration("tests/unit/test_small.py", "cpu", "stage-a-cpu", 10.0, line=1),
]


@pytest.mark.parametrize(("samples", "kind", "want"), [
    ([5.0], "median", 5.0),
    ([1.0, 9.0, 3.0], "median", 3.0),
    ([1.0, 2.0, 3.0, 4.0], "median", 2.5),
    ([float(i) for i in range(1, 11)], "p90", 9.1),
    ([7.0], "p90", 7.0),
    ([100.0, 1.0, 1.0, 1.0, 1.0], "median", 1.0),  # one outlier does not move it
])
def test_statistic(samples: list[float], kind: str, want: float) -> None:
    assert statistic(samples, kind) == pytest.approx(want)


def test_statistic_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        statistic([], "median")
    with pytest.raises(ValueError, match="p99"):
        statistic([1.0], "p99")


def test_compute_uses_history_per_stage_with_min_samples_and_window() -> None:
    settings = DurationsConfig(statistic="median", window=3, min_samples=2)
    history = {
        "stage-c-h200": {"tests/e2e/test_big.py": [1200.0, 1100.0, 1300.0, 9999.0]},
        "stage-c-mi300x": {"tests/e2e/test_big.py": [2500.0]},  # below min_samples
    }
    rows = {(r.file, r.stage): r for r in compute(REGS, history, settings)}
    h200 = rows[("tests/e2e/test_big.py", "stage-c-h200")]
    assert (h200.estimate, h200.source, h200.samples) == (1200.0, "history", 3)  # 9999 is outside the window
    assert h200.drift == pytest.approx(1.2)
    mi = rows[("tests/e2e/test_big.py", "stage-c-mi300x")]
    assert (mi.estimate, mi.source, mi.samples, mi.drift) == (1000.0, "est_time", 1, None)
    cpu = rows[("tests/unit/test_small.py", "stage-a-cpu")]
    assert (cpu.estimate, cpu.source) == (10.0, "est_time")


def test_compute_stage_filter_keeps_literals_elsewhere() -> None:
    settings = DurationsConfig(min_samples=1)
    history = {"stage-c-h200": {"tests/e2e/test_big.py": [1.0]}}
    rows = compute(REGS, history, settings, stages=["stage-a-cpu"])
    assert all(r.source == "est_time" for r in rows)


def _record(project: Project, rows: list[Execution]) -> None:
    with open_store(project) as store:
        store.record_executions(rows)


def test_estimates_for_reads_history_keyed_by_stage(project: Project) -> None:
    _record(project, [
        Execution("tests/e2e/test_big.py", "stage-c-h200", "cuda", d, timestamp=float(i))
        for i, d in enumerate([900.0, 950.0, 1000.0])
    ] + [Execution("tests/e2e/test_big.py", "stage-c-mi300x", "rocm", d, timestamp=float(i))
         for i, d in enumerate([2100.0, 2300.0])])
    estimates, warnings = estimates_for(project, REGS)
    assert warnings == []
    assert estimates[("tests/e2e/test_big.py", "stage-c-h200")] == (950.0, "history")
    assert estimates[("tests/e2e/test_big.py", "stage-c-mi300x")] == (2200.0, "history")
    assert estimates[("tests/unit/test_small.py", "stage-a-cpu")] == (10.0, "est_time")
    only_cpu, _ = estimates_for(project, REGS, stages=["stage-a-cpu"])
    assert only_cpu[("tests/e2e/test_big.py", "stage-c-h200")] == (1000.0, "est_time")


def test_missing_database_falls_back_without_creating_it(project: Project) -> None:
    estimates, warnings = estimates_for(project, REGS)
    assert all(source == "est_time" for _, source in estimates.values())
    assert len(warnings) == 1 and "no history database at .testfleet/history.db" in warnings[0]
    assert not (project.root / ".testfleet").exists()


def test_missing_database_does_not_import_sqlalchemy(project: Project) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from testfleet.config import load_project\n"
        "from testfleet.app.estimates import estimates_for\n"
        "from testfleet.registry.model import Registration\n"
        f"p = load_project(Path({str(project.root)!r}))\n"
        "est, warn = estimates_for(p, [Registration('tests/a.py', 'cpu', 'stage-a-cpu', 5.0)])\n"
        "assert warn and 'sqlalchemy' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"PATH": "/usr/bin:/bin"})


def test_corrupt_database_falls_back(project: Project) -> None:
    path = project.root / ".testfleet" / "history.db"
    path.parent.mkdir()
    path.write_bytes(b"this is not a database, just text" * 100)
    estimates, warnings = estimates_for(project, REGS)
    assert all(source == "est_time" for _, source in estimates.values())
    assert "not a valid SQLite database" in warnings[0] and "est_time literals" in warnings[0]


def test_locked_database_falls_back(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("testfleet.app.estimates.BUSY_TIMEOUT", 0.2)
    path = project.root / ".testfleet" / "history.db"
    path.parent.mkdir()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        estimates, warnings = estimates_for(project, REGS)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert all(source == "est_time" for _, source in estimates.values())
    assert "locked" in warnings[0]


def test_newer_schema_falls_back(project: Project) -> None:
    with open_store(project) as store, store.write() as conn:
        conn.execute(schema_version.insert().values(version=latest_version() + 1,
                                                    description="future", applied_at=0.0))
    estimates, warnings = estimates_for(project, REGS)
    assert all(source == "est_time" for _, source in estimates.values())
    assert "newer" in warnings[0]


def test_uninitialised_database_falls_back(project: Project) -> None:
    path = project.root / "empty.db"
    sqlite3.connect(path).close()
    estimates, warnings = estimates_for(project, REGS, url=str(path))
    assert all(source == "est_time" for _, source in estimates.values())
    assert "no testfleet schema" in warnings[0]
    assert path.stat().st_size == 0  # a read never creates the schema


def test_unusable_url_falls_back(project: Project) -> None:
    estimates, warnings = estimates_for(project, REGS, url="mysql://h/db")
    assert all(source == "est_time" for _, source in estimates.values())
    assert "unsupported database URL scheme 'mysql'" in warnings[0]


def test_unreachable_postgres_falls_back(project: Project) -> None:
    estimates, warnings = estimates_for(project, REGS, url="postgresql://u:secret@127.0.0.1:1/db")
    assert all(source == "est_time" for _, source in estimates.values())
    assert "cannot connect" in warnings[0] and "secret" not in warnings[0]


def test_env_url_is_used(project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.db"
    with open_store(project, str(other)) as store:
        store.record_executions([Execution("tests/unit/test_small.py", "stage-a-cpu", "cpu", 4.0)
                                 for _ in range(2)])
    monkeypatch.setenv("TESTFLEET_DATABASE_URL", f"sqlite:///{other}")
    estimates, warnings = estimates_for(project, REGS)
    assert warnings == []
    assert estimates[("tests/unit/test_small.py", "stage-a-cpu")] == (4.0, "history")


def test_estimate_rows_filters_stages(project: Project) -> None:
    rows, warnings = estimate_rows(project, REGS, stages=["stage-c-h200"])
    assert [(r.file, r.stage) for r in rows] == [("tests/e2e/test_big.py", "stage-c-h200")]
    assert warnings  # no database yet
