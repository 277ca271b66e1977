"""The plan's SQLite history read through the standard library (#15): the same samples as
the SQLAlchemy store, no SQLAlchemy import on the plan path, the general path for any
schema version it was not written for."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from testfleet.app.estimates import estimates_for
from testfleet.config import Project
from testfleet.registry.model import Registration
from testfleet.store import open_store
from testfleet.store.durations import OUTCOMES, Execution
from testfleet.store.schema import latest_version, schema_version
from testfleet.store.sqlite_read import READS_SCHEMA, read_samples

FILES = [f"tests/unit/test_{i}.py" for i in range(6)]
STAGES = ["stage-a-cpu", "stage-c-h200"]


def _seed(project: Project, seed: int) -> None:
    rng = random.Random(seed)
    rows = [Execution(rng.choice(FILES), rng.choice(STAGES), "cpu", round(rng.uniform(0.1, 900), 3),
                      rng.choice(OUTCOMES), timestamp=float(rng.randint(0, 40)))  # ties on purpose
            for _ in range(400)]
    with open_store(project) as store:
        for i in range(0, len(rows), 50):  # several recordings: recorded_at differs between them
            store.record_executions(rows[i:i + 50])


def test_reader_knows_the_latest_schema() -> None:
    assert latest_version() == READS_SCHEMA, (
        "a migration was added: check store/sqlite_read.py still reads the executions table "
        "as the store does, then set READS_SCHEMA to the new version")


@pytest.mark.parametrize(("seed", "window", "recent"), [(1, 3, 3), (2, 10, 4), (3, 1, 20)])
def test_same_samples_as_the_store(project: Project, seed: int, window: int, recent: int) -> None:
    _seed(project, seed)
    path = project.root / ".testfleet" / "history.db"
    for files in (None, [*FILES[:4], "tests/never.py"]):
        got = read_samples(path, STAGES, files, window=window, recent=recent)
        assert got is not None
        with open_store(project, readonly=True) as store:
            want = {stage: store.duration_samples(stage, files, window, recent) for stage in STAGES}
        assert got == want
        assert any(s.timeout is not None for per in got.values() for s in per.values())


def test_other_schema_versions_take_the_general_path(project: Project) -> None:
    _seed(project, 4)
    path = project.root / ".testfleet" / "history.db"
    with open_store(project) as store, store.write() as conn:
        conn.execute(schema_version.insert().values(version=READS_SCHEMA + 1,
                                                    description="future", applied_at=0.0))
    assert read_samples(path, STAGES, None, window=3) is None
    regs = [Registration(FILES[0], "cpu", "stage-a-cpu", 5.0)]
    estimates, warnings = estimates_for(project, regs)
    assert estimates[(FILES[0], "stage-a-cpu")] == (5.0, "est_time")
    assert "newer" in warnings[0]  # what the store says about it, as before


def test_plan_reads_sqlite_history_without_importing_sqlalchemy(project: Project) -> None:
    with open_store(project) as store:
        store.record_executions([Execution("tests/unit/test_a.py", "stage-a-cpu", "cpu", d,
                                           timestamp=float(i)) for i, d in enumerate([7.0, 9.0])])
    (project.root / "tests" / "unit").mkdir(parents=True, exist_ok=True)
    (project.root / "tests" / "unit" / "test_a.py").write_text(
        "from testfleet import register_cpu_ci\n"
        "register_cpu_ci(est_time=60, suite='stage-a-cpu')\n"
        "def test_a():\n    pass\n")
    code = (
        "import json, sys\n"
        "from testfleet.cli.main import main\n"
        "try:\n"
        f"    main(['-C', {str(project.root)!r}, 'plan', '--format', 'json',"
        f" '--output', {str(project.root / 'plan.json')!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "assert 'sqlalchemy' not in sys.modules\n"
        "assert 'testfleet.planning.plan_file' not in sys.modules  # models to read a plan\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    import json

    plan = json.loads((project.root / "plan.json").read_text())
    [test] = [t for job in plan["jobs"] for t in job["tests"]]
    assert (test["estimate"], test["source"]) == (8.0, "history")


def test_missing_file_is_never_created(tmp_path: Path) -> None:
    import sqlite3

    with pytest.raises(sqlite3.OperationalError):
        read_samples(tmp_path / "none.db", STAGES, None, window=3)
    assert not (tmp_path / "none.db").exists()


def test_runner_writes_an_existing_sqlite_history_without_sqlalchemy(
        project: Project, tmp_path: Path) -> None:
    """Same rows as the store writes (bar identity and recording time), no SQLAlchemy."""
    from testfleet.store.caserow import CaseRow

    db = project.root / ".testfleet" / "history.db"
    with open_store(project):
        pass  # created and migrated by the store
    rows = [Execution("tests/a.py", "stage-a-cpu", "cpu", 1.5, "FLAKY", 2, "c" * 40, "77", 10.0,
                      "PASS", "shadow", "why", False)]
    cases = [CaseRow("tests/a.py", "stage-a-cpu", "cpu", "test_x[1]", "PASSED", 0.25, 2,
                     "c" * 40, "77", 10.0, True)]
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from testfleet.config import load_project\n"
        "from testfleet.runner.hooks import RunHooks\n"
        "from testfleet.store.caserow import CaseRow\n"
        "from testfleet.store.durations import Execution\n"
        f"hooks = RunHooks(load_project(Path({str(project.root)!r})), warn=print)\n"
        "store = hooks._open_store()\n"
        f"store.record_executions([{rows[0]!r}])\n"
        f"store.record_testcases([{cases[0]!r}])\n"
        "hooks.close()\n"
        "assert type(store).__name__ == 'SqliteWriter', type(store)\n"
        "assert 'sqlalchemy' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open_store(project) as store:
        store.record_executions(rows)
        store.record_testcases(cases)
    import sqlite3

    conn = sqlite3.connect(db)
    for table in ("executions", "testcases"):
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")
                   if r[1] not in ("id", "uid", "recorded_at")]
        got = conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY id").fetchall()
        assert len(got) == 2 and got[0] == got[1], (table, got)
    uids = [r[0] for r in conn.execute("SELECT uid FROM executions")]
    assert len(set(uids)) == 2 and all(len(u) == 32 for u in uids)


def test_runner_leaves_other_schema_versions_to_the_store(project: Project) -> None:
    from testfleet.runner.hooks import RunHooks
    from testfleet.store.engine import resolve_target
    from testfleet.store.sqlite_write import open_writer

    with open_store(project) as store, store.write() as conn:
        conn.execute(schema_version.insert().values(version=READS_SCHEMA + 1,
                                                    description="future", applied_at=0.0))
    assert open_writer(resolve_target(project)) is None
    warnings: list[str] = []
    hooks = RunHooks(project, warn=warnings.append)
    try:
        assert hooks._open_store() is None  # the store refuses it, as before
    finally:
        hooks.close()
    assert len(warnings) == 1 and "newer" in warnings[0]

