"""The runner-class breaker's log (#41): one row per event of a lane's breaker (a run
observed, opened, closed, forced), each with the lane's whole state after it as its JSON
document (``testfleet.breaker-state/1``). Schema step 10.

An append-only log merges like the rest of the history: a row's ``uid`` is a digest of
its content, so two histories (a bundle, a restored cache) union without conflict, and a
lane's state is its row with the highest ``seq`` (then the newest ``at``). Statements
only; the decisions are ``testfleet.breaker``'s, the reading and writing around them
``testfleet.app.breaker``'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Connection, Double, Index, Integer, String, Table, Text, select

from testfleet.canonical import canonical_json
from testfleet.store.tables import metadata

breaker_events = Table(
    "breaker_events",
    metadata,
    Column("uid", String(32), primary_key=True),
    Column("lane", String(255), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("at", Double, nullable=False),
    Column("kind", String(16), nullable=False),  # observed | opened | closed | forced-*
    Column("run", String(255), nullable=True),  # the CI run observed (None: forced)
    Column("state", Text, nullable=False),  # the lane's state after it, canonical JSON
)
Index("ix_breaker_events_lane", breaker_events.c.lane, breaker_events.c.seq)

#: the most characters of one stored state (its runs and texts are bounded well below)
MAX_STATE = 64_000


def create_tables(conn: Connection) -> None:
    """Schema step 10."""
    breaker_events.create(conn)


@dataclass(frozen=True)
class EventRow:
    """One row of the log, as stored and as a bundle carries it."""

    uid: str
    lane: str
    seq: int
    at: float
    kind: str
    run: str | None
    state: str  # canonical JSON


def event_row(lane: str, seq: int, at: float, kind: str, run: str | None,
              state: dict[str, Any]) -> EventRow:
    """A row with its content-derived identity."""
    text = canonical_json(state)
    uid = hashlib.sha256(canonical_json([lane, seq, at, kind, run, text]).encode()).hexdigest()[:32]
    return EventRow(uid, lane, seq, at, kind, run, text)


def insert_events(conn: Connection, rows: Sequence[EventRow]) -> int:
    """Add the rows not stored yet (by uid); how many were added."""
    if not rows:
        return 0
    known = {u for (u,) in conn.execute(select(breaker_events.c.uid).where(
        breaker_events.c.uid.in_(sorted({r.uid for r in rows}))))}
    new = {r.uid: r for r in rows if r.uid not in known}
    if new:
        conn.execute(breaker_events.insert(), [
            {"uid": r.uid, "lane": r.lane, "seq": r.seq, "at": r.at, "kind": r.kind,
             "run": r.run, "state": r.state} for r in new.values()])
    return len(new)


def read_events(conn: Connection, lanes: Iterable[str] | None = None) -> list[EventRow]:
    """The log (of ``lanes``), each lane's events in order (seq, then time, then uid)."""
    e = breaker_events.c
    query = select(e.uid, e.lane, e.seq, e.at, e.kind, e.run, e.state)
    if lanes is not None:
        query = query.where(e.lane.in_(sorted(set(lanes))))
    rows = [EventRow(*r) for r in conn.execute(query)]
    return sorted(rows, key=lambda r: (r.lane, r.seq, r.at, r.uid))


def latest(rows: Iterable[EventRow]) -> dict[str, EventRow]:
    """Each lane's newest event (the highest seq, then the newest time, then uid)."""
    out: dict[str, EventRow] = {}
    for row in rows:
        mine = out.get(row.lane)
        if mine is None or (row.seq, row.at, row.uid) > (mine.seq, mine.at, mine.uid):
            out[row.lane] = row
    return out


def count_events(conn: Connection) -> int:
    from sqlalchemy import func

    return int(conn.execute(select(func.count()).select_from(breaker_events)).scalar_one())
