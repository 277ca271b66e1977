"""Where the database is, and what happens when it is missing, locked, corrupt, too
old, too new, or the role may not change the schema."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table

from testfleet.config import Project
from testfleet.store import (
    PermissionDenied,
    SchemaNotInitialised,
    SchemaOutdated,
    StoreCorrupt,
    StoreError,
    StoreLocked,
    StoreMissing,
    StoreUnavailable,
    connect,
    mask_password,
    open_store,
    resolve_target,
)
from testfleet.store import schema as schema_mod
from testfleet.store.durations import Execution

ROW = Execution("tests/a.py", "stage-a-cpu", "cpu", 1.0)


# -- where ------------------------------------------------------------------------------


def test_url_precedence(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    default = resolve_target(project)
    assert default.default and default.dialect == "sqlite"
    assert default.path == project.root / ".testfleet" / "history.db"
    monkeypatch.setenv("TESTFLEET_DATABASE_URL", "postgresql://u:pw@db.example/h")
    env = resolve_target(project)
    assert (env.dialect, env.origin) == ("postgresql", "TESTFLEET_DATABASE_URL")
    assert env.url == "postgresql+psycopg://u:pw@db.example/h"
    assert env.display == "postgresql://u:***@db.example/h"
    flag = resolve_target(project, "other.db")
    assert (flag.origin, flag.path) == ("--database", project.root / "other.db")


def test_config_database_key(project: Project) -> None:
    from dataclasses import replace

    cfg = project.config.model_copy(update={"database": "postgres://x@h:5433/d?sslmode=require"})
    target = resolve_target(replace(project, config=cfg))
    assert target.origin == "config 'database'"
    assert target.url == "postgresql+psycopg://x@h:5433/d?sslmode=require"


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:///rel/h.db", "rel/h.db"),
    ("sqlite:////abs/h.db", "/abs/h.db"),
    ("sub/h.db", "sub/h.db"),
])
def test_sqlite_spellings(project: Project, url: str, path: str) -> None:
    target = resolve_target(project, url)
    want = Path(path) if path.startswith("/") else project.root / path
    assert target.path == want and target.dialect == "sqlite"


@pytest.mark.parametrize(("url", "message"), [
    ("mysql://u:secret@h/db", "unsupported database URL scheme 'mysql'"),
    ("sqlite://", "in-memory"),
    ("sqlite:///:memory:", "in-memory"),
    # would have created a SQLite file named "   " or "h.db\n" in the project
    ("   ", "'   ' is not a database URL or file path"),
    ("h.db\n", "is not a database URL or file path"),
])
def test_unusable_urls(project: Project, url: str, message: str) -> None:
    with pytest.raises(StoreError, match=message) as info:
        resolve_target(project, url)
    assert "secret" not in str(info.value)


def test_mask_password() -> None:
    assert mask_password("postgresql://u:p%40ss@h:5/d") == "postgresql://u:***@h:5/d"
    assert mask_password("postgresql://u@h/d") == "postgresql://u@h/d"
    assert mask_password("sqlite:///x.db") == "sqlite:///x.db"


# -- SQLite faults ------------------------------------------------------------------------


def test_first_use_creates_the_default_in_wal_mode(project: Project) -> None:
    with open_store(project) as store:
        store.record_executions([ROW])
    path = project.root / ".testfleet" / "history.db"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_readonly_never_creates(project: Project) -> None:
    with pytest.raises(StoreMissing, match="does not exist"):
        open_store(project, readonly=True)
    assert not (project.root / ".testfleet").exists()


def test_corrupt_file(project: Project) -> None:
    path = project.root / "bad.db"
    path.write_bytes(b"\x00garbage" * 512)
    with pytest.raises(StoreCorrupt, match=r"bad\.db is not a valid SQLite database"):
        open_store(project, "bad.db")


def test_directory_instead_of_file(project: Project) -> None:
    (project.root / "dir.db").mkdir()
    with pytest.raises(StoreUnavailable, match="is a directory"):
        open_store(project, "dir.db")


def test_unwritable_location(project: Project, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailable, match="cannot create"):
        open_store(project, str(blocker / "sub" / "h.db"))


def test_locked_for_writing_is_a_clear_error(project: Project) -> None:
    open_store(project).close()
    holder = sqlite3.connect(project.root / ".testfleet" / "history.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with open_store(project, busy_timeout=0.2) as store:
            assert store.durations("stage-a-cpu", None, 5) == {}  # WAL: reads still work
            with pytest.raises(StoreLocked, match="locked by another process"):
                store.record_executions([ROW])
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_concurrent_writers_all_succeed(project: Project) -> None:
    open_store(project).close()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with open_store(project) as store:
                for i in range(15):
                    store.record_executions([Execution(f"tests/w{n}.py", "stage-a-cpu", "cpu",
                                                       float(i), timestamp=float(i))])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with open_store(project) as store:
        got = store.durations("stage-a-cpu", None, 100)
    assert {f: len(v) for f, v in got.items()} == {f"tests/w{n}.py": 15 for n in range(4)}


def test_uninitialised_sqlite_file_is_initialised_on_first_use(project: Project) -> None:
    path = project.root / "empty.db"
    sqlite3.connect(path).close()
    with pytest.raises(SchemaNotInitialised, match="db init"):
        open_store(project, "empty.db", readonly=True)
    with open_store(project, "empty.db") as store:
        assert store.schema_version() == schema_mod.latest_version()


# -- migrations -----------------------------------------------------------------------------

_extra_meta = MetaData()
_extra = Table("tf_test_extra", _extra_meta, Column("id", Integer, primary_key=True))


def _add_step(monkeypatch: pytest.MonkeyPatch) -> int:
    version = schema_mod.latest_version() + 1
    step = schema_mod.Migration(version, "test-only extra table", lambda conn: _extra.create(conn))
    monkeypatch.setattr(schema_mod, "MIGRATIONS", [*schema_mod.MIGRATIONS, step])
    return version


def test_sqlite_migrates_itself_to_a_new_step(project: Project,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    open_store(project).close()
    version = _add_step(monkeypatch)
    with open_store(project, readonly=True) as store:  # reading accepts an older schema
        assert store.schema_version() == version - 1
    with open_store(project) as store:
        assert store.schema_version() == version


def test_misnumbered_steps_are_a_bug_caught_early(monkeypatch: pytest.MonkeyPatch) -> None:
    gap = schema_mod.MIGRATIONS[-1].version + 2  # one number skipped, whatever the last is
    bad = schema_mod.Migration(gap, "gap", lambda conn: None)
    monkeypatch.setattr(schema_mod, "MIGRATIONS", [*schema_mod.MIGRATIONS, bad])
    with pytest.raises(RuntimeError, match=r"numbered 1\.\.N"):
        schema_mod.latest_version()


# -- PostgreSQL: roles and migrations -------------------------------------------------------


def test_pg_runtime_role_cannot_init_and_is_told_so(project: Project, pg_url_rw: str) -> None:
    with pytest.raises(SchemaNotInitialised, match="testfleet db init"):
        open_store(project, pg_url_rw)
    with connect(project, pg_url_rw) as store, pytest.raises(PermissionDenied,
                                                             match="permission denied"):
        store.migrate()


def test_pg_outdated_schema_needs_upgrade(project: Project, pg_url: str, pg_url_rw: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with connect(project, pg_url) as owner:
        owner.migrate()
    version = _add_step(monkeypatch)
    with pytest.raises(SchemaOutdated, match="db upgrade"):
        open_store(project, pg_url_rw)
    with open_store(project, pg_url_rw, readonly=True) as store:
        assert store.schema_version() == version - 1
    with connect(project, pg_url) as owner:
        assert [m.version for m in owner.migrate()] == [version]
    with open_store(project, pg_url_rw) as store:
        store.record_executions([ROW])
        assert store.durations("stage-a-cpu", None, 1) == {"tests/a.py": [1.0]}


def test_pg_unreachable(project: Project) -> None:
    with pytest.raises(StoreUnavailable, match="cannot connect") as info:
        open_store(project, "postgresql://u:topsecret@127.0.0.1:1/nope")
    assert "topsecret" not in str(info.value)


def test_pg_concurrent_migrations_apply_each_step_once(project: Project, pg_url: str) -> None:
    results: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with connect(project, pg_url) as store:
                results.append(len(store.migrate()))
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # Each step is its own locked transaction, so concurrent callers may share the steps
    # (one applies 1-2, another 3-5); what must hold is that every step ran exactly once.
    assert sum(results) == schema_mod.latest_version()
    with connect(project, pg_url) as store:
        assert store.schema_version() == schema_mod.latest_version()
