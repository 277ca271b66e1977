"""Metric-gate history: runs, coordinates (series) and values, in the history database.

Tables (schema step 2; once released, change them only with a new step):

- ``gate_series``: one row per stored identity ``(run identity, metric_key,
  steps_key, constraint_key, step)``; ``coord_hash`` is the SHA-256 of its canonical
  JSON, so identities of any length (a 10,000-character metric key) are looked up
  through a fixed-size unique index that PostgreSQL's B-tree row limit accepts.
- ``gate_runs``: one row per gated file per run: who (``run_id``, CI run id,
  commit), whose history (test, backend, suite, environment key) and ``trusted``.
- ``gate_values``: one value per (series, run). ``trusted`` is copied from the run
  so that the baseline read is an index-only scan of the covering index
  ``(series_id, trusted, run_pk DESC, value)``: newest trusted first, per coordinate,
  reading only the ``window`` entries it needs.

Every statement uses bound parameters; nothing user-supplied is ever spliced
into SQL. Only :func:`create_tables` issues DDL (called from the migration step);
everything else reads and writes rows, so runners can use a role without DDL rights.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from testfleet.store.errors import StoreError
from testfleet.store.identity import new_uid
from testfleet.store.tables import metadata

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from testfleet.documents.gate import GateValueDoc

_ID = BigInteger().with_variant(Integer, "sqlite")
_IN_CHUNK = 2000  # coordinates per baseline query; a run with more is read in a few queries

gate_runs = Table(
    "gate_runs",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", String(255), nullable=False),
    Column("test_path", String(1024), nullable=False),
    Column("test_hash", String(64), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("suite", String(255), nullable=False),
    Column("env_key", Text, nullable=False),
    Column("ci_run_id", String(255), nullable=True),
    Column("commit_sha", String(64), nullable=True),
    Column("trusted", Boolean, nullable=False),
    Column("recorded_at", Double, nullable=False),  # POSIX epoch seconds
    Column("untrusted_at", Double, nullable=True),
    Column("untrusted_by", String(300), nullable=True),
    # Step 4: the run's stable identity (testfleet.store.identity); NULL never after step 4.
    Column("uid", String(32), nullable=True, info={"since": 4}),
)
Index("ux_gate_runs_uid", gate_runs.c.uid, unique=True, info={"since": 4})
Index("ix_gate_runs_run_id", gate_runs.c.run_id)
Index("ix_gate_runs_ci_run_id", gate_runs.c.ci_run_id)
Index("ix_gate_runs_commit_sha", gate_runs.c.commit_sha)
Index("ix_gate_runs_test_hash", gate_runs.c.test_hash, gate_runs.c.id)

gate_series = Table(
    "gate_series",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("coord_hash", String(64), nullable=False, unique=True),
    Column("test_hash", String(64), nullable=False),
    Column("test_path", String(1024), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("suite", String(255), nullable=False),
    Column("env_key", Text, nullable=False),
    Column("metric_key", Text, nullable=False),
    Column("steps_key", Text, nullable=False),
    Column("constraint_key", Text, nullable=False),
    Column("step", Integer, nullable=False),
)
Index("ix_gate_series_test_hash", gate_series.c.test_hash)

gate_values = Table(
    "gate_values",
    metadata,
    Column("series_id", _ID, ForeignKey("gate_series.id"), nullable=False),
    Column("run_pk", _ID, ForeignKey("gate_runs.id"), nullable=False),
    Column("trusted", Boolean, nullable=False),
    Column("value", Double, nullable=False),
    Column("actual_step", Integer, nullable=True),
    PrimaryKeyConstraint("series_id", "run_pk", name="pk_gate_values"),
)
Index("ix_gate_values_baseline", gate_values.c.series_id, gate_values.c.trusted,
      gate_values.c.run_pk.desc(), gate_values.c.value)
Index("ix_gate_values_run", gate_values.c.run_pk)


def create_tables(conn: Connection) -> None:
    """DDL of schema step 2 (called only from the migration; runtime never needs it)."""
    from testfleet.store.tables import create_as_of

    for table in (gate_runs, gate_series, gate_values):
        create_as_of(conn, table, 2)  # with its indexes


# --------------------------------------------------------------------------- data


class InvalidMetricRun(StoreError, ValueError):
    """A run that must not be written (non-finite value, bad identity); nothing was stored."""


@dataclass(frozen=True)
class GateRun:
    """Who wrote a run and whose history it joins."""

    run_id: str
    test_path: str
    backend: str
    suite: str
    env_key: str = ""
    ci_run_id: str | None = None
    commit: str | None = None
    recorded_at: float | None = None

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.test_path, self.backend, self.suite, self.env_key)


@dataclass(frozen=True)
class StoredValue:
    """One coordinate's value: ``(metric_key, steps_key, constraint_key, step)`` + value."""

    metric_key: str
    steps_key: str
    constraint_key: str
    step: int
    value: float
    actual_step: int | None = None

    @property
    def coordinate(self) -> tuple[str, str, str, int]:
        return (self.metric_key, self.steps_key, self.constraint_key, self.step)


@dataclass
class HistoryRow:
    """One stored value with its run, for ``testfleet gate history`` and reports."""

    run_pk: int
    run_id: str
    recorded_at: float
    trusted: bool
    ci_run_id: str | None
    commit: str | None
    backend: str
    suite: str
    env_key: str
    metric_key: str
    steps_key: str
    constraint_key: str
    step: int
    actual_step: int | None
    value: float
    untrusted_by: str | None = None

    def to_json(self) -> GateValueDoc:
        return {
            "run_pk": self.run_pk, "run_id": self.run_id, "recorded_at": self.recorded_at,
            "trusted": self.trusted, "ci_run_id": self.ci_run_id, "commit": self.commit,
            "backend": self.backend, "suite": self.suite, "env_key": self.env_key,
            "metric_key": self.metric_key, "steps_key": self.steps_key,
            "constraint_key": self.constraint_key, "step": self.step,
            "actual_step": self.actual_step, "value": self.value,
            "untrusted_by": self.untrusted_by,
        }


def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def path_hash(test_path: str) -> str:
    return _sha(["test", test_path])


def coord_hash(identity: tuple[str, str, str, str], coordinate: tuple[str, str, str, int]) -> str:
    """The fixed-size key of one stored identity (run identity + coordinate)."""
    return _sha(["coord", *identity, *coordinate])


def coord_hashes(identity: tuple[str, str, str, str],
                 coordinates: Iterable[tuple[str, str, str, int]]) -> dict[str, tuple[str, str, str, int]]:
    """``coord_hash`` of many coordinates of one identity -> coordinate, byte for byte the
    same digests, but the identity is hashed once and each key string encoded once (a
    ``steps="all"`` gate has thousands of coordinates sharing three keys)."""
    def enc(x: Any) -> str:
        return json.dumps(x, ensure_ascii=False)

    base = hashlib.sha256(("[" + ",".join(map(enc, ("coord", *identity))) + ",").encode("utf-8"))
    encoded: dict[str, str] = {}
    out: dict[str, tuple[str, str, str, int]] = {}
    for c in coordinates:
        c = tuple(c)  # type: ignore[assignment]
        parts = []
        for key in c[:3]:
            if key not in encoded:
                encoded[key] = enc(key)
            parts.append(encoded[key])
        h = base.copy()
        h.update((",".join(parts) + f",{enc(c[3])}]").encode("utf-8"))
        out[h.hexdigest()] = c
    return out


def _check_text(name: str, value: Any, limit: int | None, *, optional: bool = False) -> list[str]:
    if value is None and optional:
        return []
    if not isinstance(value, str) or (not value and not optional and name != "env_key"):
        return [f"{name} must be a non-empty string, got {value!r:.80}"]
    if "\x00" in value:
        return [f"{name} must not contain NUL characters"]
    if limit is not None and len(value) > limit:
        return [f"{name} is longer than {limit} characters"]
    return []


def validate_run(run: GateRun, values: Sequence[StoredValue]) -> None:
    """Every reason this run must not be written, raised together before any write."""
    problems = (
        _check_text("run_id", run.run_id, 255) + _check_text("test_path", run.test_path, 1024)
        + _check_text("backend", run.backend, 64) + _check_text("suite", run.suite, 255)
        + _check_text("env_key", run.env_key, None)
        + _check_text("ci_run_id", run.ci_run_id, 255, optional=True)
        + _check_text("commit", run.commit, 64, optional=True)
    )
    seen: set[tuple[str, str, str, int]] = set()
    for i, v in enumerate(values):
        where = f"value {i} ({v.metric_key[:60]!r}, step {v.step})"
        for name in ("metric_key", "steps_key", "constraint_key"):
            problems += [f"{where}: {p}" for p in _check_text(name, getattr(v, name), None)]
        if isinstance(v.step, bool) or not isinstance(v.step, int) or v.step < -1:
            problems.append(f"{where}: step must be an integer >= -1")
        if isinstance(v.value, bool) or not isinstance(v.value, (int, float)):
            problems.append(f"{where}: value must be a number, got {v.value!r:.40}")
        elif not math.isfinite(v.value):
            problems.append(f"{where}: value {v.value!r} is not finite; only finite values "
                            "enter the history")
        if v.coordinate in seen:
            problems.append(f"{where}: coordinate given twice")
        seen.add(v.coordinate)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise InvalidMetricRun(f"refusing to write gate run {run.run_id!r} for "
                               f"{run.test_path!r}:\n  {shown}{more}")


# --------------------------------------------------------------------------- statements


def insert_ignore(conn: Connection, table: Table, rows: list[dict[str, Any]], key: str) -> None:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        conn.execute(pg_insert(table).on_conflict_do_nothing(index_elements=[key]), rows)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        conn.execute(sqlite_insert(table).on_conflict_do_nothing(index_elements=[key]), rows)


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def write_run(conn: Connection, run: GateRun, values: Sequence[StoredValue], trusted: bool, *,
              uid: str | None = None, untrusted: tuple[float, str] | None = None) -> int:
    """Insert one run and its values in the caller's transaction; returns the run's key.

    ``uid`` keeps the identity of a run copied from elsewhere (a history bundle);
    ``untrusted`` is its ``(untrusted_at, untrusted_by)`` when it is not trusted."""
    from sqlalchemy import select

    ident = run.identity
    thash = path_hash(run.test_path)
    hashes = {c: h for h, c in coord_hashes(ident, [v.coordinate for v in values]).items()}
    if values:
        series_rows = [
            {"coord_hash": hashes[v.coordinate], "test_hash": thash, "test_path": run.test_path,
             "backend": run.backend, "suite": run.suite, "env_key": run.env_key,
             "metric_key": v.metric_key, "steps_key": v.steps_key,
             "constraint_key": v.constraint_key, "step": v.step}
            for v in values
        ]
        insert_ignore(conn, gate_series, series_rows, "coord_hash")
    ids: dict[str, int] = {}
    for chunk in _chunks(list(hashes.values()), _IN_CHUNK):
        for h, sid in conn.execute(select(gate_series.c.coord_hash, gate_series.c.id)
                                   .where(gate_series.c.coord_hash.in_(chunk))):
            ids[h] = sid
    commit = _normal_commit(run.commit)
    recorded_at = run.recorded_at if run.recorded_at is not None else time.time()
    run_pk = conn.execute(
        gate_runs.insert().returning(gate_runs.c.id),
        {"run_id": run.run_id, "test_path": run.test_path, "test_hash": thash,
         "backend": run.backend, "suite": run.suite, "env_key": run.env_key,
         "ci_run_id": run.ci_run_id, "commit_sha": commit,
         "trusted": bool(trusted), "recorded_at": recorded_at, "uid": uid or new_uid(),
         "untrusted_at": untrusted[0] if untrusted else None,
         "untrusted_by": untrusted[1][:300] if untrusted else None},
    ).scalar_one()
    if values:
        conn.execute(gate_values.insert(), [
            {"series_id": ids[hashes[v.coordinate]], "run_pk": run_pk, "trusted": bool(trusted),
             "value": float(v.value), "actual_step": v.actual_step}
            for v in values
        ])
    return int(run_pk)


def read_baselines(
    conn: Connection,
    identity: tuple[str, str, str, str],
    coordinates: Sequence[tuple[str, str, str, int]],
    limit: int,
) -> dict[tuple[str, str, str, int], list[float]]:
    """Newest-first trusted values, at most ``limit`` per coordinate, in ONE query.

    PostgreSQL: a correlated ``ARRAY(SELECT ... LIMIT)`` per coordinate, so each
    coordinate costs one descent of the covering index, reads only ``limit``
    entries and comes back as one row. SQLite: a join bounded per coordinate by
    its ``limit``-th newest trusted run, over the same index (see
    :func:`_bounded_query`). More than ``_IN_CHUNK`` coordinates are read in as
    many queries as chunks. Coordinates without trusted history are absent.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
    by_hash = coord_hashes(identity, coordinates)
    out: dict[tuple[str, str, str, int], list[float]] = {}
    read = _read_pg if conn.dialect.name == "postgresql" else _read_bounded
    # The test's own series first (a selective index), then the exact coordinates.
    thash = path_hash(identity[0])
    for chunk in _chunks(list(by_hash), _IN_CHUNK):
        for h, values in read(conn, thash, chunk, limit):
            out[by_hash[h]] = values
    return out


def _bounded_query(thash: str, hashes: Sequence[str], limit: int) -> Any:
    """SQLite: rows of each coordinate from its ``limit``-th newest trusted run on.

    A correlated scalar subquery finds that run (one index seek, ``limit`` entries
    walked); the join then reads exactly those index entries. A ``row_number()``
    window would instead read and sort every trusted value of every coordinate.
    """
    from sqlalchemy import and_, func, select, true

    gs, gv = gate_series, gate_values
    x = gate_values.alias("x")
    kth = (select(x.c.run_pk)
           .where(x.c.series_id == gs.c.id, x.c.trusted == true())
           .order_by(x.c.run_pk.desc())
           .limit(1).offset(limit - 1)
           .scalar_subquery())
    return (select(gs.c.coord_hash, gv.c.value)
            .select_from(gs.join(gv, and_(gv.c.series_id == gs.c.id, gv.c.trusted == true())))
            .where(gs.c.test_hash == thash, gs.c.coord_hash.in_(hashes),
                   gv.c.run_pk >= func.coalesce(kth, 0))
            .order_by(gs.c.id, gv.c.run_pk.desc()))


# PostgreSQL: per coordinate, the newest ``limit`` trusted values as one array, read by a
# correlated ARRAY(subquery ... ORDER BY ... LIMIT): one descent of the covering index per
# coordinate, ``limit`` entries read, one row back per coordinate, array in subquery order.
# Fixed text; the test hash, the coordinate hashes and the limit are bound parameters.
_PG_BASELINE_SQL = """
SELECT s.coord_hash,
       ARRAY(SELECT v.value
             FROM gate_values v
             WHERE v.series_id = s.id AND v.trusted = true
             ORDER BY v.run_pk DESC
             LIMIT :limit) AS vals
FROM gate_series s
WHERE s.test_hash = :test_hash AND s.coord_hash = ANY(:hashes)
"""


def _read_pg(conn: Connection, thash: str, hashes: Sequence[str],
             limit: int) -> Iterable[tuple[str, list[float]]]:
    from sqlalchemy import bindparam, text
    from sqlalchemy.dialects.postgresql import ARRAY

    query = text(_PG_BASELINE_SQL).bindparams(
        bindparam("hashes", type_=ARRAY(String(64))), bindparam("limit", type_=Integer))
    params = {"test_hash": thash, "hashes": list(hashes), "limit": limit}
    for h, vals in conn.execute(query, params).all():
        if vals:
            yield h, [float(v) for v in vals]


def _read_bounded(conn: Connection, thash: str, hashes: Sequence[str],
                  limit: int) -> Iterable[tuple[str, list[float]]]:
    grouped: dict[str, list[float]] = {}
    for h, value in conn.execute(_bounded_query(thash, hashes, limit)).all():
        grouped.setdefault(h, []).append(float(value))
    return grouped.items()


def read_baseline_one(
    conn: Connection,
    identity: tuple[str, str, str, str],
    coordinate: tuple[str, str, str, int],
    limit: int,
) -> list[float]:
    """The same answer for one coordinate (what per-coordinate gates do; kept for comparison)."""
    from sqlalchemy import select, true

    query = (
        select(gate_values.c.value)
        .select_from(gate_series.join(gate_values, gate_values.c.series_id == gate_series.c.id))
        .where(gate_series.c.coord_hash == coord_hash(identity, coordinate),
               gate_values.c.trusted == true())
        .order_by(gate_values.c.run_pk.desc())
        .limit(limit)
    )
    return [float(v) for v in conn.execute(query).scalars()]


_HEX = re.compile(r"^[0-9a-fA-F]{7,64}$")


def _normal_commit(commit: str | None) -> str | None:
    """Hex SHAs are stored lower-case so that prefixes match however they were typed."""
    return commit.lower() if commit is not None and _HEX.match(commit) else commit


def mark_untrusted(conn: Connection, *, run_id: str | None = None, ci_run_id: str | None = None,
                   commit: str | None = None) -> int:
    """Take runs out of the baseline; returns how many runs changed (already untrusted: 0).

    ``commit`` matches exactly, or as a prefix when it is 7-64 hex digits (an
    abbreviated SHA, as ``git log --oneline`` prints it).
    """
    from sqlalchemy import select, update

    given = [(n, v) for n, v in (("run_id", run_id), ("ci_run_id", ci_run_id),
                                 ("commit", commit)) if v is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of run_id, ci_run_id, commit")
    name, value = given[0]
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r:.80}")
    if name == "run_id":
        cond = gate_runs.c.run_id == value
    elif name == "ci_run_id":
        cond = gate_runs.c.ci_run_id == value
    elif _HEX.match(value):
        cond = gate_runs.c.commit_sha.like(value.lower() + "%") | (gate_runs.c.commit_sha == value)
    else:
        cond = gate_runs.c.commit_sha == value
    pks = list(conn.execute(select(gate_runs.c.id).where(cond, gate_runs.c.trusted.is_(True)))
               .scalars())
    if not pks:
        return 0
    now = time.time()
    for chunk in _chunks(pks, _IN_CHUNK):
        conn.execute(update(gate_runs).where(gate_runs.c.id.in_(chunk))
                     .values(trusted=False, untrusted_at=now, untrusted_by=f"{name} {value}"[:300]))
        conn.execute(update(gate_values).where(gate_values.c.run_pk.in_(chunk))
                     .values(trusted=False))
    return len(pks)


def history(conn: Connection, test_path: str, *, metric_key: str | None = None,
            runs: int = 20) -> list[HistoryRow]:
    """The values of the last ``runs`` gated runs of a test (all backends/suites/envs), newest first."""
    from sqlalchemy import select

    thash = path_hash(test_path)
    run_pks = list(conn.execute(
        select(gate_runs.c.id).where(gate_runs.c.test_hash == thash)
        .order_by(gate_runs.c.id.desc()).limit(runs)).scalars())
    if not run_pks:
        return []
    r, s, v = gate_runs, gate_series, gate_values
    query = (
        select(r.c.id, r.c.run_id, r.c.recorded_at, r.c.trusted, r.c.ci_run_id, r.c.commit_sha,
               r.c.backend, r.c.suite, r.c.env_key, s.c.metric_key, s.c.steps_key,
               s.c.constraint_key, s.c.step, v.c.actual_step, v.c.value, r.c.untrusted_by)
        .select_from(v.join(r, r.c.id == v.c.run_pk).join(s, s.c.id == v.c.series_id))
        .where(v.c.run_pk.in_(run_pks))
        .order_by(r.c.id.desc(), s.c.metric_key, s.c.steps_key, s.c.constraint_key, s.c.step)
    )
    if metric_key is not None:
        query = query.where(s.c.metric_key == metric_key)
    return [HistoryRow(int(row[0]), row[1], float(row[2]), bool(row[3]), row[4], row[5], row[6],
                       row[7], row[8], row[9], row[10], row[11], int(row[12]), row[13],
                       float(row[14]), row[15]) for row in conn.execute(query)]
