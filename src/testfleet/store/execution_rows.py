"""Writing executions since schema step 7: each row keyed to its (stage, file) in
``tested_files`` and its (commit, CI run, backend) in ``sources``, its uid as 16 bytes.

One implementation for the three writers (the store through SQLAlchemy, the runner's
standard-library SQLite writer, history merge) and step 7's copy of the old table: each
hands over the column payloads readers see in the ``executions`` view
(:func:`testfleet.store.durations.execution_payload`, a bundle's records), through a
two-method adapter over its connection, so the SQL is the same text everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import sqlite3

    from sqlalchemy import Connection

Row = dict[str, Any]

#: Columns of ``execution_rows`` taken from a payload as they are.
_PLAIN = ("duration", "outcome", "attempt", "ts", "recorded_at", "gate_status", "gate_mode",
          "reason", "final")
_CHUNK = 500


class Db(Protocol):
    """What the writer needs of a connection: named-parameter SQL, rows back."""

    dialect: str

    def rows(self, sql: str, params: Row) -> list[tuple[Any, ...]]: ...

    def many(self, sql: str, params: list[Row]) -> None: ...


class AlchemyDb:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect.name

    def rows(self, sql: str, params: Row) -> list[tuple[Any, ...]]:
        from sqlalchemy import text

        return [tuple(r) for r in self.conn.execute(text(sql), params)]

    def many(self, sql: str, params: list[Row]) -> None:
        from sqlalchemy import text

        if params:
            self.conn.execute(text(sql), params)


class StdlibDb:
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Row) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(sql, params)]

    def many(self, sql: str, params: list[Row]) -> None:
        if params:
            self.conn.executemany(sql, params)


def uid_bytes(uid: str) -> bytes:
    """The stored form of a uid (32 lower-case hex digits, validated by every caller)."""
    return bytes.fromhex(uid)


def insert_payload(db: Db, payload: Sequence[Row], *, ignore_known: bool = False) -> None:
    """Store ``payload`` (``executions`` view columns; ``id`` kept when present).

    ``ignore_known``: a row whose uid is stored already is skipped (history merge),
    instead of failing the transaction on the unique uid.
    """
    if not payload:
        return
    tested = _tested_ids(db, {(r["stage"], r["file"]) for r in payload})
    sources = _source_ids(db, {(r["commit_sha"], r["ci_run_id"], r["backend"]) for r in payload})
    with_id = "id" in payload[0]
    # step 8's column, written by every writer since; step 7's copy of older rows has none
    plain = (*_PLAIN, "signature") if "signature" in payload[0] else _PLAIN
    columns = (["id"] if with_id else []) + ["tested_id", "source_id", *plain, "uid"]
    rows = []
    for r in payload:
        row = {c: r[c] for c in plain}
        if with_id:
            row["id"] = r["id"]
        row["tested_id"] = tested[(r["stage"], r["file"])]
        row["source_id"] = sources[(r["commit_sha"], r["ci_run_id"], r["backend"])]
        row["uid"] = uid_bytes(r["uid"])
        rows.append(row)
    tail = " ON CONFLICT (uid) DO NOTHING" if ignore_known else ""
    db.many(f"INSERT INTO execution_rows ({', '.join(columns)}) "
            f"VALUES ({', '.join(':' + c for c in columns)}){tail}", rows)


def runs_of_uids(db: Db, uids: Iterable[str]) -> dict[str, str | None]:
    """uid -> CI run id of the stored executions among ``uids`` (absent: not stored)."""
    wanted = sorted(set(uids))
    out: dict[str, str | None] = {}
    for i in range(0, len(wanted), _CHUNK):
        listed, params = _in_list("u", [uid_bytes(u) for u in wanted[i:i + _CHUNK]])
        for raw, run in db.rows("SELECT e.uid, s.ci_run_id FROM execution_rows e JOIN sources s "
                                f"ON s.id = e.source_id WHERE e.uid IN {listed}", params):
            out[bytes(raw).hex()] = run
    return out


def delete_ids(db: Db, ids: Sequence[int]) -> None:
    """Delete executions, then the keys no execution uses any more (a file that was
    deleted or renamed, a CI run whose rows were all pruned): pruning bounds them too."""
    if not ids:
        return
    for i in range(0, len(ids), _CHUNK):
        listed, params = _in_list("i", ids[i:i + _CHUNK])
        db.many(f"DELETE FROM execution_rows WHERE id IN {listed}", [params])
    db.many("DELETE FROM tested_files WHERE NOT EXISTS (SELECT 1 FROM execution_rows e "
            "WHERE e.tested_id = tested_files.id)", [{}])
    db.many("DELETE FROM sources WHERE NOT EXISTS (SELECT 1 FROM execution_rows e "
            "WHERE e.source_id = sources.id)", [{}])


def _tested_ids(db: Db, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    found = _find_tested(db, keys)
    missing = keys - found.keys()
    if missing:
        db.many("INSERT INTO tested_files (stage, file) VALUES (:stage, :file) "
                "ON CONFLICT DO NOTHING",
                [{"stage": s, "file": f} for s, f in sorted(missing)])
        found.update(_find_tested(db, missing))
    _all_found(keys, found, "tested_files")
    return found


def _find_tested(db: Db, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Looked up by each stage's files, so the cost follows the keys, not the table."""
    by_stage: dict[str, list[str]] = {}
    for stage, file in sorted(keys):
        by_stage.setdefault(stage, []).append(file)
    out: dict[tuple[str, str], int] = {}
    for stage, files in by_stage.items():
        for i in range(0, len(files), _CHUNK):
            listed, params = _in_list("f", files[i:i + _CHUNK])
            for pk, file in db.rows(f"SELECT id, file FROM tested_files WHERE stage = :stage "
                                    f"AND file IN {listed}", {"stage": stage, **params}):
                out[(stage, file)] = int(pk)
    return out


Source = tuple[str | None, str | None, str]


def _source_ids(db: Db, keys: set[Source]) -> dict[Source, int]:
    found = _find_sources(db, keys)
    missing = keys - found.keys()
    if missing:
        db.many("INSERT INTO sources (commit_sha, ci_run_id, backend) "
                "VALUES (:commit, :run, :backend) ON CONFLICT DO NOTHING",
                [{"commit": c, "run": r, "backend": b}
                 for c, r, b in sorted(missing, key=_nulls_first)])
        found.update(_find_sources(db, missing))
    _all_found(keys, found, "sources")
    return found


def _find_sources(db: Db, keys: set[Source]) -> dict[Source, int]:
    # NULL is a value here: SQLite's IS, PostgreSQL's IS NOT DISTINCT FROM. Of two rows
    # for one key (writers racing on a NULL) the first is used; the view reads both.
    same = "IS" if db.dialect == "sqlite" else "IS NOT DISTINCT FROM"
    out: dict[Source, int] = {}
    for commit, run, backend in keys:
        rows = db.rows(f"SELECT MIN(id) FROM sources WHERE commit_sha {same} :commit AND "
                       f"ci_run_id {same} :run AND backend = :backend",
                       {"commit": commit, "run": run, "backend": backend})
        if rows and rows[0][0] is not None:
            out[(commit, run, backend)] = int(rows[0][0])
    return out


def _all_found(keys: set[Any], found: dict[Any, int], table: str) -> None:
    """A key inserted (or found conflicting) and still not readable means the database
    does not show this transaction what it committed: say so, never a bare KeyError."""
    lost = keys - found.keys()
    if lost:
        from testfleet.store.errors import StoreError

        raise StoreError(f"{table}: {len(lost)} key(s) written but not readable back in the same "
                         f"transaction, e.g. {sorted(lost, key=repr)[0]!r}; is the connection's "
                         "isolation level READ COMMITTED?")


def _in_list(prefix: str, values: Sequence[Any]) -> tuple[str, Row]:
    """``(:p0, :p1, ...)`` and its parameters: the same SQL text on every engine."""
    params = {f"{prefix}{j}": v for j, v in enumerate(values)}
    return "(" + ", ".join(":" + name for name in params) + ")", params


def _nulls_first(key: Source) -> tuple[str, str, str]:
    return (key[0] or "", key[1] or "", key[2])
