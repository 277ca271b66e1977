"""Fold bundles into the history database: all of them in one transaction, or none.

Every bundle is read and verified (:func:`testfleet.history.bundle.read_file`) and
admitted by the trust rule (:mod:`testfleet.history.trust`) before the database is
opened for writing; one bad or refused bundle leaves the database untouched.
Records are matched by ``uid``: a record already stored is skipped, so merging a
bundle twice adds nothing. Then the executions are pruned by the rules of
``testfleet db prune`` (same code, same defaults), in the same transaction, so a
history file kept in a CI cache stays bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.history.bundle import Bundle, BundleError, GateValueRecord, read_file
from testfleet.history.trust import admit

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from testfleet.store.core import Store

#: ``testfleet db prune``'s default: executions kept per (stage, file) and outcome class.
DEFAULT_KEEP = 50
_CHUNK = 500
TABLES = ("executions", "gate_runs", "gate_series", "gate_values")


@dataclass
class MergeResult:
    """What a merge did, for the command's report."""

    bundles: int = 0
    added: dict[str, int] = field(default_factory=lambda: {"executions": 0, "gate_runs": 0,
                                                            "gate_values": 0})
    known: dict[str, int] = field(default_factory=lambda: {"executions": 0, "gate_runs": 0})
    pruned: int = 0
    notes: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    size_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"bundles": self.bundles, "added": self.added, "already_present": self.known,
                "pruned": self.pruned, "notes": self.notes, "rows": self.rows,
                "size_bytes": self.size_bytes}


def read_bundles(paths: Sequence[Path]) -> list[Bundle]:
    """Every bundle verified, or the first problem as a :class:`BundleError`."""
    return [read_file(p) for p in paths]


def merge_bundles(store: Store, bundles: Sequence[Bundle], *, allow_untrusted: bool = False,
                  require_ref: str | None = None, keep: int | None = DEFAULT_KEEP,
                  older_than: float | None = None) -> MergeResult:
    """Merge ``bundles`` into ``store`` in one transaction; ``keep=None`` skips pruning."""
    result = MergeResult(bundles=len(bundles))
    admitted: list[tuple[Bundle, bool]] = []
    refused: list[str] = []
    for bundle in bundles:
        verdict = admit(bundle.payload.source, allow_untrusted=allow_untrusted,
                        require_ref=require_ref)
        if verdict.refused:
            refused.append(f"{bundle.name}: refused: {verdict.refused}")
            continue
        if verdict.note:
            result.notes.append(f"{bundle.name}: {verdict.note}")
        admitted.append((bundle, verdict.baselines_trusted))
    if refused:
        raise BundleError("nothing merged:\n  " + "\n  ".join(refused))
    with store.write() as conn:
        _merge_executions(conn, [r for b, _ in admitted for r in b.payload.executions], result)
        for bundle, trusted in admitted:
            _merge_gate_runs(conn, bundle, trusted, result)
        if keep is not None:
            from testfleet.store.durations import prune

            result.pruned = prune(conn, keep, older_than)
        result.rows = row_counts(conn)
    result.size_bytes = compact_and_measure(store)
    return result


def _known(conn: Connection, table: Any, uids: Iterable[str]) -> set[str]:
    from sqlalchemy import select

    wanted = list(uids)
    out: set[str] = set()
    for i in range(0, len(wanted), _CHUNK):
        out.update(conn.execute(select(table.c.uid).where(
            table.c.uid.in_(wanted[i:i + _CHUNK]))).scalars())
    return out


def _merge_executions(conn: Connection, records: Sequence[Any], result: MergeResult) -> None:
    from testfleet.store.durations import insert_ignoring_known
    from testfleet.store.schema import executions

    fresh: dict[str, dict[str, Any]] = {}
    for r in records:
        fresh.setdefault(r.uid, r.model_dump())
    known = _known(conn, executions, fresh)
    rows = [row for uid, row in fresh.items() if uid not in known]
    for i in range(0, len(rows), 5 * _CHUNK):
        insert_ignoring_known(conn, executions, rows[i:i + 5 * _CHUNK])
    result.added["executions"] += len(rows)
    result.known["executions"] += len(records) - len(rows)


def _merge_gate_runs(conn: Connection, bundle: Bundle, trusted: bool, result: MergeResult) -> None:
    from testfleet.store.metrics import GateRun, StoredValue, gate_runs, write_run

    payload = bundle.payload
    values: dict[str, list[GateValueRecord]] = {}
    for v in payload.gate_values:
        values.setdefault(v.run, []).append(v)
    known = _known(conn, gate_runs, {r.uid for r in payload.gate_runs})
    done: set[str] = set()
    now = time.time()
    for run in payload.gate_runs:
        if run.uid in known or run.uid in done:
            if run.uid not in done:
                result.known["gate_runs"] += 1
                done.add(run.uid)
            continue
        done.add(run.uid)
        keep_trust = run.trusted and trusted
        untrusted = None
        if run.untrusted_at is not None or run.untrusted_by is not None:
            untrusted = (run.untrusted_at or now, run.untrusted_by or "")
        elif run.trusted and not keep_trust:
            untrusted = (now, f"history merge: {Path(bundle.name).name} may not write baselines")
        stored = {v.key: v for v in values.get(run.uid, [])}.values()  # identical repeats once
        write_run(conn, GateRun(run_id=run.run_id, test_path=run.test_path, backend=run.backend,
                                suite=run.suite, env_key=run.env_key, ci_run_id=run.ci_run_id,
                                commit=run.commit_sha, recorded_at=run.recorded_at),
                  [StoredValue(v.metric_key, v.steps_key, v.constraint_key, v.step, v.value,
                               v.actual_step) for v in stored],
                  keep_trust, uid=run.uid, untrusted=untrusted)
        result.added["gate_runs"] += 1
        result.added["gate_values"] += len(stored)


def row_counts(conn: Connection) -> dict[str, int]:
    from sqlalchemy import func, select

    from testfleet.store.metrics import gate_runs, gate_series, gate_values
    from testfleet.store.schema import executions

    tables = dict(zip(TABLES, (executions, gate_runs, gate_series, gate_values), strict=True))
    return {name: int(conn.execute(select(func.count()).select_from(t)).scalar() or 0)
            for name, t in tables.items()}


def compact_and_measure(store: Store) -> int | None:
    """Size of the history after a merge, in bytes.

    SQLite: the changes are checkpointed out of the write-ahead log into the one
    file a CI cache keeps, and the file is rebuilt (``VACUUM``) when pruning left more
    than a quarter of it free, so the cached file shrinks as well as stops growing.
    PostgreSQL: the tables' total relation size (``None`` when the role may not read it).
    """
    from sqlalchemy import text

    from testfleet.store.errors import StoreError

    if store.dialect == "sqlite":
        path = store.target.path
        import sqlite3

        # The DB-API connection directly: VACUUM and checkpoints run outside any
        # transaction, and the engine's connections always begin one.
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            free = cur.execute("PRAGMA freelist_count").fetchone()[0]
            pages = cur.execute("PRAGMA page_count").fetchone()[0]
            if pages and free * 4 > pages:
                cur.execute("VACUUM")
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cur.close()
        except sqlite3.Error as exc:
            raise StoreError(f"history database {store.target.display}: cannot compact it "
                             f"after the merge (the merge itself is committed): {exc}") from None
        finally:
            raw.close()
        return path.stat().st_size if path is not None and path.exists() else None
    try:
        with store.read() as conn:
            total = sum(int(conn.execute(text(f"SELECT pg_total_relation_size('{t}')")).scalar() or 0)
                        for t in TABLES)  # fixed table names, not user input
    except StoreError:
        return None
    return total
