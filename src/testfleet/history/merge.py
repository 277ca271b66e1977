"""Fold bundles into the history database: all of them in one transaction, or none.

Every bundle is read and verified (:func:`testfleet.history.bundle.read_file`) and
admitted by the trust rule (:mod:`testfleet.history.trust`) before the database is
opened for writing; one bad or refused bundle leaves the database untouched.
Records are matched by ``uid``: a record already stored is skipped, so merging a
bundle twice adds nothing; testcase rows come in with their execution, exactly when it
is new. The one change made to a stored record is taking trust away: a gate run that
a bundle carries as untrusted (``gate untrust`` in another database) is untrusted
here too, and a trusted copy never gives trust back. Then executions and testcases
are pruned by the rules of ``testfleet db prune`` (same code, same defaults), in the
same transaction, so a history file kept in a CI cache stays bounded.

Several merges into one SQLite history at once (a workflow's merge steps, a matrix of
them) take turns: one that finds the database locked waits, says so, and tries the
whole transaction again with backoff until :data:`MERGE_WAIT` has passed (#36), rather
than failing a CI step on SQLite's busy timeout.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from testfleet.history.bundle import Bundle, BundleError, GateValueRecord, read_file
from testfleet.history.screen import bound_times, conflicts, stored_conflicts
from testfleet.history.trust import admit
from testfleet.store.durations import FUTURE_SKEW
from testfleet.store.errors import StoreLocked
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from testfleet.documents.history import (
        AlreadyPresentDoc,
        FutureTable,
        HistoryRowsDoc,
        MergeResultDoc,
        RecordCountsDoc,
    )
    from testfleet.store.core import Store

#: ``testfleet db prune``'s default: executions kept per (stage, file) and outcome class.
DEFAULT_KEEP = 50
_CHUNK = 500
#: How long a merge waits for the history database while other merges hold it (seconds):
#: long enough for a queue of large merges on a loaded runner (one merge of 20,000
#: executions takes a few seconds; eight at once on two cores, well under a minute).
MERGE_WAIT = 600.0
#: SQLite's own busy timeout for a merge's connection (seconds): short, so that a merge
#: that has to wait says so early; the waiting itself is :func:`wait_while_locked`'s.
MERGE_BUSY_TIMEOUT = 2.0
#: Backoff between attempts (seconds): the first, the longest (short beside a merge, so a
#: waiting merge notices soon that the database is free), and how often a waiting merge
#: repeats that it is still waiting.
_FIRST_PAUSE, _LONGEST_PAUSE, _SAY_EVERY = 0.05, 1.0, 30.0
#: How long the compaction after a committed merge waits for the file at most (seconds):
#: only a reader or a later merge can hold it then, and that merge compacts it again.
_COMPACT_WAIT = 30.0

T = TypeVar("T")


def wait_while_locked(attempt: Callable[[], T], *, deadline: float,
                      say: Callable[[str], None], hint: str = "") -> T:
    """``attempt()``, tried again while it fails with :class:`StoreLocked` (each try has
    already waited SQLite's busy timeout) until ``deadline`` (``time.monotonic()``).

    ``attempt`` must be one whole transaction, so that a failed try changed nothing.
    The pauses double with jitter (waiting merges do not wake together); ``say`` hears
    that the merge waits, when it starts and then every :data:`_SAY_EVERY` seconds.
    Past the deadline the last lock error is raised, saying how long it waited (and
    ``hint``: what sets the wait).
    """
    started = time.monotonic()
    pause = _FIRST_PAUSE
    said: float | None = None
    while True:
        try:
            return attempt()
        except StoreLocked as exc:
            now = time.monotonic()
            waited = now - started
            if now >= deadline:
                raise StoreLocked(f"{exc}; gave up after waiting {waited:.0f} s{hint}") from None
            if said is None or now - said >= _SAY_EVERY:
                say(f"the history database is busy (another merge?); waiting for it "
                    f"({waited:.0f} s so far, giving up in {deadline - now:.0f} s)")
                said = now
            time.sleep(min(pause * random.uniform(0.5, 1.0), max(deadline - now, 0.0)))
            pause = min(pause * 2, _LONGEST_PAUSE)
TABLES = ("executions", "gate_runs", "gate_series", "gate_values", "testcases",
          "failure_signatures")
#: Where those rows are stored (``executions`` is a view over the first three).
STORED_TABLES = ("execution_rows", "tested_files", "sources", *TABLES[1:])


def _none_added() -> RecordCountsDoc:
    return {"executions": 0, "gate_runs": 0, "gate_values": 0, "testcases": 0, "signatures": 0}


def _already_present() -> AlreadyPresentDoc:
    return {"executions": 0, "gate_runs": 0}


def _no_rows() -> HistoryRowsDoc:
    return {"executions": 0, "gate_runs": 0, "gate_series": 0, "gate_values": 0,
            "testcases": 0, "failure_signatures": 0}


@dataclass
class MergeResult:
    """What a merge did, for the command's report."""

    bundles: int = 0
    added: RecordCountsDoc = field(default_factory=_none_added)
    known: AlreadyPresentDoc = field(default_factory=_already_present)
    untrusted: int = 0  # stored gate runs that a bundle's untrust mark took out of the baseline
    # rows dated after the merge, per table
    refused: dict[FutureTable, int] = field(default_factory=dict)
    pruned: int = 0
    notes: list[str] = field(default_factory=list)
    rows: HistoryRowsDoc = field(default_factory=_no_rows)
    size_bytes: int | None = None
    breakers_added: int = 0  # breaker events (#41) the bundles added

    def to_json(self) -> MergeResultDoc:
        return {"bundles": self.bundles, "added": self.added, "already_present": self.known,
                "untrusted": self.untrusted, "future_dated": self.refused, "pruned": self.pruned,
                "notes": self.notes, "rows": self.rows, "size_bytes": self.size_bytes}


def read_bundles(paths: Sequence[Path], base: Path | None = None) -> list[Bundle]:
    """Every bundle verified, or the first problem as a :class:`BundleError`; relative
    paths are read from ``base`` (``-C DIR``)."""
    return [read_file(p, base) for p in paths]


def merge_bundles(store: Store, bundles: Sequence[Bundle], *, allow_untrusted: bool = False,
                  require_ref: str | None = None, keep: int | None = DEFAULT_KEEP,
                  older_than: float | None = None, deadline: float | None = None,
                  say: Callable[[str], None] | None = None) -> MergeResult:
    """Merge ``bundles`` into ``store`` in one transaction; ``keep=None`` skips pruning.

    While other merges hold the database the transaction is tried again until
    ``deadline`` (``time.monotonic()``; default :data:`MERGE_WAIT` from now), telling
    ``say`` that it waits (:func:`wait_while_locked`).
    """
    result = MergeResult(bundles=len(bundles))
    admitted: list[tuple[Bundle, bool]] = []
    refused: list[str] = []
    for bundle in bundles:
        verdict = admit(bundle.payload.source, allow_untrusted=allow_untrusted,
                        require_ref=require_ref)
        if verdict.refused:  # the bundle's name is escaped already; its source's fields not
            refused.append(f"{bundle.name}: refused: {printable(verdict.refused)}")
            continue
        if verdict.note:
            result.notes.append(f"{bundle.name}: {printable(verdict.note)}")
        admitted.append((bundle, verdict.baselines_trusted))
    if refused:
        raise BundleError("nothing merged:\n  " + "\n  ".join(refused))
    admitted = _screen(admitted, time.time() + FUTURE_SKEW, result)
    if deadline is None:
        deadline = time.monotonic() + MERGE_WAIT
    screened = result

    def transaction() -> MergeResult:
        """One try: a fresh copy of the counts, so a try that failed counts nothing."""
        result = copy.deepcopy(screened)
        with store.write() as conn:
            _lock_for_merge(conn)
            _merge_signatures(conn, [b for b, _ in admitted], result)
            new = _merge_executions(conn, [b for b, _ in admitted], result)
            _merge_testcases(conn, [b for b, _ in admitted], new, result)
            _merge_gate_runs(conn, admitted, result)
            _merge_breakers(conn, [b for b, _ in admitted], require_ref, result)
            if keep is not None:
                from testfleet.store.durations import prune
                from testfleet.store.execution_rows import AlchemyDb
                from testfleet.store.signatures import prune_signatures
                from testfleet.store.testcases import prune_cases

                result.pruned = prune(conn, keep, older_than)
                prune_cases(conn, keep, older_than)  # per test, by the same bounds (as db prune)
                prune_signatures(AlchemyDb(conn))
            result.rows = row_counts(conn)
        return result

    result = wait_while_locked(transaction, deadline=deadline, say=say or (lambda _: None),
                               hint=" (history merge --wait)")
    result.size_bytes, note = compact_and_measure(store, deadline=deadline)
    if note:
        result.notes.append(note)
    return result


def _screen(admitted: Sequence[tuple[Bundle, bool]], limit: float,
            result: MergeResult) -> list[tuple[Bundle, bool]]:
    """Each bundle without its rows dated after ``limit``, and the notes saying so and
    naming uids that two bundles carry with different content (see history/screen.py)."""
    kept = []
    for bundle, trusted in admitted:
        bounded = bound_times(bundle, limit)
        note = bounded.note()
        if note:
            result.notes.append(note)
        for table, n in bounded.dropped.items():
            if n:
                result.refused[table] = result.refused.get(table, 0) + n
        kept.append((bounded.bundle, trusted))
    result.notes.extend(conflicts([b for b, _ in kept]))
    return kept


#: Concurrent merges into one PostgreSQL history take turns (transaction-scoped: released
#: at commit or rollback). Each decides what is new from what is stored, then inserts
#: testcase rows for it; two at once both found one execution new and stored its
#: testcases twice (8 at once: 8 copies, #27). SQLite's write transactions are
#: ``BEGIN IMMEDIATE``, already one at a time. The key is testfleet's migration lock's
#: neighbour (store/schema.py).
MERGE_LOCK = 7340402120


def _lock_for_merge(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        from sqlalchemy import text

        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MERGE_LOCK})


def _known(conn: Connection, table: Any, uids: Iterable[str]) -> set[str]:
    from sqlalchemy import select

    wanted = list(uids)
    out: set[str] = set()
    for i in range(0, len(wanted), _CHUNK):
        out.update(conn.execute(select(table.c.uid).where(
            table.c.uid.in_(wanted[i:i + _CHUNK]))).scalars())
    return out


def _merge_signatures(conn: Connection, bundles: Sequence[Bundle], result: MergeResult) -> None:
    """Every bundle's failure signatures; content-addressed, so a known digest is kept."""
    from sqlalchemy import func, select

    from testfleet.store.execution_rows import AlchemyDb
    from testfleet.store.signatures import insert_signatures
    from testfleet.store.tables import failure_signatures

    rows = {s.digest: s.model_dump() for b in bundles for s in b.payload.signatures}
    if not rows:
        return
    count = select(func.count()).select_from(failure_signatures)
    before = int(conn.execute(count).scalar() or 0)
    payload = list(rows.values())
    for i in range(0, len(payload), 5 * _CHUNK):
        insert_signatures(AlchemyDb(conn), payload[i:i + 5 * _CHUNK])
    result.added["signatures"] += int(conn.execute(count).scalar() or 0) - before


def _merge_breakers(conn: Connection, bundles: Sequence[Bundle], require_ref: str | None,
                    result: MergeResult) -> None:
    """The breaker log (#41) of a whole history merges by union; a bundle whose origin may
    not write baselines (a pull request's, another ref's) brings no breaker events: a pull
    request reads the breaker and never changes it."""
    from testfleet.store.breakers import EventRow, insert_events

    rows = []
    for bundle in bundles:
        if not bundle.payload.breakers:
            continue
        if admit(bundle.payload.source, require_ref=require_ref).refused is not None:
            result.notes.append(f"{bundle.name}: its {len(bundle.payload.breakers)} breaker "
                                "event(s) were left out: only default-branch records change "
                                "a breaker")
            continue
        rows += [EventRow(b.uid, b.lane, b.seq, b.at, b.kind, b.run, b.state)
                 for b in bundle.payload.breakers]
    result.breakers_added += insert_events(conn, rows)


def _merge_executions(conn: Connection, bundles: Sequence[Bundle],
                      result: MergeResult) -> dict[str, Any]:
    """Insert the executions not stored yet; returns them by uid (the first copy). A bundle
    whose copy of a stored execution differs from it is named in the notes."""
    from testfleet.store.execution_rows import AlchemyDb, insert_payload, runs_of_uids

    records = [r for b in bundles for r in b.payload.executions]
    first: dict[str, Any] = {}
    for r in records:
        first.setdefault(r.uid, r)
    db = AlchemyDb(conn)
    known = runs_of_uids(db, first)
    if known:
        result.notes.extend(stored_conflicts(bundles, _stored_executions(conn, known)))
    new = {uid: r for uid, r in first.items() if uid not in known}
    rows = [r.model_dump() for r in new.values()]
    for i in range(0, len(rows), 5 * _CHUNK):
        insert_payload(db, rows[i:i + 5 * _CHUNK], ignore_known=True)
    result.added["executions"] += len(rows)
    result.known["executions"] += len(records) - len(rows)
    return new


def _stored_executions(conn: Connection, uids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The stored executions among ``uids``, as the ``executions`` view reads them."""
    from sqlalchemy import select

    from testfleet.store.schema import executions

    wanted = sorted(uids)
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(wanted), _CHUNK):
        for row in conn.execute(select(executions).where(
                executions.c.uid.in_(wanted[i:i + _CHUNK]))):
            out[row.uid] = dict(row._mapping)
    return out


def _merge_testcases(conn: Connection, bundles: Sequence[Bundle], new: dict[str, Any],
                     result: MergeResult) -> None:
    """The testcase rows of the executions just inserted, from the bundle whose copy of
    the execution was stored (two bundles carrying one execution add its rows once)."""
    from testfleet.store.testcases import testcases

    owner: dict[str, int] = {}
    for index, bundle in enumerate(bundles):
        for r in bundle.payload.executions:
            if r.uid in new:
                owner.setdefault(r.uid, index)
    rows = []
    for index, bundle in enumerate(bundles):
        for c in bundle.payload.testcases:
            if owner.get(c.execution) != index:
                continue
            ex = new[c.execution]
            rows.append({"file": ex.file, "stage": ex.stage, "backend": ex.backend, "name": c.name,
                         "outcome": c.outcome, "duration": c.duration, "attempt": ex.attempt,
                         "final": c.final, "commit_sha": ex.commit_sha, "ci_run_id": ex.ci_run_id,
                         "ts": ex.ts, "recorded_at": c.recorded_at, "signature": c.signature})
    for i in range(0, len(rows), 5 * _CHUNK):
        conn.execute(testcases.insert(), rows[i:i + 5 * _CHUNK])
    result.added["testcases"] += len(rows)


def _merge_gate_runs(conn: Connection, admitted: Sequence[tuple[Bundle, bool]],
                     result: MergeResult) -> None:
    """New gate runs of every bundle with their values, in a handful of batched statements
    (series, runs, run keys, values) however many runs there are."""
    from sqlalchemy import select

    from testfleet.store.metrics import (
        _normal_commit,
        coord_hash,
        gate_runs,
        gate_series,
        gate_values,
        insert_ignore,
        path_hash,
    )

    now = time.time()
    runs: dict[str, dict[str, Any]] = {}
    values: list[tuple[str, str, GateValueRecord]] = []
    series: dict[str, dict[str, Any]] = {}
    candidates = {r.uid for bundle, _ in admitted for r in bundle.payload.gate_runs}
    known = _known(conn, gate_runs, candidates)
    _untrust_known(conn, [(b, r) for b, _ in admitted for r in b.payload.gate_runs
                          if r.uid in known and not r.trusted], result)
    owner: dict[str, int] = {}  # run uid -> the bundle whose copy of the run is stored
    for index, (bundle, trusted) in enumerate(admitted):
        by_uid = {r.uid: r for r in bundle.payload.gate_runs}
        for run in bundle.payload.gate_runs:
            if run.uid in known or run.uid in runs:
                result.known["gate_runs"] += 1
                continue
            keep_trust = run.trusted and trusted
            untrusted_at, untrusted_by = run.untrusted_at, run.untrusted_by
            if run.trusted and not keep_trust:
                untrusted_at = now
                untrusted_by = f"history merge: {Path(bundle.name).name} may not write baselines"
            owner[run.uid] = index
            runs[run.uid] = {
                "run_id": run.run_id, "test_path": run.test_path,
                "test_hash": path_hash(run.test_path), "backend": run.backend, "suite": run.suite,
                "env_key": run.env_key, "ci_run_id": run.ci_run_id,
                "commit_sha": _normal_commit(run.commit_sha), "trusted": keep_trust,
                "recorded_at": run.recorded_at, "untrusted_at": untrusted_at,
                "untrusted_by": untrusted_by[:300] if untrusted_by else None, "uid": run.uid,
            }
        seen: set[tuple[str, str, str, str, int]] = set()
        for v in bundle.payload.gate_values:
            if owner.get(v.run) != index or v.key in seen:
                continue
            seen.add(v.key)
            run = by_uid[v.run]
            identity = (run.test_path, run.backend, run.suite, run.env_key)
            h = coord_hash(identity, (v.metric_key, v.steps_key, v.constraint_key, v.step))
            series.setdefault(h, {
                "coord_hash": h, "test_hash": runs[v.run]["test_hash"], "test_path": run.test_path,
                "backend": run.backend, "suite": run.suite, "env_key": run.env_key,
                "metric_key": v.metric_key, "steps_key": v.steps_key,
                "constraint_key": v.constraint_key, "step": v.step})
            values.append((v.run, h, v))
    if not runs:
        return
    rows = list(runs.values())
    for i in range(0, len(rows), _CHUNK):
        conn.execute(gate_runs.insert(), rows[i:i + _CHUNK])
    pks: dict[str, int] = {}
    series_ids: dict[str, int] = {}
    uids, hashes = list(runs), list(series)
    for i in range(0, len(uids), _CHUNK):
        pks.update((u, int(pk)) for u, pk in conn.execute(
            select(gate_runs.c.uid, gate_runs.c.id).where(gate_runs.c.uid.in_(uids[i:i + _CHUNK]))))
    for i in range(0, len(hashes), _CHUNK):
        insert_ignore(conn, gate_series, [series[h] for h in hashes[i:i + _CHUNK]], "coord_hash")
        series_ids.update((h, int(sid)) for h, sid in conn.execute(
            select(gate_series.c.coord_hash, gate_series.c.id)
            .where(gate_series.c.coord_hash.in_(hashes[i:i + _CHUNK]))))
    value_rows = [{"series_id": series_ids[h], "run_pk": pks[uid], "trusted": runs[uid]["trusted"],
                   "value": v.value, "actual_step": v.actual_step} for uid, h, v in values]
    for i in range(0, len(value_rows), 5 * _CHUNK):
        conn.execute(gate_values.insert(), value_rows[i:i + 5 * _CHUNK])
    result.added["gate_runs"] += len(runs)
    result.added["gate_values"] += len(value_rows)


def _untrust_known(conn: Connection, marks: Sequence[tuple[Bundle, Any]],
                   result: MergeResult) -> None:
    """Stored gate runs that a bundle carries as untrusted leave the baseline here too
    (with the bundle's when and why); runs already untrusted are left as they are."""
    from sqlalchemy import select, update

    from testfleet.store.metrics import gate_runs, gate_values

    by_uid: dict[str, tuple[Bundle, Any]] = {}
    for bundle, run in marks:
        by_uid.setdefault(run.uid, (bundle, run))
    uids = list(by_uid)
    now = time.time()
    for i in range(0, len(uids), _CHUNK):
        trusted = conn.execute(select(gate_runs.c.id, gate_runs.c.uid).where(
            gate_runs.c.uid.in_(uids[i:i + _CHUNK]), gate_runs.c.trusted.is_(True))).all()
        for pk, uid in trusted:
            bundle, run = by_uid[uid]
            why = run.untrusted_by or f"untrusted in {Path(bundle.name).name}"
            conn.execute(update(gate_runs).where(gate_runs.c.id == pk).values(
                trusted=False, untrusted_at=run.untrusted_at or now, untrusted_by=why[:300]))
            conn.execute(update(gate_values).where(gate_values.c.run_pk == pk)
                         .values(trusted=False))
            result.untrusted += 1


def row_counts(conn: Connection) -> HistoryRowsDoc:
    from sqlalchemy import func, select

    from testfleet.store.metrics import gate_runs, gate_series, gate_values
    from testfleet.store.schema import executions
    from testfleet.store.tables import failure_signatures
    from testfleet.store.testcases import testcases

    tables = dict(zip(TABLES, (executions, gate_runs, gate_series, gate_values, testcases,
                               failure_signatures), strict=True))
    n = {name: int(conn.execute(select(func.count()).select_from(t)).scalar() or 0)
         for name, t in tables.items()}
    return {"executions": n["executions"], "gate_runs": n["gate_runs"],
            "gate_series": n["gate_series"], "gate_values": n["gate_values"],
            "testcases": n["testcases"], "failure_signatures": n["failure_signatures"]}


def compact_and_measure(store: Store, *,
                        deadline: float | None = None) -> tuple[int | None, str | None]:
    """Size of the history after a merge, in bytes.

    Returns the size (``None`` when unknown) and a warning when compaction failed.
    SQLite: the file is rebuilt (``VACUUM``) and checkpointed out of the write-ahead
    log, so a CI cache stores one complete file with no free pages and full index
    pages (inserts in uid order leave the unique index's pages about two-thirds full):
    every job restores this file, the merge job alone writes it, and rebuilding it
    costs a fraction of a second per 20 MB. Another merge holding the file makes the
    rebuild wait (quietly: the merge is committed) until ``deadline``, at most
    :data:`_COMPACT_WAIT`, so the file the last of several merges leaves is compact too.
    PostgreSQL: the tables' total relation size (``None`` when the role may not read it).
    """
    from sqlalchemy import text

    from testfleet.store.errors import StoreError

    if store.dialect == "sqlite":
        path = store.target.path
        import sqlite3

        def compact() -> None:
            try:
                store.compact()
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc).lower() or "busy" in str(exc).lower():
                    raise StoreLocked(str(exc)) from None
                raise

        note = None
        try:
            limit = time.monotonic() + _COMPACT_WAIT
            wait_while_locked(compact, deadline=min(deadline or limit, limit), say=lambda _: None)
        except (sqlite3.Error, StoreLocked) as exc:
            note = (f"history database {store.target.display} not compacted (the merge itself "
                    f"is committed): {exc}")
        return (path.stat().st_size if path is not None and path.exists() else None), note
    try:
        with store.read() as conn:
            total = sum(int(conn.execute(text(f"SELECT pg_total_relation_size('{t}')")).scalar() or 0)
                        for t in STORED_TABLES)  # fixed table names, not user input
    except StoreError:
        return None, None
    return total, None
