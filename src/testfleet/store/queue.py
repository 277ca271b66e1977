"""Queue mode's tables and statements (#40): a lane's files queued once under the plan's
digest, claimed with ``SELECT ... FOR UPDATE SKIP LOCKED`` under a lease, completed in the
transaction that records the outcome.

The tables sit beside the history, never in it: a pull request's claims and outcomes live
here and nothing here is read as history. Every statement takes a ``Connection`` inside a
transaction the caller opened (``Store.write()``); the decisions (which file next, what an
expired lease or a failure leads to) are ``testfleet.queue.policy``'s, passed in as values,
so that this module holds SQL only. PostgreSQL only: the claim needs row locks that skip
locked rows, which SQLite does not have (queue mode refuses SQLite before it gets here);
the DDL is portable, as every migration step must be.

Time is the server's (``clock_timestamp()``): runners on machines with skewed clocks agree
on when a lease expires.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Double,
    Index,
    Integer,
    String,
    Table,
    and_,
    func,
    insert,
    or_,
    select,
    text,
    update,
)

from testfleet.store.tables import metadata

DIGEST = 100
LANE = 255
FILE = 1024
RUNNER = 255
REASON = 500

queue_lanes = Table(
    "queue_lanes",
    metadata,
    Column("plan_digest", String(DIGEST), primary_key=True),
    Column("lane", String(LANE), primary_key=True),
    Column("files", Integer, nullable=False),
    Column("enqueued_at", Double, nullable=False),
    Column("enqueued_by", String(RUNNER), nullable=False),
    Column("pull_request", Boolean, nullable=False),
    Column("stopped", String(REASON), nullable=True),  # fast-fail: why no file is claimed
)

queue_items = Table(
    "queue_items",
    metadata,
    Column("plan_digest", String(DIGEST), primary_key=True),
    Column("lane", String(LANE), primary_key=True),
    Column("file", String(FILE), primary_key=True),
    Column("position", Integer, nullable=False),  # claim order: longest estimate first
    Column("estimate", Double, nullable=False),
    Column("state", String(16), nullable=False),  # pending | claimed | done
    Column("claim", String(32), nullable=True),  # the current claim's token
    Column("runner", String(RUNNER), nullable=True),  # who holds (or finished) it
    Column("claimed_at", Double, nullable=True),
    Column("lease_until", Double, nullable=True),
    Column("claims", Integer, nullable=False),  # claims so far (each one attempt to run it)
    Column("lost", Integer, nullable=False),  # claims whose lease expired
    Column("infra_retries", Integer, nullable=False),
    Column("avoid_runner", String(RUNNER), nullable=True),  # an infra retry: not this runner
    Column("outcome", String(16), nullable=True),  # the final report's (state done)
    Column("attempts", Integer, nullable=True),
    Column("duration", Double, nullable=True),
    Column("reason", String(REASON), nullable=True),
    Column("finished_at", Double, nullable=True),
)
Index("ix_queue_items_next", queue_items.c.plan_digest, queue_items.c.lane,
      queue_items.c.state, queue_items.c.position)

queue_attempts = Table(
    "queue_attempts",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("plan_digest", String(DIGEST), nullable=False),
    Column("lane", String(LANE), nullable=False),
    Column("file", String(FILE), nullable=False),
    Column("runner", String(RUNNER), nullable=False),
    Column("claim", String(32), nullable=False),
    Column("claimed_at", Double, nullable=False),
    Column("ended_at", Double, nullable=False),
    # final (the file's one report) | expired (lease lost) | requeued (infra retry) |
    # released (runner interrupted) | discarded (outcome of a claim it no longer held)
    Column("status", String(16), nullable=False),
    Column("outcome", String(16), nullable=True),
    Column("detail", String(REASON), nullable=True),
)
Index("ix_queue_attempts_lane", queue_attempts.c.plan_digest, queue_attempts.c.lane,
      queue_attempts.c.file)

QUEUE_TABLES = (queue_lanes, queue_items, queue_attempts)


def create_tables(conn: Connection) -> None:
    """Schema step 9."""
    for table in QUEUE_TABLES:
        table.create(conn)  # with its indexes


@dataclass(frozen=True)
class Claim:
    """One claim this runner holds: the file and the token that proves it is still its."""

    plan_digest: str
    lane: str
    file: str
    token: str
    runner: str
    claimed_at: float
    position: int


@dataclass(frozen=True)
class Held:
    """A claimed row as the expiry decision sees it."""

    file: str
    token: str
    runner: str
    claimed_at: float
    lease_until: float
    lost: int


def server_now(conn: Connection) -> float:
    """The database server's clock (POSIX seconds): one clock for every runner."""
    return float(conn.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one())


def _key(digest: str, lane: str) -> Any:
    return and_(queue_items.c.plan_digest == digest, queue_items.c.lane == lane)


def enqueue(conn: Connection, digest: str, lane: str, items: Sequence[tuple[str, float]],
            *, runner: str, pull_request: bool, now: float) -> bool:
    """Queue ``items`` (file, estimate; in claim order) once per (digest, lane); True when
    this call queued them. Concurrent callers wait on the lane row's key and find it."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    made = conn.execute(pg_insert(queue_lanes).values(
        plan_digest=digest, lane=lane, files=len(items), enqueued_at=now, enqueued_by=runner,
        pull_request=pull_request).on_conflict_do_nothing().returning(queue_lanes.c.lane)).first()
    if made is None:
        return False
    conn.execute(insert(queue_items), [
        {"plan_digest": digest, "lane": lane, "file": file, "position": i, "estimate": est,
         "state": "pending", "claims": 0, "lost": 0, "infra_retries": 0}
        for i, (file, est) in enumerate(items)])
    return True


#: how long a queue lane's rows are kept after their last activity, unless pruned sooner
#: (``testfleet queue prune --older-than DAYS``); a new lane's enqueue prunes older ones
KEEP_DAYS = 30


@dataclass(frozen=True)
class Pruned:
    """What one prune deleted: lanes, their items and their attempts."""

    lanes: int = 0
    items: int = 0
    attempts: int = 0


def prune(conn: Connection, cutoff: float, *, keep: tuple[str, str] | None = None,
          delete: bool = True) -> Pruned:
    """Delete every queue lane (its items and attempts with it) with no activity since
    ``cutoff`` (POSIX seconds): enqueued before it, and no file claimed or finished after
    it. A lane some runner still works on has recent activity and stays; one whose runners
    are all gone (pending files nobody claims any more) goes when it is old enough.
    ``keep``: a (digest, lane) never deleted (the lane being enqueued); ``delete=False``
    counts what would go."""
    recent = select(queue_items.c.plan_digest, queue_items.c.lane).where(or_(
        queue_items.c.claimed_at >= cutoff, queue_items.c.finished_at >= cutoff)).distinct()
    active = {(d, lane) for d, lane in conn.execute(recent)}
    stale = [(d, lane) for d, lane in conn.execute(
        select(queue_lanes.c.plan_digest, queue_lanes.c.lane)
        .where(queue_lanes.c.enqueued_at < cutoff)
        .order_by(queue_lanes.c.enqueued_at))
        if (d, lane) not in active and (d, lane) != keep]
    items = attempts = 0
    for digest, lane in stale:
        of_attempts = and_(queue_attempts.c.plan_digest == digest, queue_attempts.c.lane == lane)
        if not delete:
            attempts += conn.execute(select(func.count()).where(of_attempts)).scalar_one()
            items += conn.execute(select(func.count()).where(_key(digest, lane))).scalar_one()
            continue
        attempts += conn.execute(queue_attempts.delete().where(of_attempts)).rowcount
        items += conn.execute(queue_items.delete().where(_key(digest, lane))).rowcount
        conn.execute(queue_lanes.delete().where(and_(
            queue_lanes.c.plan_digest == digest, queue_lanes.c.lane == lane)))
    return Pruned(len(stale), items, attempts)


def lane_row(conn: Connection, digest: str, lane: str) -> Any:
    return conn.execute(select(queue_lanes).where(
        queue_lanes.c.plan_digest == digest, queue_lanes.c.lane == lane)).first()


def expired_claims(conn: Connection, digest: str, lane: str, now: float) -> list[Held]:
    """Claims of the lane whose lease ran out, locked (rows another runner is handling
    are skipped)."""
    q = queue_items.c
    rows = conn.execute(select(q.file, q.claim, q.runner, q.claimed_at, q.lease_until, q.lost)
                        .where(_key(digest, lane), q.state == "claimed", q.lease_until < now)
                        .with_for_update(skip_locked=True)).all()
    return [Held(*r) for r in rows]


def requeue_expired(conn: Connection, digest: str, lane: str, held: Held, now: float) -> None:
    """The lease ran out: the file goes back, the lost attempt is recorded."""
    q = queue_items.c
    conn.execute(update(queue_items).where(_key(digest, lane), q.file == held.file,
                                           q.claim == held.token)
                 .values(state="pending", claim=None, lease_until=None, lost=q.lost + 1))
    _log(conn, digest, lane, held.file, held.runner, held.token, held.claimed_at, now, "expired",
         None, f"lease expired at {held.lease_until:.3f} without a heartbeat")


def give_up_expired(conn: Connection, digest: str, lane: str, held: Held, now: float,
                    reason: str) -> None:
    """A file that lost its runner too often is reported ERROR, once."""
    finish(conn, Claim(digest, lane, held.file, held.token, held.runner, held.claimed_at, 0),
           outcome="ERROR", attempts=0, duration=0.0, reason=reason, now=now,
           lost_one=True)


def claim_next(conn: Connection, digest: str, lane: str, runner: str, token: str,
               lease: float, now: float, *, take_avoided: bool) -> Claim | None:
    """Lock and claim the first pending file in queue order that no other runner has
    locked (one statement: the ``UPDATE``'s subquery takes the row lock, skipping rows
    another claim holds); ``take_avoided`` also takes one this runner must avoid (an
    infra retry)."""
    q = queue_items.c
    where = [_key(digest, lane), q.state == "pending"]
    if not take_avoided:
        where.append(or_(q.avoid_runner.is_(None), q.avoid_runner != runner))
    first = (select(q.file).where(*where).order_by(q.position).limit(1)
             .with_for_update(skip_locked=True).scalar_subquery())
    row = conn.execute(update(queue_items).where(_key(digest, lane), q.file == first).values(
        state="claimed", claim=token, runner=runner, claimed_at=now, lease_until=now + lease,
        claims=q.claims + 1).returning(q.file, q.position)).first()
    if row is None:
        return None
    return Claim(digest, lane, row.file, token, runner, now, row.position)


def counts(conn: Connection, digest: str, lane: str, runner: str, now: float) -> dict[str, int]:
    """pending, pending that ``runner`` must avoid, live claims of other runners, claimed."""
    q = queue_items.c
    rows = conn.execute(select(q.state, q.avoid_runner, q.runner, q.lease_until)
                        .where(_key(digest, lane), q.state != "done")).all()
    out = {"pending": 0, "avoided": 0, "others_live": 0, "claimed": 0}
    for state, avoid, holder, lease_until in rows:
        if state == "pending":
            out["pending"] += 1
            out["avoided"] += avoid == runner
        elif state == "claimed":
            out["claimed"] += 1
            out["others_live"] += holder != runner and lease_until is not None and \
                lease_until >= now
    return out


def heartbeat(conn: Connection, claim: Claim, lease: float, now: float) -> bool:
    """Extend the lease; False when the claim is no longer this runner's."""
    q = queue_items.c
    done = conn.execute(update(queue_items).where(
        _key(claim.plan_digest, claim.lane), q.file == claim.file, q.claim == claim.token,
        q.state == "claimed").values(lease_until=now + lease))
    return bool(done.rowcount)


def lock_claim(conn: Connection, claim: Claim) -> Any:
    """The claim's row, locked; None when the claim is no longer this runner's."""
    q = queue_items.c
    row = conn.execute(select(queue_items).where(
        _key(claim.plan_digest, claim.lane), q.file == claim.file).with_for_update()).first()
    if row is None or row.claim != claim.token or row.state != "claimed":
        return None
    return row


def finish(conn: Connection, claim: Claim, *, outcome: str, attempts: int, duration: float,
           reason: str, now: float, lost_one: bool = False) -> None:
    """The file's one final report, in the caller's transaction."""
    q = queue_items.c
    conn.execute(update(queue_items).where(
        _key(claim.plan_digest, claim.lane), q.file == claim.file, q.claim == claim.token)
        .values(state="done", claim=None, lease_until=None, outcome=outcome, attempts=attempts,
                duration=duration, reason=reason[:REASON], finished_at=now,
                runner=claim.runner, **({"lost": q.lost + 1} if lost_one else {})))
    _log(conn, claim.plan_digest, claim.lane, claim.file, claim.runner, claim.token,
         claim.claimed_at, now, "final", outcome, reason)


def put_back(conn: Connection, claim: Claim, *, status: str, outcome: str | None, detail: str,
             now: float, avoid: bool) -> None:
    """The file goes back to the queue (an infra retry, or a runner interrupted)."""
    q = queue_items.c
    values: dict[str, Any] = {"state": "pending", "claim": None, "lease_until": None}
    if avoid:
        values.update(avoid_runner=claim.runner, infra_retries=q.infra_retries + 1)
    conn.execute(update(queue_items).where(
        _key(claim.plan_digest, claim.lane), q.file == claim.file, q.claim == claim.token)
        .values(**values))
    _log(conn, claim.plan_digest, claim.lane, claim.file, claim.runner, claim.token,
         claim.claimed_at, now, status, outcome, detail)


def discard(conn: Connection, claim: Claim, *, outcome: str, now: float) -> None:
    """An outcome for a claim this runner no longer held: logged, never reported."""
    _log(conn, claim.plan_digest, claim.lane, claim.file, claim.runner, claim.token,
         claim.claimed_at, now, "discarded", outcome,
         "the lease had expired and the file was put back; this outcome is not its report")


def stop_lane(conn: Connection, digest: str, lane: str, reason: str, now: float) -> int:
    """Fast-fail: no more claims; every pending file gets its one report, NOT_RUN."""
    conn.execute(update(queue_lanes).where(queue_lanes.c.plan_digest == digest,
                                           queue_lanes.c.lane == lane)
                 .values(stopped=reason[:REASON]))
    q = queue_items.c
    done = conn.execute(update(queue_items).where(_key(digest, lane), q.state == "pending")
                        .values(state="done", outcome="NOT_RUN", attempts=0, duration=0.0,
                                reason=f"not run ({reason})"[:REASON], finished_at=now))
    return int(done.rowcount or 0)


def _log(conn: Connection, digest: str, lane: str, file: str, runner: str, token: str,
         claimed_at: float, now: float, status: str, outcome: str | None, detail: str) -> None:
    conn.execute(insert(queue_attempts).values(
        plan_digest=digest, lane=lane, file=file, runner=runner, claim=token,
        claimed_at=claimed_at, ended_at=now, status=status, outcome=outcome,
        detail=(detail or "")[:REASON]))


def items_of(conn: Connection, digest: str) -> list[Any]:
    """Every queued file of a plan, by lane and queue order."""
    q = queue_items.c
    return list(conn.execute(select(queue_items).where(q.plan_digest == digest)
                             .order_by(q.lane, q.position)).all())


def lanes_of(conn: Connection, digest: str) -> list[Any]:
    return list(conn.execute(select(queue_lanes).where(queue_lanes.c.plan_digest == digest)
                             .order_by(queue_lanes.c.lane)).all())


def attempt_counts(conn: Connection, digest: str) -> dict[tuple[str, str, str], int]:
    """(lane, file, status) -> how many attempts ended so."""
    a = queue_attempts.c
    rows = conn.execute(select(a.lane, a.file, a.status, func.count())
                        .where(a.plan_digest == digest)
                        .group_by(a.lane, a.file, a.status)).all()
    return {(lane, file, status): int(n) for lane, file, status, n in rows}


def final_runners(conn: Connection, digest: str) -> dict[tuple[str, str], list[str]]:
    """(lane, file) -> the runners whose attempt was a final report (one, always)."""
    a = queue_attempts.c
    out: dict[tuple[str, str], list[str]] = {}
    for lane, file, runner in conn.execute(select(a.lane, a.file, a.runner).where(
            a.plan_digest == digest, a.status == "final").order_by(a.id)).all():
        out.setdefault((lane, file), []).append(runner)
    return out


def reported_by(conn: Connection, token: str) -> bool:
    """Whether this claim already made its file's final report (a commit whose
    acknowledgement the connection lost: retrying must not report it again)."""
    a = queue_attempts.c
    return conn.execute(select(func.count()).where(a.claim == token, a.status == "final")
                        ).scalar_one() > 0
