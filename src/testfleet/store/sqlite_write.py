"""The runner's history writes to an existing SQLite history with the standard library.

Each ``testfleet run`` records its executions (and testcases); on SQLite, importing
SQLAlchemy for that costs a CI job more than the writes do. This writer inserts the
very column payloads the store builds (:func:`~testfleet.store.durations.execution_payload`,
:func:`~testfleet.store.caserow.case_payload`) with the same connection settings as
the store's engine (busy timeout, WAL, ``BEGIN IMMEDIATE`` per write). It takes only a
database that exists at the schema version it knows
(:data:`~testfleet.store.sqlite_read.READS_SCHEMA`); creating or migrating one, and
PostgreSQL, stay with the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote

from testfleet.store.caserow import CaseRow, case_payload
from testfleet.store.durations import Execution, execution_payload, validate
from testfleet.store.engine import Target, translate
from testfleet.store.execution_rows import StdlibDb, insert_payload
from testfleet.store.signatures import insert_signatures, signature_payload
from testfleet.store.sqlite_read import READS_SCHEMA, schema_version

if TYPE_CHECKING:
    from testfleet.failures.signature import Signature


class SqliteWriter:
    """``record_executions`` / ``record_testcases`` / ``close``, as on the store."""

    def __init__(self, conn: sqlite3.Connection, target: Target) -> None:
        self.conn = conn
        self.target = target

    def record_executions(self, rows: Sequence[Execution],
                          signatures: Sequence[Signature] = ()) -> None:
        rows = list(rows)
        validate(rows)
        payload = execution_payload(rows)
        texts = signature_payload(signatures)
        if not payload:
            return

        def body() -> None:
            db = StdlibDb(self.conn)
            if texts:
                insert_signatures(db, texts)
            insert_payload(db, payload)

        self._write(body)

    def record_testcases(self, rows: Sequence[CaseRow]) -> None:
        payload = case_payload(list(rows))
        if not payload:
            return
        columns = list(payload[0])
        sql = (f"INSERT INTO testcases ({', '.join(columns)}) "
               f"VALUES ({', '.join(':' + c for c in columns)})")
        self._write(lambda: self.conn.executemany(sql, payload))

    def _write(self, body: Callable[[], object]) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")  # queue on the busy timeout, as the store does
            try:
                body()
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.target) from None

    def close(self) -> None:
        self.conn.close()


def open_writer(target: Target, *, busy_timeout: float = 10.0) -> SqliteWriter | None:
    """A writer on ``target`` (an SQLite file that exists), or None when its schema is not
    the one this writer knows (the caller opens the store, which migrates or refuses).
    Raises a :class:`~testfleet.store.errors.StoreError` for a file it cannot use."""
    assert target.path is not None
    try:
        # Each history write runs in a worker thread of its own (runner.hooks bounds it),
        # one at a time: the connection moves between threads, never shared at once.
        conn = sqlite3.connect(f"file:{quote(str(target.path))}?mode=rw", uri=True,
                               timeout=busy_timeout, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as exc:
        raise translate(exc, target) from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        mode = conn.execute("PRAGMA journal_mode").fetchone()
        if mode is not None and str(mode[0]).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")  # readers never wait on this writer
        conn.execute("PRAGMA synchronous = NORMAL")
        if schema_version(conn) != READS_SCHEMA:
            conn.close()
            return None
    except sqlite3.Error as exc:
        conn.close()
        raise translate(exc, target) from None
    return SqliteWriter(conn, target)
