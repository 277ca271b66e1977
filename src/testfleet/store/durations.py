"""Test executions: what a run records and what planning reads back.

A row is one execution (one attempt) of one test file in one stage. Estimates read
only *passing* executions (``PASSED``, and ``FLAKY`` — it passed on this attempt
after an earlier one failed), newest first, per (stage, file): a file's H200 time
never stands in for its MI300X time. :func:`duration_samples` also reports the
longest recent ``TIMEOUT``, which estimates use as a lower bound.

Timestamps: ``Execution.timestamp`` is a timezone-aware ``datetime`` or a float
POSIX epoch (seconds, UTC); ``None`` means "now". It is stored as epoch seconds.
Naive datetimes are refused: their meaning depends on the machine's zone.

"Newest" means most recently *recorded* first, and only among rows recorded together
by the timestamp: a timestamp comes from the outside (an imported JUnit file says when
it ran), and one dated 9999-12-31 would otherwise stay "newest" forever, pinning
estimates and making ``db prune`` delete the real rows instead of it (issue #17).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, get_args

from testfleet.documents.vocabulary import CaseOutcome, GateMode, GateStatus, Outcome
from testfleet.store.errors import InvalidExecution

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from testfleet.documents.db import StageExecutionsDoc

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
GATE_STATUSES: tuple[GateStatus, ...] = get_args(GateStatus)
GATE_MODES: tuple[GateMode, ...] = get_args(GateMode)
#: A testcase's outcomes (``testcases``); here, without SQLAlchemy, for the bundle model.
CASE_OUTCOMES: tuple[CaseOutcome, ...] = get_args(CaseOutcome)
REASON_MAX = 500
#: Clock skew tolerated between a machine that recorded a row (a runner, a JUnit file's
#: writer) and the one storing it; a time further ahead is refused.
FUTURE_SKEW = 300.0
PASSING = ("PASSED", "FLAKY")
_PASSING_SQL = ", ".join(f"'{o}'" for o in PASSING)  # constants, not user input
_IN_CHUNK = 500


@dataclass(frozen=True)
class Execution:
    """One execution of one test file in one stage, as the runner or an import saw it."""

    file: str
    stage: str
    backend: str
    duration: float
    outcome: str = "PASSED"
    attempt: int = 1
    commit: str | None = None
    ci_run_id: str | None = None
    timestamp: datetime | float | None = None
    # The file's final verdict includes the gate: its own verdict is kept beside it.
    gate_status: str | None = None
    gate_mode: str | None = None
    reason: str | None = None
    final: bool = True  # False: an attempt that was retried (not the file's verdict)
    # A fixed identity (32 hex digits) for a row whose content decides it (a JUnit import:
    # see junit_import.content_uid); None gives the row a new random one.
    uid: str | None = None
    # Incidents (#29): the failure's signature digest (store.signatures); None on a pass.
    signature: str | None = None

    def problems(self) -> list[str]:
        """Why this row must not be stored (empty when it is fine)."""
        out: list[str] = []
        for name in ("file", "stage", "backend"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                out.append(f"{name} must be a non-empty string, got {value!r}")
        if len(self.file or "") > 1024:
            out.append("file path longer than 1024 characters")
        if (isinstance(self.duration, bool) or not isinstance(self.duration, (int, float))
                or not math.isfinite(self.duration) or self.duration < 0):
            out.append(f"duration must be a finite number of seconds >= 0, got {self.duration!r}")
        if self.outcome not in OUTCOMES:
            out.append(f"outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")
        if isinstance(self.attempt, bool) or not isinstance(self.attempt, int) or self.attempt < 1:
            out.append(f"attempt must be an integer >= 1, got {self.attempt!r}")
        for name, limit in (("commit", 64), ("ci_run_id", 255)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or len(value) > limit):
                out.append(f"{name} must be a string of at most {limit} characters or None")
        if self.gate_status is not None and self.gate_status not in GATE_STATUSES:
            out.append(f"gate_status {self.gate_status!r} is not one of {', '.join(GATE_STATUSES)}")
        if self.gate_mode is not None and self.gate_mode not in GATE_MODES:
            out.append(f"gate_mode {self.gate_mode!r} is not one of {', '.join(GATE_MODES)}")
        if (self.gate_status is None) != (self.gate_mode is None):
            out.append("gate_status and gate_mode go together (both set or both None)")
        if self.reason is not None and (not isinstance(self.reason, str)
                                        or len(self.reason) > REASON_MAX):
            out.append(f"reason must be a string of at most {REASON_MAX} characters or None")
        try:
            epoch_seconds(self.timestamp)
        except ValueError as exc:
            out.append(str(exc))
        if self.signature is not None and (not isinstance(self.signature, str)
                                           or len(self.signature) != 16
                                           or self.signature.strip("0123456789abcdef")):
            out.append(f"signature must be 16 lower-case hex digits or None, got "
                       f"{self.signature!r:.40}")
        if self.uid is not None:
            from testfleet.store.identity import UID_PATTERN

            if not isinstance(self.uid, str) or not UID_PATTERN.match(self.uid):
                out.append(f"uid must be 32 lower-case hex digits or None, got {self.uid!r:.60}")
        return out


def epoch_seconds(value: datetime | float | None, *, now: float | None = None) -> float:
    """An aware datetime, an epoch float or None (= now) as POSIX epoch seconds."""
    if value is None:
        return time.time() if now is None else now
    if isinstance(value, datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValueError(f"timestamp {value.isoformat()} is a naive datetime; "
                             "use an aware one (datetime.now(timezone.utc)) or epoch seconds")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"timestamp must be an aware datetime or finite epoch seconds, got {value!r}")
    return float(value)


def validate(rows: Sequence[Execution]) -> None:
    """Raise :class:`InvalidExecution` listing every bad row (nothing is stored then)."""
    bad: list[str] = []
    for i, row in enumerate(rows):
        if not isinstance(row, Execution):
            bad.append(f"row {i}: not an Execution ({type(row).__name__})")
            continue
        for problem in row.problems():
            bad.append(f"row {i} ({row.file!r}, {row.stage!r}): {problem}")
    if bad:
        shown = "\n  ".join(bad[:20])
        more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise InvalidExecution(f"refusing to record {len(rows)} execution(s):\n  {shown}{more}")


def insert_rows(conn: Connection, rows: Sequence[Execution],
                signatures: Sequence[dict[str, Any]] = ()) -> None:
    """Executions and the signature rows they name (store.signatures), in ``conn``'s
    transaction."""
    from testfleet.store.execution_rows import AlchemyDb, insert_payload
    from testfleet.store.signatures import insert_signatures

    db = AlchemyDb(conn)
    if signatures:
        insert_signatures(db, signatures)
    insert_payload(db, execution_payload(rows))


def execution_payload(rows: Sequence[Execution], now: float | None = None) -> list[dict[str, Any]]:
    """The ``executions`` columns of ``rows`` (also written by store.sqlite_read's writer)."""
    from testfleet.store.identity import new_uid

    now = time.time() if now is None else now
    return [
        {
            "file": r.file, "stage": r.stage, "backend": r.backend,
            "duration": float(r.duration), "outcome": r.outcome, "attempt": r.attempt,
            "commit_sha": r.commit, "ci_run_id": r.ci_run_id,
            "ts": epoch_seconds(r.timestamp, now=now), "recorded_at": now, "uid": r.uid or new_uid(),
            "gate_status": r.gate_status, "gate_mode": r.gate_mode, "reason": r.reason,
            "final": bool(r.final), "signature": r.signature,
        }
        for r in rows
    ]


def passing_durations(conn: Connection, stage: str, files: Iterable[str] | None,
                      window: int) -> dict[str, list[float]]:
    """Per file, the durations of the last ``window`` passing executions, newest first.

    Cost grows with files x window, not with the size of the history: each file is an
    index range scan on (stage, file, ts) that stops after ``window`` passing rows
    (one ``LATERAL`` query per chunk of files on PostgreSQL, one small query per file
    on the embedded SQLite, where a query costs no round trip).
    """
    from sqlalchemy import bindparam, select, text

    from testfleet.store.tables import executions as ex

    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    wanted = _wanted_files(conn, stage, files)
    out: dict[str, list[float]] = {}
    if not wanted:
        return out
    if conn.dialect.name == "postgresql":
        lateral = text(
            "SELECT f.file, e.duration FROM unnest(CAST(:files AS text[])) AS f(file) "
            "CROSS JOIN LATERAL (SELECT x.duration, x.recorded_at, x.ts, x.id FROM executions x "
            f"WHERE x.stage = :stage AND x.file = f.file AND x.outcome IN ({_PASSING_SQL}) "
            "ORDER BY x.recorded_at DESC, x.ts DESC, x.id DESC LIMIT :k) AS e "
            "ORDER BY f.file, e.recorded_at DESC, e.ts DESC, e.id DESC"
        )
        for i in range(0, len(wanted), 5 * _IN_CHUNK):
            params = {"files": wanted[i:i + 5 * _IN_CHUNK], "stage": stage, "k": window}
            for file, duration in conn.execute(lateral, params):
                out.setdefault(file, []).append(float(duration))
        return out
    per_file = (
        select(ex.c.duration)
        .where(ex.c.stage == bindparam("stage"), ex.c.file == bindparam("file"),
               ex.c.outcome.in_(PASSING))
        .order_by(ex.c.recorded_at.desc(), ex.c.ts.desc(), ex.c.id.desc())
        .limit(bindparam("k"))
    )
    for file in wanted:
        values = [float(row[0]) for row in
                  conn.execute(per_file, {"stage": stage, "file": file, "k": window})]
        if values:
            out[file] = values
    return out


@dataclass(frozen=True)
class FileSamples:
    """What estimates read for one file in one stage: the last ``window`` passing
    durations (newest first) and the longest ``TIMEOUT`` among its last ``recent``
    executions of any outcome (a timeout is a lower bound of the true duration)."""

    passing: list[float]
    timeout: float | None = None


# kind 0: one row per passing sample, newest first; kind 1: a single aggregate row,
# NULL when none of the last :r executions timed out. ``{file}`` is the file's
# expression (a bind parameter, or a LATERAL column on PostgreSQL). Shared with the
# standard-library reader of store.sqlite_read, so both read exactly the same rows.
SAMPLES_BRANCHES = (
    "SELECT 0 AS kind, p.duration, p.recorded_at, p.ts, p.id FROM (SELECT x.duration, "
    "x.recorded_at, x.ts, x.id "
    "FROM executions x WHERE x.stage = :stage AND x.file = {file} "
    f"AND x.outcome IN ({_PASSING_SQL}) ORDER BY x.recorded_at DESC, x.ts DESC, x.id DESC "
    "LIMIT :k) p "
    "UNION ALL "
    "SELECT 1 AS kind, MAX(r.duration), NULL, NULL, NULL FROM (SELECT y.duration, y.outcome "
    "FROM executions y WHERE y.stage = :stage AND y.file = {file} "
    "ORDER BY y.recorded_at DESC, y.ts DESC, y.id DESC LIMIT :r) r "
    "WHERE r.outcome = 'TIMEOUT'"
)
SAMPLES_PER_FILE = (f"SELECT e.kind, e.duration FROM ({SAMPLES_BRANCHES.format(file=':file')}) "
                    "AS e ORDER BY e.kind, e.recorded_at DESC, e.ts DESC, e.id DESC")


def duration_samples(conn: Connection, stage: str, files: Iterable[str] | None,
                     window: int, recent: int) -> dict[str, FileSamples]:
    """Per file, :class:`FileSamples`; files with neither passing nor recent timed-out
    executions are absent.

    The same cost shape as :func:`passing_durations` — one ``LATERAL`` query per chunk
    of files on PostgreSQL, one small query per file on SQLite — each answering both
    questions with a ``UNION ALL`` of two index range scans on (stage, file, ts).
    """
    from sqlalchemy import text


    for name, value in (("window", window), ("recent", recent)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    wanted = _wanted_files(conn, stage, files)
    if not wanted:
        return {}
    branches = SAMPLES_BRANCHES
    passing: dict[str, list[float]] = {}
    timeouts: dict[str, float] = {}

    def take(file: str, kind: int, duration: float | None) -> None:
        if duration is None:
            return
        if kind == 0:
            passing.setdefault(file, []).append(float(duration))
        else:
            timeouts[file] = float(duration)

    if conn.dialect.name == "postgresql":
        lateral = text(
            "SELECT f.file, e.kind, e.duration FROM unnest(CAST(:files AS text[])) AS f(file) "
            f"CROSS JOIN LATERAL ({branches.format(file='f.file')}) AS e "
            "ORDER BY f.file, e.kind, e.recorded_at DESC, e.ts DESC, e.id DESC"
        )
        for i in range(0, len(wanted), 5 * _IN_CHUNK):
            params = {"files": wanted[i:i + 5 * _IN_CHUNK], "stage": stage, "k": window, "r": recent}
            for file, kind, duration in conn.execute(lateral, params):
                take(file, kind, duration)
    else:
        per_file = text(SAMPLES_PER_FILE)
        for file in wanted:
            params = {"stage": stage, "file": file, "k": window, "r": recent}
            for kind, duration in conn.execute(per_file, params):
                take(file, kind, duration)
    return {file: FileSamples(passing.get(file, []), timeouts.get(file))
            for file in sorted(passing.keys() | timeouts.keys())}


def stage_summary(conn: Connection) -> list[StageExecutionsDoc]:
    """Per stage: executions, passing executions, distinct files, newest timestamp."""
    from sqlalchemy import case, func, select

    from testfleet.store.tables import executions as ex

    query = select(
        ex.c.stage,
        func.count().label("executions"),
        func.sum(case((ex.c.outcome.in_(PASSING), 1), else_=0)).label("passing"),
        func.count(ex.c.file.distinct()).label("files"),
        func.max(ex.c.ts).label("newest"),
    ).group_by(ex.c.stage).order_by(ex.c.stage)
    return [{"stage": row.stage, "executions": int(row.executions), "passing": int(row.passing),
             "files": int(row.files), "newest": float(row.newest)} for row in conn.execute(query)]


def count_run(conn: Connection, ci_run_id: str, stage: str | None = None) -> int:
    from sqlalchemy import func, select

    from testfleet.store.tables import executions as ex

    query = select(func.count()).where(ex.c.ci_run_id == ci_run_id)
    if stage is not None:
        query = query.where(ex.c.stage == stage)
    return int(conn.execute(query).scalar() or 0)


def runs_of_uids(conn: Connection, uids: Sequence[str]) -> dict[str, str | None]:
    """uid -> CI run id of the stored executions among ``uids`` (those not stored are absent)."""
    from testfleet.store.execution_rows import AlchemyDb
    from testfleet.store.execution_rows import runs_of_uids as find

    return find(AlchemyDb(conn), uids)


def prune(conn: Connection, keep: int, older_than: float | None = None) -> int:
    """Delete all but the newest ``keep`` executions per (stage, file) — counted
    separately for passing and other outcomes, so failures never push out the samples
    estimates use — and, when given, every execution before ``older_than`` (epoch).
    Returns the number of rows deleted. Row operations only: no DDL rights needed.

    "Newest" is the order rows were stored in this history (their local id: recorded by
    the runner, imported, or merged from a bundle), not the time a row claims: a merged
    bundle's ``recorded_at`` is the exporter's word, and a claim could otherwise decide
    which real rows are deleted (#27). ``older_than`` is about when a row ran (``ts``)."""
    from sqlalchemy import case, func, or_, select

    from testfleet.store.execution_rows import AlchemyDb, delete_ids
    from testfleet.store.tables import executions as ex

    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an integer >= 1, got {keep!r}")
    passing = case((ex.c.outcome.in_(PASSING), 1), else_=0)
    rn = func.row_number().over(partition_by=(ex.c.stage, ex.c.file, passing),
                                order_by=ex.c.id.desc()).label("rn")
    ranked = select(ex.c.id, ex.c.ts, rn).subquery()
    doomed = select(ranked.c.id).where(
        or_(ranked.c.rn > keep, *([ranked.c.ts < older_than] if older_than is not None else [])))
    # Materialise the ids first: some engines refuse a DELETE whose subquery reads the
    # same table through a window function.
    ids = [int(row[0]) for row in conn.execute(doomed)]
    delete_ids(AlchemyDb(conn), ids)
    return len(ids)


def _wanted_files(conn: Connection, stage: str, files: Iterable[str] | None) -> list[str]:
    """The files to read, sorted: the given ones, or every file with history in ``stage``."""
    if files is not None:
        return sorted(set(files))
    from sqlalchemy import select

    from testfleet.store.tables import executions as ex

    query = select(ex.c.file).where(ex.c.stage == stage).distinct()
    return sorted(row[0] for row in conn.execute(query))
