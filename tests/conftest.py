"""Shared fixtures. Area-specific fixtures live in each area's own conftest."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    from testfleet.config import Project

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "fleet"


@pytest.fixture
def files_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the files read by the per-file work of ``check`` and ``plan`` (the syntax
    check's ``Path.read_bytes``, the file-facts cache's ``read_capped``), in order."""
    from testfleet.registry import collectable

    read: list[str] = []
    real_bytes, real_capped = Path.read_bytes, collectable.read_capped

    def read_bytes(self: Path) -> bytes:
        read.append(self.name)
        return real_bytes(self)

    def read_capped(path: Path, limit: int) -> bytes:
        read.append(path.name)
        return real_capped(path, limit)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(collectable, "read_capped", read_capped)
    return read


@pytest.fixture
def example_project(tmp_path: Path) -> Path:
    """A private copy of examples/fleet, so tests may write caches and history into it."""
    dest = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    return dest


@pytest.fixture
def config_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Project]:
    """``make(config_text)``: a project in tmp_path with that ``testfleet.toml`` and an empty
    ``tests/``, loaded and validated; an ambient ``TESTFLEET_DATABASE_URL`` is ignored."""
    from testfleet.config import load_project

    def make(config: str) -> Project:
        monkeypatch.delenv("TESTFLEET_DATABASE_URL", raising=False)
        (tmp_path / "tests").mkdir()
        (tmp_path / "testfleet.toml").write_text(config, encoding="utf-8")
        return load_project(tmp_path)

    return make


# -- PostgreSQL (history store) ------------------------------------------------------
# `.ci/postgres.sh` starts a server and prints TESTFLEET_TEST_PG_URL (a role that may
# create tables) and TESTFLEET_TEST_PG_URL_RW (a role that may only read/write rows).
# Each test gets a fresh schema, selected through the URLs' search_path, dropped after.


@dataclass(frozen=True)
class PgDatabase:
    url: str  # owner role: DDL allowed (db init / upgrade)
    url_rw: str  # restricted role: rows only
    schema: str


def _require_pg_env() -> tuple[str, str]:
    url = os.environ.get("TESTFLEET_TEST_PG_URL", "")
    url_rw = os.environ.get("TESTFLEET_TEST_PG_URL_RW", "")
    if url and url_rw:
        return url, url_rw
    message = ("PostgreSQL tests need TESTFLEET_TEST_PG_URL and TESTFLEET_TEST_PG_URL_RW "
               "(run: eval \"$(bash .ci/postgres.sh)\")")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def _with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture
def pg_database() -> Iterator[PgDatabase]:
    """A fresh, empty PostgreSQL schema usable by both roles (rows only for the RW role)."""
    import psycopg

    url, url_rw = _require_pg_env()
    rw_user = urlsplit(url_rw).username
    schema = f"tf_{uuid.uuid4().hex[:16]}"
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        pytest.fail(f"cannot connect to TESTFLEET_TEST_PG_URL: {exc}")
    with admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{rw_user}"')
        admin.execute(f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" '
                      f'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "{rw_user}"')
        admin.execute(f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" '
                      f'GRANT USAGE, SELECT ON SEQUENCES TO "{rw_user}"')
        try:
            yield PgDatabase(_with_search_path(url, schema), _with_search_path(url_rw, schema), schema)
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_url(pg_database: PgDatabase) -> str:
    """URL of a fresh PostgreSQL schema for a role with DDL rights."""
    return pg_database.url


@pytest.fixture
def pg_url_rw(pg_database: PgDatabase) -> str:
    """URL of the same schema as ``pg_url`` for a role that may only read/write rows."""
    return pg_database.url_rw
