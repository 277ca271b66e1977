"""The :class:`Store`: one open history database and the operations on it.

``open_store`` is what runtime code calls: it connects, checks the schema version
and, for the embedded SQLite default only, creates or migrates the schema on first
use. PostgreSQL schemas are changed only by ``testfleet db init`` / ``db upgrade``,
so a team's runners and gates can use a role that may only read and write rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from testfleet.store.engine import Target, create_engine_for, resolve_target, translate
from testfleet.store.errors import (
    SchemaNotInitialised,
    SchemaOutdated,
    SchemaTooNew,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.engine import Engine

    from testfleet.config import Project
    from testfleet.documents.db import StageExecutionsDoc
    from testfleet.failures.signature import Signature
    from testfleet.store.caserow import CaseRow
    from testfleet.store.durations import Execution, FileSamples
    from testfleet.store.schema import Migration


class Store:
    """An open history database. Use as a context manager, or call :meth:`close`."""

    def __init__(self, engine: Engine, target: Target) -> None:
        self.engine = engine
        self.target = target

    @property
    def dialect(self) -> str:
        return self.target.dialect

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.target.display!r})"

    # -- connections ---------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Driver errors become :class:`StoreError` subclasses that name the database."""
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError

        try:
            yield
        except StoreError:
            raise
        except DBAPIError as exc:
            raise translate(exc, self.target) from None
        except SQLAlchemyError as exc:
            raise StoreError(f"history database {self.target.display}: {exc}") from None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction."""
        with self._guard(), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (SQLite: ``BEGIN IMMEDIATE``, waits on the busy timeout)."""
        with self._guard(), self.engine.connect() as conn:
            conn.execution_options(tf_write=True)
            with conn.begin():
                yield conn

    # -- schema --------------------------------------------------------------

    def schema_version(self) -> int | None:
        """Applied schema version, ``None`` when the database has no testfleet schema."""
        from testfleet.store.schema import current_version

        with self.read() as conn:
            return current_version(conn)

    def pending_migrations(self) -> list[Migration]:
        from testfleet.store.schema import MIGRATIONS, latest_version

        version = self.schema_version() or 0
        if version > latest_version():
            raise self._too_new(version)
        return [m for m in MIGRATIONS if m.version > version]

    def migrate(self) -> list[Migration]:
        """Apply every missing step (DDL); returns the steps applied by this call."""
        from testfleet.store.schema import (
            MIGRATIONS,
            apply_step,
            current_version,
            latest_version,
            lock_for_migration,
        )

        applied: list[Migration] = []
        for step in MIGRATIONS:
            with self.write() as conn:
                lock_for_migration(conn)
                version = current_version(conn) or 0
                if version > latest_version():
                    raise self._too_new(version)
                if version >= step.version:
                    continue
                apply_step(conn, step)
                applied.append(step)
        if self.dialect == "sqlite" and any(step.frees_space for step in applied):
            # A CI cache would otherwise keep the freed pages until the next merge. Best
            # effort: a reader holding the file only leaves it larger.
            import sqlite3

            with suppress(sqlite3.Error):
                self.compact()
        return applied

    def compact(self) -> None:
        """SQLite: rebuild the file (``VACUUM``) and checkpoint it out of the write-ahead
        log, so it is one complete file without free pages. Raises ``sqlite3.Error``.
        The DB-API connection directly: VACUUM and checkpoints run outside any
        transaction, and the engine's connections always begin one."""
        raw = self.engine.raw_connection()
        try:
            cur = raw.cursor()
            try:
                cur.execute("VACUUM")
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                cur.close()
        finally:
            raw.close()

    def check_schema(self, *, auto_migrate: bool, allow_older: bool = False) -> int:
        """Make sure this code can use the database; returns the schema version."""
        from testfleet.store.schema import latest_version

        version = self.schema_version()
        latest = latest_version()
        if version is None:
            if auto_migrate:
                self.migrate()
                return latest
            raise SchemaNotInitialised(
                f"history database {self.target.display} has no testfleet schema; "
                "run 'testfleet db init' (with a role allowed to create tables)"
            )
        if version > latest:
            raise self._too_new(version)
        if version < latest and not allow_older:
            if auto_migrate:
                self.migrate()
                return latest
            raise SchemaOutdated(
                f"history database {self.target.display} is at schema version {version}, "
                f"this testfleet needs {latest}; run 'testfleet db upgrade'"
            )
        return version

    def _too_new(self, version: int) -> SchemaTooNew:
        from testfleet.store.schema import latest_version

        return SchemaTooNew(
            f"history database {self.target.display} has schema version {version}, newer than "
            f"the {latest_version()} this testfleet knows; upgrade testfleet to use it"
        )

    # -- durations -----------------------------------------------------------

    def record_executions(self, rows: Sequence[Execution],
                          signatures: Sequence[Signature] = ()) -> None:
        """Store executions, and the failure signatures they (or the testcases recorded
        after them) name, in one transaction; invalid rows reject the whole batch."""
        from testfleet.store.durations import insert_rows, validate
        from testfleet.store.signatures import signature_payload

        rows = list(rows)
        validate(rows)
        texts = signature_payload(signatures)
        if not rows:
            return
        with self.write() as conn:
            insert_rows(conn, rows, texts)

    def record_testcases(self, rows: Sequence[CaseRow]) -> None:
        """Store per-testcase results in one transaction; invalid rows reject the batch."""
        from testfleet.store.testcases import insert_cases

        rows = list(rows)
        if not rows:
            return
        with self.write() as conn:
            insert_cases(conn, rows)

    def durations(self, stage: str, files: Iterable[str] | None = None,
                  window: int = 10) -> dict[str, list[float]]:
        """Per file, the last ``window`` passing durations in ``stage``, newest first.
        Files without passing history are absent."""
        from testfleet.store.durations import passing_durations

        with self.read() as conn:
            return passing_durations(conn, stage, files, window)

    def duration_samples(self, stage: str, files: Iterable[str] | None = None, window: int = 10,
                         recent: int | None = None) -> dict[str, FileSamples]:
        """Per file, the last ``window`` passing durations in ``stage`` (newest first)
        and the longest ``TIMEOUT`` among its last ``recent`` (default ``window``)
        executions of any outcome; files with neither are absent."""
        from testfleet.store.durations import duration_samples

        with self.read() as conn:
            return duration_samples(conn, stage, files, window, window if recent is None else recent)

    def run_executions(self, ci_run_id: str, stage: str | None = None) -> int:
        """How many executions are recorded under a CI run id (import idempotency)."""
        from testfleet.store.durations import count_run

        with self.read() as conn:
            return count_run(conn, ci_run_id, stage)

    def runs_of_uids(self, uids: Sequence[str]) -> dict[str, str | None]:
        """Which of these execution identities are stored, and under which CI run id
        (an import's content identity: the same JUnit file imported again)."""
        from testfleet.store.durations import runs_of_uids

        with self.read() as conn:
            return runs_of_uids(conn, uids)

    def prune_executions(self, keep: int, older_than: float | None = None) -> int:
        """Bound history: see :func:`testfleet.store.durations.prune`."""
        from testfleet.store.durations import prune
        from testfleet.store.execution_rows import AlchemyDb
        from testfleet.store.signatures import prune_signatures
        from testfleet.store.testcases import prune_cases

        with self.write() as conn:
            deleted = prune(conn, keep, older_than)
            prune_cases(conn, keep, older_than)  # per test, by the same bounds
            prune_signatures(AlchemyDb(conn))
            return deleted

    def stage_summary(self) -> list[StageExecutionsDoc]:
        from testfleet.store.durations import stage_summary

        with self.read() as conn:
            return stage_summary(conn)


def connect(project: Project, url: str | None = None, *, busy_timeout: float = 10.0,
            create_file: bool = False, readonly: bool = False) -> Store:
    """A :class:`Store` without any schema check (for ``testfleet db``)."""
    target = resolve_target(project, url)
    if target.path is not None:
        if target.path.exists() and not target.path.is_file():
            # A FIFO, socket or device would make SQLite block or fail with "disk I/O error".
            from testfleet.fileio import file_kind

            raise StoreUnavailable(f"history database {target.display} is "
                                   f"{file_kind(target.path.stat().st_mode)}, not a database file")
        if not target.path.exists():
            if not create_file:
                raise StoreMissing(f"history database {target.display} does not exist"
                                   + (" (run 'testfleet db init')" if not target.default else ""))
            try:
                target.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(f"cannot create {target.path.parent}: {exc}") from None
    try:
        engine = create_engine_for(target, busy_timeout=busy_timeout, wal=not readonly)
    except ImportError as exc:
        raise StoreUnavailable(
            f"cannot use {target.display}: {exc}; install testfleet[postgres] for PostgreSQL"
        ) from None
    except Exception as exc:  # bad URL parts (port, query) surface here
        raise StoreError(f"cannot use database {target.display}: {exc}") from None
    return Store(engine, target)


def open_store(project: Project, url: str | None = None, *, readonly: bool = False,
               busy_timeout: float = 10.0) -> Store:
    """Open the history database for runtime use.

    ``url`` None means ``TESTFLEET_DATABASE_URL``, then the config's ``database``,
    then ``<root>/<cache_dir>/history.db``. A SQLite database is created and
    migrated on first use unless ``readonly``; PostgreSQL must have been prepared
    with ``testfleet db init`` / ``db upgrade``. ``readonly`` never creates or
    migrates anything and accepts an older schema (the planner only reads
    durations, which every schema version has).
    """
    target = resolve_target(project, url)
    auto = target.dialect == "sqlite" and not readonly
    store = connect(project, url, busy_timeout=busy_timeout, create_file=auto, readonly=readonly)
    try:
        store.check_schema(auto_migrate=auto, allow_older=readonly)
    except BaseException:
        store.close()
        raise
    return store
