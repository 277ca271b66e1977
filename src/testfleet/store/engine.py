"""Which database, and an engine configured for it.

URL precedence: an explicit ``--database URL``, then ``TESTFLEET_DATABASE_URL``,
then ``[tool.testfleet] database``, then the embedded default
``<root>/<cache_dir>/history.db``. ``postgresql://`` and ``postgres://`` URLs use
psycopg 3; a value without a scheme is a SQLite file path relative to the project
root. SQLite runs in WAL mode with a busy timeout, so a plan can read history while
a runner on the same machine writes it.

SQLAlchemy is imported inside functions only: ``testfleet plan`` must not pay for it
unless it actually reads history.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from testfleet.store.errors import (
    PermissionDenied,
    StoreCorrupt,
    StoreError,
    StoreLocked,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from testfleet.config import Project
    from testfleet.documents.db import Origin

ENV_URL: Final = "TESTFLEET_DATABASE_URL"
DEFAULT_FILE = "history.db"


@dataclass(frozen=True)
class Target:
    """A resolved database location.

    ``url`` is the SQLAlchemy URL; ``display`` hides any password; ``origin`` says
    where the choice came from (for messages); ``path`` is set for SQLite files.
    """

    url: str
    display: str
    origin: Origin
    dialect: Literal["sqlite", "postgresql"]
    path: Path | None = None
    default: bool = False


def resolve_target(project: Project, url: str | None = None) -> Target:
    """Pick the database per the precedence above; raise on a URL we cannot use."""
    if url:
        return _parse(project, url, "--database")
    env = os.environ.get(ENV_URL, "").strip()
    if env:
        return _parse(project, env, ENV_URL)
    if project.config.database:
        return _parse(project, project.config.database, "config 'database'")
    from testfleet.cachedir import cache_dir_problem

    problem = cache_dir_problem(project.root, project.config.cache_dir)
    if problem is not None:  # history written through a link lands wherever it points
        raise StoreError(f"the default history database: {problem}")
    path = project.root / project.config.cache_dir / DEFAULT_FILE
    return Target(url=f"sqlite:///{path}", display=_rel(project, path), origin="default",
                  dialect="sqlite", path=path, default=True)


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _parse(project: Project, value: str, origin: Origin) -> Target:
    if not value.strip() or not value.isprintable():
        # "   " or a stray newline would otherwise become a SQLite file of that name.
        raise StoreError(f"{origin}: {value!r} is not a database URL or file path")
    match = _SCHEME.match(value)
    if not match:
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = project.root / path
        return Target(url=f"sqlite:///{path}", display=_rel(project, path), origin=origin,
                      dialect="sqlite", path=path)
    scheme = match.group(1).lower()
    rest = value[match.end():]
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        url = "postgresql+psycopg://" + rest
        return Target(url=url, display=mask_password(value), origin=origin, dialect="postgresql")
    if scheme in ("sqlite", "sqlite+pysqlite"):
        # sqlite:///relative.db and sqlite:////absolute.db, as SQLAlchemy spells them.
        raw = rest[1:] if rest.startswith("/") else rest
        raw = raw.split("?", 1)[0]
        if not raw or raw == ":memory:":
            raise StoreError(f"{origin}: an in-memory SQLite database cannot hold history; "
                             "give a file path (sqlite:///path/history.db)")
        path = Path(raw)
        if not path.is_absolute():
            path = project.root / path
        return Target(url=f"sqlite:///{path}", display=_rel(project, path), origin=origin,
                      dialect="sqlite", path=path)
    raise StoreError(
        f"{origin}: unsupported database URL scheme {scheme!r} in {mask_password(value)!r}; "
        "use postgresql://user:password@host/dbname or a SQLite path (sqlite:///path/history.db)"
    )


def mask_password(url: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db`` (for messages and logs)."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*):[^@/]*@", r"\1:***@", url)


def _rel(project: Project, path: Path) -> str:
    try:
        return path.resolve().relative_to(project.root.resolve()).as_posix()
    except ValueError:
        return str(path)


def create_engine_for(target: Target, *, busy_timeout: float = 10.0, wal: bool = True) -> Engine:
    """An engine with the connection settings each dialect needs (``wal=False`` for
    read-only use: switching the journal mode writes to the file)."""
    from sqlalchemy import create_engine, event

    if target.dialect == "sqlite":
        engine = create_engine(
            target.url,
            connect_args={"timeout": busy_timeout, "isolation_level": None},
        )
        timeout_ms = int(busy_timeout * 1000)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            import sqlite3

            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
                cursor.execute("PRAGMA foreign_keys = ON")
                # WAL: readers (a plan) never block on a writer (a runner). The mode is
                # stored in the file; only switch when needed, and leave a read-only
                # file in whatever mode it has.
                mode = cursor.execute("PRAGMA journal_mode").fetchone()
                if wal and mode is not None and str(mode[0]).lower() != "wal":
                    try:
                        cursor.execute("PRAGMA journal_mode = WAL")
                    except sqlite3.OperationalError as exc:
                        if "readonly" not in str(exc).lower():
                            raise
                cursor.execute("PRAGMA synchronous = NORMAL")
            finally:
                cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            # pysqlite's own transaction handling skips BEGIN before DDL and SELECT;
            # take control so every transaction (and migration) is atomic. Writers ask
            # for IMMEDIATE so they queue on the busy timeout instead of failing later.
            mode = "BEGIN IMMEDIATE" if conn.get_execution_options().get("tf_write") else "BEGIN"
            conn.exec_driver_sql(mode)

        return engine
    return create_engine(
        target.url,
        connect_args=pg_connect_args(target.url, busy_timeout),
        # a connection the server or a proxy dropped is replaced at checkout (once)
        pool_pre_ping=True,
    )


#: Server-side limits for every PostgreSQL session (milliseconds).
PG_STATEMENT_TIMEOUT_MS = 60_000
PG_LOCK_TIMEOUT_MS = 15_000
PG_IDLE_IN_TRANSACTION_MS = 120_000
#: Unacknowledged data older than this kills the connection (network gone).
PG_TCP_USER_TIMEOUT_MS = 30_000


def pg_connect_args(url: str, busy_timeout: float = 10.0) -> dict[str, Any]:
    """libpq settings so that a server that stops answering cannot hold a run forever:
    statement and lock timeouts (the server gives up), TCP keepalives and
    ``tcp_user_timeout`` (the client notices a dead peer). A server that keeps the
    connection but never answers is bounded by the runner's history timeout
    (runner/hooks.py). The URL's own ``options`` (e.g. a search_path) are kept."""
    from sqlalchemy.engine import make_url

    own = make_url(url).query.get("options")
    existing = own if isinstance(own, str) else " ".join(own or ())
    limits = (f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS} "
              f"-c lock_timeout={PG_LOCK_TIMEOUT_MS} "
              f"-c idle_in_transaction_session_timeout={PG_IDLE_IN_TRANSACTION_MS}")
    return {
        "connect_timeout": max(1, int(busy_timeout)),
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": PG_TCP_USER_TIMEOUT_MS,
        "options": f"{existing} {limits}".strip(),
    }


def translate(exc: BaseException, target: Target) -> StoreError:
    """Turn a driver error into a message that names the database and what to do."""
    text = " ".join(str(getattr(exc, "orig", exc) or exc).split())
    low = text.lower()
    where = f"history database {target.display}"
    if ("database is locked" in low or "database table is locked" in low or "busy" in low
            or "lock timeout" in low):  # PostgreSQL's lock_timeout (another merge's lock)
        return StoreLocked(f"{where} is locked by another process (waited for the busy timeout): {text}")
    if "file is not a database" in low or "malformed" in low or "not a database" in low:
        return StoreCorrupt(f"{where} is not a valid SQLite database ({text}); "
                            "move it aside and run 'testfleet db init'")
    if "permission denied" in low or "insufficient privilege" in low or "must be owner" in low:
        return PermissionDenied(f"{where}: permission denied: {text}")
    if "unable to open database file" in low or "readonly" in low or "read-only" in low:
        return StoreUnavailable(f"cannot open {where}: {text}")
    if target.dialect == "postgresql" and (
        "connection" in low or "could not" in low or "authentication" in low
        or "does not exist" in low or "timeout" in low
    ):
        return StoreUnavailable(f"cannot connect to {where}: {text}")
    return StoreError(f"{where}: {text}")
