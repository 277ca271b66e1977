"""What the queue holds for a plan: per lane, its files pending, claimed (by whom, for how
long), done and their expired attempts (``testfleet queue status``), and the final reports
reconcile counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from testfleet.documents.queue import SCHEMA, QueueFileDoc, QueueLaneDoc, QueueStatusDoc

if TYPE_CHECKING:
    from testfleet.documents.vocabulary import Outcome
    from testfleet.store import Store


def queue_status(store: Store, plan: Any) -> QueueStatusDoc:
    """The queue of every queue lane of ``plan``; a lane no runner reached yet is
    ``queued: false`` with its planned file count."""
    from testfleet.queue.lane import lane_items, planned_lanes
    from testfleet.store import queue as q

    with store.read() as conn:
        now = q.server_now(conn)
        lanes = {row.lane: row for row in q.lanes_of(conn, plan.digest)}
        items = q.items_of(conn, plan.digest)
        tries = q.attempt_counts(conn, plan.digest)
    by_lane: dict[str, list[Any]] = {}
    for row in items:
        by_lane.setdefault(row.lane, []).append(row)
    out: list[QueueLaneDoc] = []
    for lane, settings in planned_lanes(plan).items():
        row = lanes.get(lane)
        files: list[QueueFileDoc] = []
        counts = {"pending": 0, "claimed": 0, "done": 0, "expired": 0}
        for item in by_lane.get(lane, []):
            expired = tries.get((lane, item.file, "expired"), 0)
            counts[item.state] = counts.get(item.state, 0) + 1
            counts["expired"] += expired
            files.append({
                "file": item.file, "state": item.state, "runner": item.runner,
                "lease_age": (round(max(0.0, now - item.claimed_at), 3)
                              if item.state == "claimed" and item.claimed_at is not None
                              else None),
                "lease_left": (round(item.lease_until - now, 3)
                               if item.state == "claimed" and item.lease_until is not None
                               else None),
                "outcome": cast("Outcome | None", item.outcome), "expired": expired,
                "estimate": float(item.estimate)})
        out.append({
            "lane": lane, "queued": row is not None,
            "planned": len(lane_items(plan, lane)),
            "lease_seconds": settings["lease_seconds"],
            "pending": counts["pending"], "claimed": counts["claimed"],
            "done": counts["done"], "expired": counts["expired"],
            "stopped": row.stopped if row is not None else None,
            "pull_request": bool(row.pull_request) if row is not None else None,
            "files": files})
    return {"schema": SCHEMA, "plan_digest": plan.digest, "lanes": out}


def final_reports(store: Store, plan: Any) -> dict[str, list[tuple[str, str | None,
                                                               tuple[str, ...]]]]:
    """lane -> (file, the outcome of its final report or None while it is pending or
    claimed, the runners that made a final report) of each queued file."""
    from testfleet.store import queue as q

    with store.read() as conn:
        items = q.items_of(conn, plan.digest)
        finals = q.final_runners(conn, plan.digest)
    out: dict[str, list[tuple[str, str | None, tuple[str, ...]]]] = {}
    for item in items:
        out.setdefault(item.lane, []).append((
            item.file, item.outcome if item.state == "done" else None,
            tuple(finals.get((item.lane, item.file), ()))))
    return out
