"""``testfleet db init|upgrade|status`` on both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testfleet.store.schema import latest_version


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], project):  # type: ignore[no-untyped-def]
    from testfleet.cli.main import main

    def go(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main(["-C", str(project.root), *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return go


def test_sqlite_lifecycle(run, project) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("db", "status")
    assert code == 1 and "state:    missing" in out
    code, _, err = run("db", "upgrade")
    assert code == 2 and "does not exist" in err
    code, out, _ = run("db", "init")
    assert code == 0 and f"schema version {latest_version()}" in out
    assert (Path(project.root) / ".testfleet" / "history.db").is_file()
    code, out, _ = run("db", "init")
    assert code == 0 and "already initialised" in out
    code, out, _ = run("db", "upgrade")
    assert code == 0 and "up to date" in out
    code, out, _ = run("db", "status", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["state"] == "ready" and doc["schema_version"] == latest_version()


def test_pg_lifecycle_and_masked_password(run, pg_url: str) -> None:  # type: ignore[no-untyped-def]
    password = pg_url.split(":")[2].split("@")[0]
    code, out, _ = run("db", "status", "--database", pg_url)
    assert code == 1 and "uninitialised" in out and password not in out
    code, _, err = run("db", "upgrade", "--database", pg_url)
    assert code == 2 and "run 'testfleet db init' first" in err
    code, out, _ = run("db", "init", "--database", pg_url)
    assert code == 0 and "initialised" in out and password not in out
    code, out, _ = run("db", "status", "--database", pg_url)
    assert code == 0 and "state:    ready" in out


def test_pg_runtime_role_gets_a_clear_ddl_error(run, pg_url_rw: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run("db", "init", "--database", pg_url_rw)
    assert code == 2 and "permission denied" in err and "Traceback" not in err


def test_bad_url(run) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run("db", "init", "--database", "mysql://x/y")
    assert code == 2 and "unsupported database URL scheme" in err


def test_pg_grant_gives_a_runtime_role_rows_only(run, project, pg_database) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    from testfleet.store import PermissionDenied, open_store
    from testfleet.store.durations import Execution

    rw_user = pg_database.url_rw.split("://")[1].split(":")[0]
    # Undo the fixture's default privileges, as on a server nobody prepared.
    with psycopg.connect(pg_database.url, autocommit=True) as admin:
        admin.execute(f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{pg_database.schema}" '
                      f'REVOKE ALL ON TABLES FROM "{rw_user}"')
        admin.execute(f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{pg_database.schema}" '
                      f'REVOKE ALL ON SEQUENCES FROM "{rw_user}"')
    assert run("db", "init", "--database", pg_database.url)[0] == 0
    row = Execution("tests/a.py", "stage-a-cpu", "cpu", 3.0)
    with pytest.raises(PermissionDenied):
        open_store(project, pg_database.url_rw)
    code, out, err = run("db", "grant", rw_user, "--database", pg_database.url)
    assert code == 0, err
    assert f"to {rw_user}" in out
    with open_store(project, pg_database.url_rw) as store:
        store.record_executions([row])
        assert store.durations("stage-a-cpu", None, 5) == {"tests/a.py": [3.0]}
    code, _, err = run("db", "grant", rw_user)
    assert code == 2 and "for PostgreSQL" in err


def test_prune_command(run, project) -> None:  # type: ignore[no-untyped-def]
    from testfleet.store import open_store
    from testfleet.store.durations import Execution

    with open_store(project) as store:
        store.record_executions([Execution("tests/a.py", "stage-a-cpu", "cpu", float(i),
                                           timestamp=float(i)) for i in range(60)])
    code, out, _ = run("db", "prune")
    assert code == 0 and "deleted 10 execution(s)" in out
    code, out, _ = run("db", "prune", "--keep", "5", "--older-than", "1")
    assert code == 0 and "deleted 50 execution(s)" in out  # all are from 1970
    code, _, err = run("db", "prune", "--keep", "0")
    assert code == 2 and "--keep" in err
