"""The runner's history writes through the standard-library SQLite writer (#15): every
write of a run lands, whichever worker thread makes it."""

from __future__ import annotations

from pathlib import Path

from testfleet.store import open_store


def test_runner_history_writes_go_through_the_writer_across_threads(make_spec,
                                                                    tmp_path: Path) -> None:
    """Every write of a run lands (each runs in its own worker thread), none is lost."""
    from testfleet.config import load_project
    from testfleet.runner.hooks import RunHooks
    from testfleet.runner.loop import execute
    from testfleet.runner.reporting import NullReporter

    spec = make_spec({"test_a.py": "print(1)\n", "test_b.py": "print(2)\n",
                      "test_c.py": "print(3)\n"})
    (spec.root / "testfleet.toml").write_text(
        'roots = ["."]\n[stages.stage-x]\nbackend = "cpu"\ncommand = "python"\n')
    proj = load_project(spec.root)
    db = tmp_path / "h.db"
    with open_store(proj, str(db)):
        pass
    warnings: list[str] = []
    hooks = RunHooks(proj, warn=warnings.append, database=str(db))
    job = execute(spec, reporter=NullReporter(), hooks=hooks)
    assert type(hooks._store).__name__ == "SqliteWriter"
    hooks.close()
    assert job.exit_code == 0 and warnings == []
    import sqlite3

    got = sqlite3.connect(db).execute("SELECT file, outcome FROM executions ORDER BY id").fetchall()
    assert got == [("test_a.py", "PASSED"), ("test_b.py", "PASSED"), ("test_c.py", "PASSED")]
