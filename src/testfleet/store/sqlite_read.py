"""The plan's read of an SQLite history with the standard library's ``sqlite3``.

``testfleet plan`` on a small project is start-up bound: importing SQLAlchemy (and
building its engine) costs several times what reading ten thousand executions does.
So on SQLite the planner's only query, the duration samples per (stage, file), runs
through ``sqlite3`` with the very SQL the SQLAlchemy path uses
(:data:`testfleet.store.durations.SAMPLES_PER_FILE`), in one read transaction.

It reads only a database whose schema version it knows (:data:`READS_SCHEMA`, kept equal
to the latest migration by a test); anything else (no schema table, an older or a newer
version) returns None and the caller takes the general path, which says what is wrong
exactly as before. PostgreSQL always takes the general path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import quote

from testfleet.store.durations import SAMPLES_PER_FILE, FileSamples

#: The schema version this reader was written against: ``schema.latest_version()``
#: (tests/store/test_sqlite_read.py fails when a migration is added without it).
READS_SCHEMA = 10

Samples = dict[str, dict[str, FileSamples]]  # stage -> file -> samples


def read_samples(path: Path, stages: Sequence[str], files: Iterable[str] | None, *,
                 window: int, recent: int | None = None,
                 busy_timeout: float = 5.0) -> Samples | None:
    """Per stage and file, what :meth:`Store.duration_samples` returns, or None when the
    database's schema is not :data:`READS_SCHEMA`. Raises :class:`sqlite3.Error` for a
    locked, corrupt or unreadable file (the caller turns it into a warning)."""
    recent = window if recent is None else recent
    # mode=rw: never create a file (a missing database is the caller's business).
    uri = f"file:{quote(str(path))}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("BEGIN")  # one snapshot for every stage
        try:
            if schema_version(conn) != READS_SCHEMA:
                return None
            out: Samples = {}
            wanted = sorted(set(files)) if files is not None else None
            for stage in sorted(set(stages)):
                out[stage] = _stage(conn, stage, wanted, window, recent)
            return out
        finally:
            conn.execute("COMMIT")
    finally:
        conn.close()


def schema_version(conn: sqlite3.Connection) -> int | None:
    """The applied schema version, None without a testfleet schema."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                    "AND name = 'schema_version'").fetchone() is None:
        return None
    row = conn.execute("SELECT version FROM schema_version ORDER BY version DESC LIMIT 1").fetchone()
    return int(row[0]) if row is not None else 0


def _stage(conn: sqlite3.Connection, stage: str, wanted: list[str] | None, window: int,
           recent: int) -> dict[str, FileSamples]:
    if wanted is None:
        wanted = sorted(row[0] for row in conn.execute(
            "SELECT DISTINCT file FROM executions WHERE stage = ?", (stage,)))
    passing: dict[str, list[float]] = {}
    timeouts: dict[str, float] = {}
    for file in wanted:
        params = {"stage": stage, "file": file, "k": window, "r": recent}
        for kind, duration in conn.execute(SAMPLES_PER_FILE, params):
            if duration is None:
                continue
            if kind == 0:
                passing.setdefault(file, []).append(float(duration))
            else:
                timeouts[file] = float(duration)
    return {file: FileSamples(passing.get(file, []), timeouts.get(file))
            for file in sorted(passing.keys() | timeouts.keys())}
