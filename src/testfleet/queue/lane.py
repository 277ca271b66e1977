"""A queue lane as the plan gives it: its settings (the jobs' ``queue``) and every one of
its planned files in claim order, whichever job's share each was planned in."""

from __future__ import annotations

from typing import Any

from testfleet.documents.plan import QueueDoc
from testfleet.errors import UsageError
from testfleet.queue.policy import queue_order
from testfleet.runner.model import RunItem


def queue_of(plan: Any, lane: str) -> QueueDoc | None:
    """The lane's queue settings, None for a lane in shard mode. Every job of a lane says
    the same; a plan whose jobs disagree is refused (it was edited, or is corrupt)."""
    docs: list[QueueDoc | None] = [j.queue for j in plan.jobs if j.lane == lane and not j.probe]
    if not docs or all(d is None for d in docs):
        return None
    if any(d != docs[0] for d in docs):
        raise UsageError(f"the plan's jobs of lane {lane} disagree on their queue settings "
                         "(some in queue mode, some not, or different leases); it cannot be "
                         "run as one queue")
    return docs[0]


def lane_items(plan: Any, lane: str) -> tuple[RunItem, ...]:
    """Every planned file of the lane, longest estimate first (the claim order)."""
    items: dict[str, RunItem] = {}
    for job in plan.jobs:
        if job.lane != lane or job.probe:
            continue
        for t in job.tests:
            items[t.file] = RunItem(t.file, float(t.estimate), t.source,
                                    t.command or job.command, t.quarantined)
    order = queue_order((f, i.estimate) for f, i in items.items())
    return tuple(items[f] for f, _ in order)


def planned_lanes(plan: Any) -> dict[str, QueueDoc]:
    """Every queue lane of the plan and its settings."""
    out: dict[str, QueueDoc] = {}
    for lane in sorted({j.lane for j in plan.jobs if j.queue is not None}):
        doc = queue_of(plan, lane)
        if doc is not None:
            out[lane] = doc
    return out
