"""``testfleet queue status --format json`` (``testfleet.queue-status/1``)."""

from __future__ import annotations

from typing import Final, Literal

from typing_extensions import TypedDict

from testfleet.documents.base import closed
from testfleet.documents.vocabulary import Outcome

SCHEMA: Final = "testfleet.queue-status/1"


@closed
class QueueFileDoc(TypedDict):
    """One queued file of a lane."""

    file: str
    state: Literal["pending", "claimed", "done"]
    runner: str | None
    """Who holds the claim (claimed), or made the file's report (done); null: never claimed."""
    lease_age: float | None
    """Seconds since the current claim was made (claimed only)."""
    lease_left: float | None
    """Seconds until the current lease expires without a heartbeat; negative: expired, the
    next claim puts the file back (claimed only)."""
    outcome: Outcome | None
    """The outcome of the file's one final report (done only)."""
    expired: int
    """Claims of this file whose lease expired (its runner was lost)."""
    estimate: float
    """The planned estimate (seconds) the claim order is longest-first by."""


@closed
class QueueLaneDoc(TypedDict):
    """One queue lane of the plan."""

    lane: str
    queued: bool
    """Whether a runner of the lane queued its files yet."""
    planned: int
    """Files the plan gives the lane."""
    lease_seconds: float
    pending: int
    claimed: int
    done: int
    expired: int
    """Leases that expired, over all the lane's files."""
    stopped: str | None
    """Why the lane stopped handing out files (fast-fail); null: it did not."""
    pull_request: bool | None
    """Whether a pull request's run queued it (its outcomes never enter the history)."""
    files: list[QueueFileDoc]


@closed
class QueueStatusDoc(TypedDict):
    """The queue of every queue lane of one plan."""

    schema: Literal["testfleet.queue-status/1"]
    plan_digest: str
    lanes: list[QueueLaneDoc]
